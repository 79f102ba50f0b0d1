"""Traces in: receive any application's OpenTelemetry traces (OTLP over HTTP), keep them, and judge the
question-and-answer ones online (`python -m pipeline collect`)."""
