"""Opt-in export of run traces to an OpenTelemetry collector (Phoenix, Langfuse, Jaeger…) in OpenInference's
conventions. Our steps are LlamaIndex spans, so OpenInference's LlamaIndex instrumentor sends the same tree
the drilldown shows, with LlamaIndex's LLM spans carrying their prompts and completions.

Needs the optional packages in requirements-otel.txt. Headers (for example Langfuse's Authorization) come
from OpenTelemetry's own OTEL_EXPORTER_OTLP_HEADERS variable.
"""

from __future__ import annotations

import threading

from pipeline.errors import ConfigError

SERVICE_NAME = "rag-quality-workbench"
_guard = threading.Lock()
_exporting: set[str] = set()


def export_traces(endpoint: str, exporter=None) -> bool:
    """Send every trace from now on to `endpoint` (base URL; /v1/traces is added) or to `exporter`.
    Once per process and endpoint; False when it was already on."""
    key = endpoint or repr(exporter)
    with _guard:
        if key in _exporting:
            return False
        provider = _provider(endpoint, exporter)
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

        instrumentor = LlamaIndexInstrumentor()
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        instrumentor.instrument(tracer_provider=provider)
        _exporting.clear()
        _exporting.add(key)
        return True


def _provider(endpoint: str, exporter):
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:
        raise ConfigError(
            f"exporting traces to {endpoint or 'a collector'} needs packages that are not installed ({exc.name})",
            fix="`.venv/bin/pip install -r requirements-otel.txt`, or unset WORKBENCH_OTLP_ENDPOINT",
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    return provider
