"""Judge calibration against people."""
