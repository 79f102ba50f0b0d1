"""The knowledge base: ingesting documents."""
