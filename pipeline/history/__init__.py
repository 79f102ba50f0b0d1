"""Stored runs read back and presented."""
