"""Answering a question: the retriever, the verified query engine, its events and prompts."""
