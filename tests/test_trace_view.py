"""The trace viewer's rows (issue 29): the span tree depth-first with depth, offsets from the trace's start,
durations, calls linked per span, folding; and in the app, a selected span shows its calls' prompt and completion."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from test_app import QUESTION, fresh_streamlit_caches, open_runs_page  # noqa: F401 - the fixture

from pages.views.navigation import DRILLDOWN_TABS
from pipeline.history.trace_view import (
    calls_of,
    fold_marker,
    prompt_as_text,
    trace_rows,
    tree_label,
    unlinked_calls,
    visible_rows,
)
from store.records import SpanRecord

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def at(ms: float) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def spans() -> list[SpanRecord]:
    # given out of order: the rows come in tree order whatever the order stored
    return [
        SpanRecord("gen", "root", "generate", at(40), 50.0),
        SpanRecord("root", None, "question", at(0), 100.0, attributes={"top_k": 3}),
        SpanRecord("chat", "gen", "Ollama.chat", at(45), 40.0, error="TimeoutError: slow"),
        SpanRecord("ret", "root", "retrieve", at(5), 30.0),
        SpanRecord("orphan", "gone", "late", at(120), None),  # its parent was never stored; still open
    ]


def call(span_id: str | None, ms: float, stage: str = "generate") -> dict:
    return {"span_id": span_id, "started_at": at(ms), "stage": stage, "prompt_text": "p", "completion_text": "c"}


def test_rows_are_the_tree_depth_first_with_offsets_durations_and_own_calls():
    calls = [call("chat", 60), call("chat", 46), call("ret", 6, "embed"), call(None, 0)]
    rows = trace_rows(spans(), calls)
    assert [(r.name, r.depth) for r in rows] == [
        ("question", 0),
        ("retrieve", 1),
        ("generate", 1),
        ("Ollama.chat", 2),
        ("late", 0),  # an orphan counts as a root
    ]
    assert [r.start_ms for r in rows] == [0.0, 5.0, 40.0, 45.0, 120.0]
    assert [r.duration_ms for r in rows] == [100.0, 30.0, 50.0, 40.0, None]
    assert [r.end_ms for r in rows] == [100.0, 35.0, 90.0, 85.0, 120.0]
    assert [r.calls for r in rows] == [0, 1, 0, 2, 0]
    assert [r.children for r in rows] == [2, 0, 1, 0, 0]
    assert rows[0].attributes == {"top_k": 3} and rows[3].error == "TimeoutError: slow"
    assert rows[4].parent_id is None
    assert unlinked_calls(rows, calls) == 1
    assert [tree_label(r) for r in rows][:4] == ["question", " └ retrieve", " └ generate", "  └ Ollama.chat"]


def test_the_waterfall_keeps_a_row_per_span_in_tree_order_and_draws_a_span_of_no_duration():
    from pages.views.charts import MIN_BAR_SHARE
    from pages.views.trace_viewer import WATERFALL_COLOURS, waterfall_figure

    twins = [*spans(), SpanRecord("gen2", "root", "generate", at(92), 0.0)]  # a second "generate", instantaneous
    rows = trace_rows(twins, [])
    bars = waterfall_figure(rows, selected="chat").data[0]
    assert list(bars.y) == [
        "1. question",
        "2. \u00a0\u00a0retrieve",
        "3. \u00a0\u00a0generate",
        "4. \u00a0\u00a0\u00a0\u00a0Ollama.chat",
        "5. \u00a0\u00a0generate",
        "6. late",
    ]
    assert list(bars.customdata) == ["root", "ret", "gen", "chat", "gen2", "orphan"]  # a clicked bar names its span
    assert list(bars.base) == [0.0, 5.0, 40.0, 45.0, 92.0, 120.0]
    assert waterfall_figure(rows, None).layout.yaxis.autorange == "reversed"  # tree order from the top
    colours = {v: k for k, v in WATERFALL_COLOURS.items()}
    assert [colours[c] for c in bars.marker.color] == ["span", "span", "span", "error", "span", "span"]
    assert bars.x[4] == pytest.approx(MIN_BAR_SHARE * 120.0)  # seen, though instant
    assert bars.x[0] == 100.0 and "takes 0 ms" in bars.hovertext[4]
    selected = waterfall_figure(rows, selected="ret").data[0]
    assert colours[selected.marker.color[1]] == "selected"


def test_the_waterfall_shows_a_name_with_tags_as_text():
    from pages.views.trace_viewer import waterfall_figure

    rows = trace_rows([SpanRecord("x", None, "<b>bold</b>", T0, 1.0)], [])
    bars = waterfall_figure(rows, None).data[0]
    assert bars.y[0] == "1. &lt;b&gt;bold&lt;/b&gt;" and bars.hovertext[0].startswith("&lt;b&gt;bold&lt;/b&gt;")


def test_naive_times_count_as_utc_and_an_empty_trace_has_no_rows():
    mixed = [SpanRecord("a", None, "a", T0.replace(tzinfo=None), 10.0), SpanRecord("b", "a", "b", at(7), 1.0)]
    assert [r.start_ms for r in trace_rows(mixed, [])] == [0.0, 7.0]
    assert trace_rows([], []) == []


def test_folding_hides_a_spans_descendants_and_a_depth_limit_hides_deeper_rows():
    rows = trace_rows(spans(), [])
    assert [r.name for r in visible_rows(rows, folded={"root"})] == ["question", "late"]
    assert [r.name for r in visible_rows(rows, folded={"gen"})] == ["question", "retrieve", "generate", "late"]
    assert [r.name for r in visible_rows(rows, folded={"ret"})] == [r.name for r in rows]  # a leaf: nothing to fold
    assert [r.name for r in visible_rows(rows, max_depth=1)] == ["question", "retrieve", "generate", "late"]
    assert [r.name for r in visible_rows(rows, max_depth=0)] == ["question", "late"]
    assert [fold_marker(r, {"root"}) for r in rows] == ["▸ 2", "", "▾ 1", "", ""]


def test_calls_of_a_span_in_the_order_they_started():
    calls = [call("chat", 60, "second"), call("chat", 46, "first"), call("ret", 6)]
    assert [c["stage"] for c in calls_of("chat", calls)] == ["first", "second"]
    assert calls_of("gen", calls) == [] and calls_of(None, calls) == []


def test_a_prompt_of_chat_messages_reads_as_role_headed_text():
    messages = json.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"}])
    assert prompt_as_text(messages) == "[system]\nBe brief.\n\n[user]\nQ?"
    assert prompt_as_text("plain **text**") == "plain **text**" and prompt_as_text(None) == ""


@pytest.mark.slow
def test_selecting_a_span_in_the_trace_tab_shows_its_calls_prompt_and_completion(fake, settings, kb_db):
    from pipeline.answering.engine import VerifiedQueryEngine, final_result
    from pipeline.history.runs import load_run

    fake.enqueue(
        "<b>bold</b> The RAG index held **21 million passages** [1].",
        model="llama3.2",
        match=lambda body: not body.get("format"),
    )
    result = final_result(VerifiedQueryEngine(settings=settings, db=kb_db).stream(QUESTION))
    stored = load_run(kb_db, result.run_id)
    answer_call = next(c for c in stored.calls if "<b>bold</b>" in (c["completion_text"] or ""))

    at = open_runs_page(str(result.run_id), tab="Trace")
    trace_tab = next(t for t in at.tabs if t.label == "Trace")
    assert [t.label for t in at.tabs] == list(DRILLDOWN_TABS)
    tree = next(d.value for d in trace_tab.dataframe if "step" in d.value.columns)
    root = tree["step"].iloc[0]  # the fold marker and the child spans' count before the name: "▾ 5 question"
    assert root.startswith("▾ ") and root.endswith(" question") and tree["calls"].sum() == len(stored.calls)
    # the root is open at first: it made no call itself, so the pane shows none of the answer's text
    assert not any("<b>bold</b>" in c.value for c in trace_tab.code)

    # the root folds to one row, and opens again
    at.button(key=f"trace-{result.run_id}-folded-toggle").click().run()
    folded = next(d.value for d in at.tabs[2].dataframe if "step" in d.value.columns)
    assert list(folded["step"]) == [root.replace("▾", "▸")]
    at.button(key=f"trace-{result.run_id}-folded-toggle").click().run()
    assert len(next(d.value for d in at.tabs[2].dataframe if "step" in d.value.columns)) == len(tree)

    span = at.selectbox(key=f"trace-{result.run_id}-span")
    span.set_value(answer_call["span_id"]).run()
    assert not at.exception, at.exception
    trace_tab = next(t for t in at.tabs if t.label == "Trace")
    codes = [c.value for c in trace_tab.code]
    assert any("<b>bold</b> The RAG index held" in c for c in codes)  # the completion, as text
    assert any("[system]" in c and "[user]" in c and QUESTION in c for c in codes)  # the prompt
    lines = [m.value for m in trace_tab.markdown]
    assert any(line.startswith("Call 1 · generate · llama3") for line in lines), lines

    # the filter, drawn once opened: the spans whose name holds "generate", whatever is folded; closed, all again
    assert not [t for t in at.text_input if t.label == "Find spans"]
    at.session_state[f"trace-{result.run_id}-filter"] = True
    at.run()
    at.text_input(key=f"trace-{result.run_id}-find").set_value("GENERATE").run()
    found = next(d.value for d in at.tabs[2].dataframe if "step" in d.value.columns)
    assert 0 < len(found) < len(tree) and all(step.endswith(" generate") for step in found["step"]), found
    at.checkbox(key=f"trace-{result.run_id}-errors").check().run()  # and failed: none did
    assert any("0 spans of" in c.value for c in at.tabs[2].caption)
    at.session_state[f"trace-{result.run_id}-filter"] = False
    at.run()
    assert len(next(d.value for d in at.tabs[2].dataframe if "step" in d.value.columns)) == len(tree)


@pytest.mark.slow
def test_a_link_to_a_span_opens_the_trace_tab_with_that_span_selected(fake, settings, kb_db):
    from test_app import open_page

    from pages.views.span_search import span_link
    from pipeline.answering.engine import VerifiedQueryEngine, final_result
    from pipeline.history.runs import load_run

    result = final_result(VerifiedQueryEngine(settings=settings, db=kb_db).stream(QUESTION))
    generate = next(s for s in load_run(kb_db, result.run_id).spans if s.name == "generate")
    link = span_link({"run_id": result.run_id, "span_id": generate.span_id})  # as the Spans page links it
    at = open_page("pages/runs.py", **link)
    assert at.session_state["drilldown_tab"] == "Trace"
    assert at.selectbox(key=f"trace-{result.run_id}-span").value == generate.span_id
    assert "span" not in at.query_params  # dropped: a later rerun keeps the user's own choice
    at.selectbox(key=f"trace-{result.run_id}-span").set_value(generate.parent_id).run()
    assert at.selectbox(key=f"trace-{result.run_id}-span").value == generate.parent_id


def test_the_steps_chart_names_an_items_metric_in_words_and_every_other_span_as_recorded():
    from pages.views.trace_viewer import step_words

    assert step_words("metric judge_correctness") == "metric judge correctness"
    assert step_words("metric context_precision") == "metric context precision"
    assert step_words("metric not_a_metric") == "metric not_a_metric"  # not ours: as recorded
    assert step_words("similarity_scale") == "similarity_scale" and step_words("retrieve") == "retrieve"
