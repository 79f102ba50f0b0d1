"""The command line (python -m pipeline) and its terminal output."""
