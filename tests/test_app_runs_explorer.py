"""The Runs page as a runs explorer (issue 29): filters by evaluation, latency and tokens, groups with
aggregates, saves and applies views, and lists key columns first with the rest on request."""

import pytest
from test_app import app
from test_runs_explorer import explored

from pages.views.run_filters import OPEN
from pipeline.history.views import saved_views


@pytest.fixture(autouse=True)
def _clear_caches():
    import streamlit as st

    st.cache_resource.clear()
    st.cache_data.clear()


def widget(widgets, label):
    return next(w for w in widgets if w.label == label)


def listed_ids(at):
    return list(at.dataframe[-1].value["id"])


@pytest.mark.slow
def test_runs_page_filters_groups_and_saves_views(settings, db):
    ids = explored(db)
    at = app("pages/runs.py")
    assert listed_ids(at) == ids[::-1]
    shown = list(at.dataframe[-1].proto.column_order)
    assert shown[:3] == ["open", "status", "question"] and "evaluation" in shown and "tokens" in shown
    assert "kind" not in shown and "cost" not in shown  # kind on request; no cost without prices

    assert not [m for m in at.multiselect if m.label == "Evaluation"]  # the filters are drawn when opened
    assert not [c for c in at.caption if c.value.startswith("Filtered on")]
    at.session_state[OPEN] = True
    at.run()
    widget(at.multiselect, "Evaluation").set_value(["alpha"]).run()
    assert listed_ids(at) == [ids[2], ids[1], ids[0]]
    widget(at.number_input, "Latency ≥ ms").set_value(150.0).run()
    assert listed_ids(at) == [ids[2], ids[1]]
    widget(at.number_input, "Tokens ≤").set_value(25).run()
    assert listed_ids(at) == [ids[1]]
    widget(at.number_input, "Tokens ≤").set_value(None).run()
    at.session_state[OPEN] = False  # closed: the filters set still apply, and a line says which
    at.run()
    at.run()  # and on the run after, when their widgets were not drawn in the run before
    assert not [m for m in at.multiselect if m.label == "Evaluation"]
    assert listed_ids(at) == [ids[2], ids[1]]
    assert [c.value for c in at.caption if c.value.startswith("Filtered on")] == [
        "Filtered on evaluation, latency: open Filters to change them."
    ]
    at.session_state[OPEN] = True
    at.run()
    assert widget(at.multiselect, "Evaluation").value == ["alpha"]  # opened again, as they were left
    assert widget(at.number_input, "Latency ≥ ms").value == 150.0

    at.button_group[0].set_value("model").run()  # group by model
    groups = at.dataframe[0].value
    assert dict(zip(groups["group"], groups["runs"], strict=True)) == {"qwen": 1, "llama3.2": 1}
    assert {"faithfulness", "p50_latency_ms", "p95_latency_ms", "tokens", "tokens_per_run"} <= set(groups.columns)

    widget(at.text_input, "Save these filters as a view").set_value("slow alpha").run()
    widget(at.button, "Save view").click().run()
    assert not at.exception, at.exception
    (view,) = saved_views(settings, db)
    assert view.name == "slow alpha" and view.group_by == "model"
    assert view.run_filter.evaluations == ["alpha"] and view.run_filter.latency_min_ms == 150.0

    at = app("pages/runs.py")  # a new session: everything listed, until the view is applied
    assert listed_ids(at) == ids[::-1]
    widget(at.selectbox, "Saved view").set_value("slow alpha").run()
    widget(at.button, "Apply view").click().run()
    assert not at.exception, at.exception
    assert listed_ids(at) == [ids[2], ids[1]]
    assert at.button_group[0].value == "model" and len(at.dataframe) == 2
    assert not at.warning, [w.value for w in at.warning]

    widget(at.selectbox, "Sort by").set_value("latency_ms").run()  # every matching run, across pages
    widget(at.toggle, "Descending").set_value(False).run()
    assert listed_ids(at) == [ids[1], ids[2]]
    widget(at.multiselect, "More columns").set_value(["kind", "judge correctness"]).run()
    assert {"kind", "judge correctness"} <= set(at.dataframe[-1].proto.column_order)

    widget(at.selectbox, "Saved view").set_value("slow alpha").run()
    widget(at.button, "Delete view").click().run()
    assert saved_views(settings, db) == []
