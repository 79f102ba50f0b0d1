"""The model layer: every model call, the cache, the record of calls, health checks."""
