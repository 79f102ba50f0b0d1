"""Claim verification: the pre-check and the model verifiers."""
