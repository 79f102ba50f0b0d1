"""One module per verifier; each registers itself with @register_verifier. All are imported by
pipeline.verification.registry.load_verifiers."""
