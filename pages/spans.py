"""Spans searched across runs or within one: by name, kind, duration and failure ("runs whose retrieval took over
1 s", "LLM spans that failed"), our own runs' and received traces' alike; each span links to its run."""

from pages.views.common import page_setup
from pages.views.span_search import show_span_search

settings, db = page_setup(__file__)
show_span_search(db)
