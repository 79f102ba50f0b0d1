"""Performance benchmarks: each prints figures against its target (not pass/fail timing tests)."""
