"""Claim verification: the verifier interface (base.py), its registry (registry.py), the verifiers
(verifiers/, one module each), the configured chain (chain.py) and the faithfulness step
(faithfulness.py) that runs the chain over an answer's claims."""
