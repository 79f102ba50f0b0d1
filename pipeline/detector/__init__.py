"""The hallucination-detector benchmark."""
