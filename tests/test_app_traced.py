"""Traced runs in the app: the drilldown of a verified trace says where its answer came from and shows the
application's spans beside the check's; one kept without verdicts says why, and untrusted text stays text."""

import re

import pytest
from conftest import ROOT
from otlp_traces import TOWER, protobuf_body, rag_trace, span
from starlette.testclient import TestClient
from streamlit.testing.v1 import AppTest
from test_app import fresh_streamlit_caches, open_runs_page, show_tab  # noqa: F401 - the fixture

from pages.views.markup import escape_markdown
from pipeline.collect.receiver import create_app
from pipeline.collect.worker import OnlineWorker
from pipeline.history.runs import load_run
from store.history import RunFilter, find_runs


def receive(settings, db, *traces) -> list[int]:
    client = TestClient(create_app(db, 1_000_000))
    for spans in traces:
        reply = client.post(
            "/v1/traces", content=protobuf_body(spans), headers={"content-type": "application/x-protobuf"}
        )
        assert reply.status_code == 200
    OnlineWorker(settings, db, settle_s=0).run_once()
    return [r["id"] for r in find_runs(db, RunFilter(kinds=["traced"])).rows]


@pytest.mark.slow
def test_a_traced_runs_drilldown_shows_its_service_contexts_and_both_traces(fake, settings, db):
    (run_id,) = receive(
        settings, db, rag_trace("How tall is the Eiffel Tower?", "It is 330 metres tall.", [(TOWER, "tower.md", 0.8)])
    )
    at = open_runs_page(str(run_id))
    assert "kind **traced**" in at.markdown[0].value and "pipeline **tower\\-app**" in at.markdown[0].value
    origin = escape_markdown("Answer written by service tower-app and received as a trace")
    assert any(origin in i.value for i in at.info)
    assert any(escape_markdown("Its spans were read as openinference.") in i.value for i in at.info)
    headings = [s.value for s in show_tab(at, "Retrieval").subheader]
    assert "Retrieved contexts (from the trace)" in headings
    trace = next(d.value for d in show_tab(at, "Trace").dataframe if "step" in d.value.columns)
    steps = [re.sub(r"^[▾▸] \d+ ", "", s.split("└ ")[-1].strip()) for s in trace["step"]]  # fold markers off
    assert steps[:3] == ["RetrieverQueryEngine.query", "VectorIndexRetriever.retrieve", "Ollama.chat"]
    assert "traced answer" in steps


def test_a_trace_kept_without_verdicts_says_why_and_its_text_stays_text(fake, settings, db):
    hostile = "**bold** <script>alert(1)</script> [link](http://evil.example)"
    agent = span(b"\x07" * 16, "agent", "AGENT", {"input.value": hostile, "output.value": "hello"})
    (run_id,) = receive(settings, db, [agent])
    at = open_runs_page(str(run_id))
    assert any(
        i.value.startswith(
            escape_markdown("Not evaluated: no span carries retrieved documents; spans seen: 1, kinds: agent 1")
        )
        for i in at.info
    )
    question = next(t.value for t in at.text if "script" in t.value)
    assert question == hostile  # shown as text, not as markup


def test_settings_and_health_says_what_collect_received_and_what_waits(fake, settings, db):
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/settings.py").run()
    assert any("No traces received yet" in i.value for i in at.info)
    client = TestClient(create_app(db, 1_000_000))
    for spans in (rag_trace("Q1?", "A.", [(TOWER, "tower.md", 0.8)]), rag_trace("Q2?", "A.", [(TOWER, "t.md", 0.8)])):
        client.post("/v1/traces", content=protobuf_body(spans), headers={"content-type": "application/x-protobuf"})
    at.run()
    line = escape_markdown("6 spans in 2 traces received; 0 made into runs, 2 waiting for the online worker")
    assert any(line in m.value for m in at.markdown), [m.value for m in at.markdown]


def test_a_traced_runs_trace_viewer_opens_the_applications_llm_span_with_its_call(fake, settings, db):
    (run_id,) = receive(
        settings, db, rag_trace("How tall is the Eiffel Tower?", "It is 330 metres tall.", [(TOWER, "tower.md", 0.8)])
    )
    stored = load_run(db, run_id)
    traced = [c for c in stored.calls if c["origin"] == "traced"]
    assert traced and all(c["span_id"] for c in traced)
    at = open_runs_page(str(run_id), tab="Trace")
    llm = traced[0]["span_id"]  # the application's LLM span, among the check's own spans
    assert [s.name for s in stored.spans if s.span_id == llm] == ["Ollama.chat"]
    at.selectbox(key=f"trace-{run_id}-span").set_value(llm).run()
    assert not at.exception, at.exception
    trace_tab = next(t for t in at.tabs if t.label == "Trace")
    codes = [c.value for c in trace_tab.code]
    assert any("Question: How tall is the Eiffel Tower?" in c for c in codes), codes
    assert "It is 330 metres tall." in codes
    assert any("origin traced" in m.value for m in trace_tab.markdown)
