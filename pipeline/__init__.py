"""Everything that thinks: settings, the LLM seam, prompts, knowledge base, query engine, faithfulness."""
