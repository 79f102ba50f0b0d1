"""Regression detection between evaluation runs."""
