"""Stored runs read back: one run for its drilldown, lists, exports, and the runs of evaluations."""
