"""AppTests of every page, with the fake Ollama behind them."""

import json

import pytest
import streamlit as st
from conftest import ROOT
from streamlit.testing.v1 import AppTest
from test_charts import plotly_points, plotly_spec

from pages.views.markup import escape_markdown
from pages.views.navigation import PAGES, START_PAGE
from pages.views.navigation import page as declared_page

QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"


@pytest.fixture(autouse=True)
def fresh_streamlit_caches():
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


def app(page: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    at.run()
    if page:
        at.switch_page(page)
        at.run()
    assert not at.exception, at.exception
    return at


def markdown_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_every_page_is_headed_by_its_declared_title_under_the_declared_sidebar(kb_db):
    at = app()
    for declared in PAGES:
        if declared.file != START_PAGE:
            at.switch_page(declared.file).run()
        assert not at.exception, (declared.file, at.exception)
        assert at.title[0].value == declared.title, declared.file
        assert [link.proto.label for link in at.sidebar.get("page_link")][: len(PAGES)] == [p.label for p in PAGES]
    detector = declared_page("pages/detector.py")
    assert detector.title == "Detector benchmarks" and detector.label == "Detector"


def test_a_page_missing_from_pages_is_named_with_where_to_add_it():
    with pytest.raises(KeyError, match=r"pages/new\.py is not in PAGES \(pages/views/navigation\.py\)"):
        declared_page("pages/new.py")


@pytest.mark.slow
def test_chat_answers_with_claims_marked(kb_db):
    at = app()
    assert at.title[0].value == "Chat"
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception, at.exception
    text = markdown_text(at)
    assert ":material/check_circle: accepted" in text and "faithfulness **1.00**" in text
    assert ":green-background[" in text and "21 million passages" in text
    claims = at.table[0].value
    assert list(claims["verdict"]) == ["supported"] * len(claims)
    assert claims["evidence"].str.contains("21 million").any()
    assert claims["evidence"].str.startswith("\\[1\\] rag\\.md\\: ").any()  # its source first, escaped
    assert at.session_state["conversation"][0]["result"].status == "accepted"


@pytest.mark.slow
def test_chat_keeps_the_conversation(kb_db):
    at = app()
    at.chat_input[0].set_value(QUESTION).run()
    at.chat_input[0].set_value("What is the capital city of Peru?").run()
    assert [t["result"].status for t in at.session_state["conversation"]] == ["accepted", "abstained"]
    assert len(at.chat_message) == 4


@pytest.mark.slow
def test_chat_shows_model_output_escaped(fake, kb_db):
    fake.enqueue(
        "<script>alert(1)</script> The RAG index held **21 million passages** [1].",
        model="llama3.2",
        match=lambda body: not body.get("format"),
    )
    at = app()
    at.chat_input[0].set_value(QUESTION).run()
    text = markdown_text(at)
    assert "\\<script\\>" in text and "<script>" not in text
    assert "\\*\\*21 million passages\\*\\*" in text
    assert not any(m.allow_html for m in at.markdown)


def test_chat_says_when_ollama_is_down_and_how_to_fix_it(fake, kb_db):
    fake.stop()
    at = app()
    errors = [e.value for e in at.error]
    assert any("Ollama is not reachable" in e and "ollama serve" in e for e in errors)
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    assert at.session_state["conversation"][0]["result"].status == "failed"


def test_a_replayed_chat_answer_while_ollama_is_down_says_it_was_replayed_and_when_first_computed(fake, kb_db):
    at = app()
    at.chat_input[0].set_value(QUESTION).run()
    first = at.session_state["conversation"][0]["result"]
    assert first.status == "accepted" and first.n_replayed < first.n_calls  # at most a call it repeated itself
    assert not any("Replayed from the cache" in i.value for i in at.info)
    fake.stop()
    st.cache_data.clear()  # the health check is kept for 15 s
    at = app()  # a new chat: the same question, not a follow-up
    assert any("Ollama is not reachable" in e.value for e in at.error)
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception, at.exception
    again = at.session_state["conversation"][0]["result"]
    assert again.status == "accepted" and again.n_replayed == again.n_calls > 0
    assert again.latency_ms == first.latency_ms  # the latency first measured, not the replay's
    notes = [i.value for i in at.info if "eplayed from the cache" in i.value]
    assert len(notes) == 1 and "Replayed from the cache \\(first computed at " in notes[0], notes


def test_chat_names_a_missing_model(fake, kb_db):
    fake.remove_model("bespoke-minicheck")
    at = app()
    assert any("`ollama pull bespoke-minicheck`" in e.value for e in at.error)


def test_chat_refuses_an_empty_question(kb_db):
    at = app()
    at.chat_input[0].set_value("   ").run()
    assert any("the question is empty" in e.value for e in at.error)
    assert at.session_state["conversation"] == []


def test_knowledge_base_page_lists_documents(kb_db):
    at = app("pages/knowledge_base.py")
    assert at.title[0].value == "Knowledge base"
    frame = at.dataframe[0].value
    assert "rag.md" in set(frame["path"]) and len(frame) >= 8


@pytest.mark.slow
def test_knowledge_base_page_offers_ingest_when_empty(db):
    at = app("pages/knowledge_base.py")
    assert any("No documents yet" in i.value for i in at.info)
    at.button[-1].click().run()
    assert not at.exception
    assert len(at.dataframe[0].value) >= 8
    with db.cursor() as cur:
        logged = cur.execute(
            "SELECT count(*), count(*) FILTER (WHERE stage = 'embed_documents'), "
            "count(*) FILTER (WHERE stage = 'embed_queries') FROM llm_calls WHERE run_id IS NULL"
        ).fetchone()
    # the page's embedding calls are recorded: the chunks', and the similarity scale measured after the ingest
    assert logged[0] == logged[1] + logged[2] and logged[1] >= 8 and logged[2] == 1


def test_settings_page_shows_settings_and_health(fake, db):
    fake.remove_model("nomic-embed-text")
    at = app("pages/settings.py")
    frame = at.dataframe[0].value
    row = frame[frame["setting"] == "faithfulness threshold"].iloc[0]  # in words; the variable names the key
    assert row["value"] == "0.8" and row["environment variable"] == "WORKBENCH_FAITHFULNESS_THRESHOLD"
    assert any("nomic-embed-text" in e.value and "ollama pull nomic-embed-text" in e.value for e in at.error)


def start_evaluation(at):
    """Submit the Evaluate page's start form (once an evaluation exists, a 'Start an evaluation' button that opens the
    form comes first)."""
    return next(b for b in at.button if b.label == "Start evaluation").click().run()


def open_start_form(at):
    """Open the Evaluate page's start form: once an evaluation exists it starts closed, and closed it draws nothing."""
    opener = [b for b in at.button if b.label == "Start an evaluation"]
    return opener[0].click().run() if opener else at


def wait_for_jobs(seconds: float = 60) -> None:
    import time

    from pipeline.evaluation.jobs import jobs

    deadline = time.monotonic() + seconds
    while any(j.running for j in jobs()) and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.mark.slow
def test_evaluate_page_starts_a_small_run_and_shows_its_results(kb_db):
    at = app("pages/evaluate.py")
    assert at.title[0].value == "Evaluate"
    at.text_input[0].set_value("smoke")
    limit = next(n for n in at.number_input if "first N" in n.label)
    limit.set_value(3)
    start_evaluation(at)
    wait_for_jobs()
    at.run()
    assert not at.exception, at.exception
    assert next(s for s in at.selectbox if s.label == "Evaluation").value == "smoke"
    metrics = {m.label: m.value for m in at.metric}
    assert set(metrics) >= {"faithfulness", "context recall", "judge correctness"}
    assert "judge rewrite" not in metrics  # single questions: it applied to no item, so no tile
    assert any("Diagnosis:" in i.value for i in at.info)
    results = next(d.value for d in at.dataframe if {"status", "question"} <= set(d.value.columns))
    assert len(results) == 3 and set(results["status"]) <= {"accepted", "flagged", "abstained", "no claims"}
    assert results["link"].str.startswith("/runs?run_id=").all()


@pytest.mark.slow
def test_evaluate_page_filters_results_by_low_score(fake, settings, kb_db):
    from pipeline.evaluation.dataset import load_dataset
    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, kb_db, load_dataset(ROOT / "data" / "eval" / "golden.jsonl").select(limit=6), "six")
    at = app("pages/evaluate.py")
    assert len(at.dataframe[-1].value) == 6
    assert not at.slider  # the filter is drawn when opened
    at.session_state["eval_items_filter"] = True
    at.run()
    low = next(s for s in at.selectbox if s.label == "Low score on")
    low.set_value("judge_correctness").run()
    slider = next(s for s in at.slider if s.label == "Below")
    slider.set_value(4.0).run()
    filtered = at.dataframe[-1].value
    assert (filtered["judge_correctness"] < 4.0).all()
    assert list(filtered["judge_correctness"]) == sorted(filtered["judge_correctness"])


@pytest.mark.slow
def test_runs_page_lists_filters_and_opens_a_drilldown_by_deep_link(fake, settings, kb_db):
    from pipeline.answering.engine import VerifiedQueryEngine, final_result

    engine = VerifiedQueryEngine(settings=settings, db=kb_db)
    accepted = final_result(engine.stream(QUESTION))
    final_result(engine.stream("What is the capital city of Peru?"))
    at = app("pages/runs.py")
    frame = at.dataframe[0].value
    assert list(frame["status"]) == ["abstained", "accepted"]
    assert not any(m.label == "Status" for m in at.multiselect)  # the filters are drawn when opened
    at.session_state["runs_filters_open"] = True
    at.run()
    next(m for m in at.multiselect if m.label == "Status").set_value(["accepted"]).run()
    assert list(at.dataframe[0].value["id"]) == [accepted.run_id]
    next(t for t in at.text_input if t.label == "Text in question or answer").set_value("PERU").run()
    assert any("No runs match" in i.value for i in at.info)

    at = open_runs_page(str(accepted.run_id))
    assert at.title[0].value == f"Run {accepted.run_id}"
    text = markdown_text(at)
    assert ":green-background[**" in text and "21 million passages" in text
    (steps,) = at.get("plotly_chart")  # above the tabs: the run's steps; the other tabs are drawn when chosen
    steps = json.loads(steps.proto.spec)
    assert steps["layout"]["title"]["text"] == "Where the time went: the run's steps"
    step_names = [name.split(" ", 1)[1].strip("\u00a0") for name in steps["data"][0]["y"]]
    assert step_names[0] == "question" and {"retrieve", "attempt 1"} <= set(step_names)
    waterfall = [json.loads(c.proto.spec) for c in show_tab(at, "Trace").get("plotly_chart")]
    assert [w["layout"]["title"]["text"] for w in waterfall][-1] == "Waterfall"
    assert len(waterfall[-1]["data"][0]["y"]) > len(step_names)  # every span, not the first two levels only
    assert not at.dataframe or "cache_hit" not in at.dataframe[-1].value.columns  # the Calls tab's table is not
    timeline = json.loads(show_tab(at, "Calls").get("plotly_chart")[-1].proto.spec)
    assert timeline["layout"]["title"]["text"] == "Timeline of the calls that reached the model"
    assert {"llama3.2", "nomic-embed-text"} <= {bar["name"] for bar in timeline["data"]}  # a colour per model
    assert not at.get("vega_lite_chart")
    assert all(bar["orientation"] == "h" and bar["base"] for bar in timeline["data"])


def open_page(page: str, state: dict | None = None, **params: str) -> AppTest:
    """`page` opened from the app's entry with the query `params` (a deep link) and the session `state` set."""
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


def open_runs_page(run_id: str, tab: str | None = None) -> AppTest:
    """The Runs page at ?run_id=, its drilldown on `tab` (the first, Answer and claims, unless given)."""
    return open_page("pages/runs.py", {"drilldown_tab": tab} if tab else None, run_id=run_id)


def show_tab(at: AppTest, tab: str) -> AppTest:
    """Choose a drilldown tab, as a click does: only the chosen tab is drawn."""
    at.session_state["drilldown_tab"] = tab
    at.run()
    assert not at.exception, at.exception
    return at


def test_runs_page_refuses_unknown_ids_and_shows_them_escaped(kb_db):
    at = open_runs_page("424242")
    assert [e.value for e in at.error] == [
        "There is no run \\'424242\\': it may have been deleted, or the link is mistyped."
    ]
    at = open_runs_page("<b>**7**</b>")
    assert "There is no run \\'\\<b\\>\\*\\*7\\*\\*\\</b\\>\\'" in at.error[0].value


def test_drilldown_shows_model_output_escaped(fake, settings, kb_db):
    from pipeline.answering.engine import VerifiedQueryEngine, final_result

    fake.enqueue(
        "<script>alert(1)</script> The RAG index held **21 million passages** [1].",
        model="llama3.2",
        match=lambda body: not body.get("format"),
    )
    run = final_result(VerifiedQueryEngine(settings=settings, db=kb_db).stream(QUESTION))
    at = open_runs_page(str(run.run_id))
    text = markdown_text(at) + "\n".join(e.label for e in at.expander)
    assert "\\<script\\>" in text and "<script>" not in text
    assert "\\*\\*21 million passages\\*\\*" in text and "**21 million" not in text
    assert not any(m.allow_html for m in at.markdown)


def test_every_page_says_when_the_store_cannot_be_opened(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path))  # a folder: DuckDB cannot open it
    for page in (None, "pages/runs.py", "pages/trends.py"):
        at = app(page)
        errors = [e.value for e in at.error]
        assert any(
            e.startswith(escape_markdown(f"cannot open the store {tmp_path}"))
            and "Fix: " + escape_markdown("check the path in WORKBENCH_DB") in e
            for e in errors
        ), errors


def test_detector_page_compares_runs(fake, settings, db, tmp_path):
    import json

    from pipeline.detector.bench import run_detector_bench

    path = tmp_path / "l.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"id": f"r{i}", "context": "BM25 is a ranking function.", "answer": a, "label": label})
            for i, (a, label) in enumerate(
                [("BM25 is a ranking function.", 0), ("BM25 has 42 ranking parameters.", 1)]  # a number: decisive
            )
        )
    )
    run_detector_bench(settings, db, str(path), "precheck", "answer")
    run_detector_bench(settings, db, str(path), "minicheck", "answer")
    at = app("pages/detector.py")
    frame = at.dataframe[0].value
    assert list(frame["verifier"]) == ["minicheck", "precheck"]
    assert list(at.dataframe[1].value["balanced accuracy"]) == [1.0, 1.0]  # how each did, in the next table
    assert len(at.get("vega_lite_chart")) == 2


@pytest.mark.slow
def test_trends_page_draws_series_per_pin_and_acknowledges_alerts(db):
    import numpy as np
    from test_regression import store_run

    base = np.linspace(0.8, 1.0, 20)
    store_run(db, "mon", {"faithfulness": base})
    store_run(db, "tue", {"faithfulness": base - 0.4}, config={"top_k": 2})
    store_run(db, "other-judge", {"faithfulness": base}, judge_digest="zzz")
    from pipeline.config import load_settings
    from pipeline.evaluation.regression import check

    check(db, load_settings(), "tue")
    at = app("pages/trends.py")
    alert_link = next(link for link in at.sidebar.page_link if "open regression alert" in link.value)
    assert alert_link.value == "2 open regression alerts" and alert_link.proto.page.endswith("trends")
    floor_link = next(link for link in at.sidebar.page_link if "below floor" in link.value)  # apart: not a regression
    assert floor_link.value == "1 metric below floor" and floor_link.proto.page.endswith("trends")
    from test_charts import frame_with, plotly_floors, plotly_spec

    chart = at.get("plotly_chart")[0]
    points = frame_with(chart, "mean_text")
    assert points["series"].nunique() == 2  # "other-judge" apart from mon and tue
    assert list(points.loc[points["run"] == "tue", "changed"]) == ["top_k: 5 → 2"]  # in the hover
    assert list(points.loc[points["run"] == "tue", "mean"]) == pytest.approx([(base - 0.4).mean()])
    assert plotly_floors(plotly_spec(chart)) == [(0.7, "floor 0.70")]
    assert len(at.expander) == 3  # drop overall, drop in slice rag, floor
    kinds = [e.label.split(" — ")[1].replace("\\", "") for e in at.expander]  # labels are escaped Markdown
    assert kinds == ["regression (drop)", "regression (drop)", "below floor"]
    assert any(m.value.startswith("**Below floor**") for m in at.markdown)
    at.text_input[0].set_value("known: top_k lowered")
    next(b for b in at.button if b.label == "Acknowledge").click().run()
    from pipeline.regression.alerts import list_alerts

    acked = list_alerts(db, "acknowledged")
    assert len(acked) == 1 and acked[0]["comment"] == "known: top_k lowered"


@pytest.mark.slow
def test_trends_page_shows_the_pinned_baseline_and_keeps_other_datasets_apart(db):
    import numpy as np
    from test_regression import store_run

    from pipeline.regression.alerts import pin_baseline

    base = np.linspace(0.8, 1.0, 20)
    first = store_run(db, "full-1", {"faithfulness": base})
    store_run(db, "full-2", {"faithfulness": base})
    store_run(db, "five-items", {"faithfulness": base[:5]})
    store_run(db, "failed-one", {"faithfulness": base}, failed=(2,))
    at = app("pages/trends.py")
    assert not at.exception, at.exception
    assert any("No baseline pinned" in i.value and "same content hash and size" in i.value for i in at.info)
    from test_charts import frame_with

    points = frame_with(at.get("plotly_chart")[0], "mean_text")
    names = sorted(points["series"].unique())
    assert len(names) == 2 and names[0].endswith("· 20 items") and names[1].endswith("· 5 items")
    # the default choice is the newest run with no failed item and no open alert, not simply the newest
    assert at.selectbox[-1].value == "five-items"
    full = points[points["series"].str.endswith("· 20 items")]
    assert list(full["run"]) == ["full-1", "full-2"]  # the run with a failed item is left out ...
    assert "pinned baseline" not in set(points["trace"])  # no baseline pinned: no star
    next(c for c in at.checkbox if c.label.startswith("Include runs with failed items (1)")).check().run()
    points = frame_with(at.get("plotly_chart")[0], "mean_text")
    full = points[points["series"].str.endswith("· 20 items")]
    assert list(full["run"]) == ["full-1", "full-2", "failed-one"]  # ... unless the user includes it
    pin_baseline(db, "golden.jsonl", first)
    at = app("pages/trends.py")
    assert any(i.value.startswith("Pinned baseline for golden") and "**full\\-1**" in i.value for i in at.info)
    assert at.selectbox[-1].value == "full-1"
    chart = at.get("plotly_chart")[0]
    points = frame_with(chart, "mean_text")
    starred = points[points["trace"] == "pinned baseline"]  # the star: a trace of the baseline's points alone
    assert list(starred["baseline"]) == ["pinned baseline: full-1"]
    (full_1,) = points[points["run"] == "full-1"].itertuples()
    assert list(starred["created_at"]) == [full_1.created_at] and list(starred["mean"]) == [full_1.mean]
    (star,) = [t for t in plotly_spec(chart)["data"] if t["name"] == "pinned baseline"]
    assert star["marker"]["symbol"] == "star"


@pytest.mark.slow
def test_annotate_page_saves_a_rating_and_then_reveals_the_judge(fake, settings, kb_db):
    from test_evaluation import ITEMS, dataset

    from pipeline.calibration.annotations import ratings_for
    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "to-rate")
    at = app("pages/annotate.py")
    assert any("Enter your name" in i.value for i in at.info)
    at.text_input(key="annotator").set_value("ana").run()
    assert "0 rated of 2" in at.get("progress")[0].proto.text
    assert not any("judge" in s.value for s in at.success)
    labels = ("Correctness", "Helpfulness", "Faithfulness", "Grounding", "Topicality")
    radios = [r for r in at.radio if r.label in labels]
    for radio, value in zip(radios, (2, 4, 5, 3, 1), strict=True):
        radio.set_value(value)
    next(b for b in at.button if b.label == "Save rating").click().run()
    assert not at.exception, at.exception
    saved = ratings_for(kb_db, [r for r in range(1, 10)])
    assert [
        (r["annotator"], r["correctness"], r["helpfulness"], r["faithfulness"], r["grounding"], r["topicality"])
        for r in saved
    ] == [("ana", 2, 4, 5, 3, 1)]
    reveal = next(s.value for s in at.success if s.value.startswith("Saved run"))
    assert "correctness: you 2, judge" in reveal
    assert "1 rated of 2" in at.get("progress")[0].proto.text


@pytest.mark.slow
def test_annotate_page_refuses_an_incomplete_rating(fake, settings, kb_db):
    from test_evaluation import ITEMS, dataset

    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "to-rate")
    at = app("pages/annotate.py")
    at.text_input(key="annotator").set_value("ana").run()
    next(b for b in at.button if b.label == "Save rating").click().run()
    assert any(
        "Give a score for correctness, helpfulness, faithfulness, grounding, topicality" in e.value for e in at.error
    )


@pytest.mark.slow
def test_calibration_page_shows_agreement_with_a_small_sample_warning(fake, settings, kb_db):
    from test_evaluation import dataset

    from pipeline.calibration.agreement import claim_agreement
    from pipeline.calibration.annotations import judged_pairs, save_rating
    from pipeline.evaluation.runner import run_evaluation
    from pipeline.history.evaluations import run_ids_of

    run_evaluation(settings, kb_db, dataset(), "cal")
    for run_id in run_ids_of(kb_db, 1):  # and each answer's first claim rated unsupported
        scores = {"correctness": 1, "helpfulness": 3, "faithfulness": 5}
        save_rating(kb_db, run_id, "ana", scores, claim_verdicts={(1, 1): "unsupported"})
    at = app("pages/calibration.py")
    assert not at.exception, at.exception
    assert any("Only 4 judge-human pairs" in w.value for w in at.warning)
    overview, details = at.table[0].value, at.table[1].value  # every criterion; then correctness's details
    assert list(overview["n"]) == [4, 4, 4] and list(overview.index) == ["Correctness", "Helpfulness", "Faithfulness"]
    assert details.iloc[0]["n"] == 4 and details.index[0] == "judge vs people"
    # everyone rated correctness 1: kappa would be 0 by construction, so the page says n/a, and why once below
    for shown in overview.loc["Correctness"], details.iloc[0]:
        assert shown["weighted kappa"] == "n/a"
    captions = [c.value.replace("\\", "") for c in at.caption]  # unescaped
    why = [c for c in captions if c.startswith("n/a: the people gave every item 1")]
    assert len(why) == 2 and "Correctness: weighted kappa" in why[0]  # under each of the two tables
    assert any("Grounding, Topicality: no answer in" in c.value for c in at.caption)  # not rated
    charts = at.get("plotly_chart")
    assert len(charts) == 3  # correctness's heatmap and base rates; the claims' heatmap
    heat, rates, claims = (plotly_spec(c) for c in charts)
    # correctness: its 4 judge-human pairs counted in the judge (rows) x human (columns) grid
    (grid,) = heat["data"]
    judged = judged_pairs(kb_db, run_ids_of(kb_db, 1), "correctness")
    expected_grid = [
        [sum(p["judge"] == j and p["human"] == h for p in judged) for h in range(1, 6)] for j in range(1, 6)
    ]
    assert grid["z"] == expected_grid and sum(map(sum, grid["z"])) == 4
    shares = plotly_points(rates)
    assert list(shares.loc[shares["rater"] == "people", "share"]) == [1.0, 0.0, 0.0, 0.0, 0.0]  # everyone rated 1
    assert claims["layout"]["title"]["text"] == "People vs the verifier"  # people's verdicts against the verifier's
    expected = claim_agreement(kb_db, run_ids_of(kb_db, 1))  # the pairs of a rated claim and its verifier verdict
    assert expected["n"] >= 1
    (cells,) = claims["data"]
    labels = expected["labels"]
    assert cells["x"] == cells["y"] == labels and cells["z"] == [list(row) for row in expected["matrix"]]
    assert sum(cells["z"][labels.index("unsupported")]) == expected["n"]  # every rating said unsupported


@pytest.mark.slow
def test_drilldown_shows_the_trace_and_every_call_with_its_text_cached_ones_included(fake, settings, kb_db):
    from pipeline.answering.engine import VerifiedQueryEngine, final_result

    fake.enqueue(
        "<b>bold</b> The RAG index held **21 million passages** [1].",
        model="llama3.2",
        match=lambda body: not body.get("format"),
    )
    engine = VerifiedQueryEngine(settings=settings, db=kb_db)
    first = final_result(engine.stream(QUESTION))
    again = final_result(engine.stream(QUESTION))  # the same prompts: every call comes from the cache

    at = open_runs_page(str(first.run_id), tab="Trace")
    trace = next(d.value for d in at.dataframe if "step" in d.value.columns)
    assert trace["step"].iloc[0].endswith(" question")  # after its fold marker: "▾ 5 question"
    assert any(step.strip().endswith(" generate") and "└ ▾ 1" in step for step in trace["step"])
    show_tab(at, "Calls")
    assert trace["calls"].sum() == len([e for e in at.expander if e.label[:1].isdigit()])
    assert any(". generate · llama3" in e.label and "tokens" in e.label for e in at.expander)

    at = open_runs_page(str(again.run_id), tab="Calls")
    labels = [e.label for e in at.expander if e.label[:1].isdigit()]
    assert labels and all("replayed from the cache \\(first computed at " in label for label in labels)
    calls = next(d.value for d in at.dataframe if "cache_hit" in d.value.columns)
    assert len(calls) == len(labels) and calls["cache_hit"].all() and set(calls["origin"]) == {"chat"}
    assert not at.code  # a call's prompt and completion are drawn when it is opened
    for n in range(1, len(labels) + 1):  # open them all, as clicks do
        at.session_state[f"call-{again.run_id}-{n}"] = True
    at.run()
    codes = [c.value for c in at.code]
    assert len(codes) == 2 * len(labels)
    assert any("[system]" in c and "[user]" in c and QUESTION in c for c in codes)
    assert any("<b>bold</b> The RAG index held" in c for c in codes)  # shown as code: text, never HTML


@pytest.mark.slow
def test_detector_page_runs_the_shipped_sample_and_shows_verdicts_as_a_table(fake, db):
    at = app("pages/detector.py")
    assert "No detector benchmarks yet." in [i.value for i in at.info]
    at.button[0].click().run()  # the form's submit: the shipped sample, precheck, the answer's sentences
    assert not at.exception, at.exception
    success = at.success[0].value
    assert success.startswith("Run 1: precision ") and "95% Wilson intervals" in success and "60 answers" in success
    runs = at.dataframe[0].value
    assert list(runs["dataset"]) == ["sample.jsonl"] and list(runs["answers"]) == [60]
    claims = at.dataframe[-1].value
    assert list(claims.columns) == ["record_id", "label", "predicted", "claim #", "claim", "verdict", "by"]
    assert set(claims["verdict"]) <= {"supported", "unsupported", "unverified"} and len(claims) > 60
    assert not [r for r in fake.requests if r["path"] == "/api/chat"]


@pytest.mark.slow
def test_settings_page_shows_every_setting_with_its_source_and_hides_keys(fake, db, monkeypatch):
    import pandas as pd

    from pipeline.config import GROUPS, Settings, essential_settings

    monkeypatch.setenv("WORKBENCH_OPENAI_API_KEY", "sk-do-not-show")
    monkeypatch.setenv("WORKBENCH_TOP_K", "4")
    at = app("pages/settings.py")
    tables = [d.value for d in at.dataframe if "setting" in d.value.columns]
    assert "faithfulness threshold" in set(tables[0]["setting"])  # in words: its key joins them with _
    for shown in tables:
        shown["setting"] = shown["setting"].str.replace(" ", "_")
    assert list(tables[0]["setting"]) == essential_settings()  # the essentials first, then one table per group
    labels = [e.label for e in at.expander]
    assert [label.split(" (")[0] for label in labels] == list(GROUPS.values())
    answering = list(tables[2]["setting"])  # the essentials' table, then one per group in order
    assert "top_k" in answering and "repair" in answering
    assert labels[1] == f"Answering ({len(answering)} settings, 1 not at default)"  # top_k, from the environment
    frame = pd.concat(tables).set_index("setting")
    assert len(frame) == len(Settings.__dataclass_fields__) and frame.index.is_unique
    assert frame.loc["chunk_overlap", "valid values"] == "0 or more and below chunk_size"
    assert frame.loc["top_k", "source"] == "environment (WORKBENCH_TOP_K)" and frame.loc["top_k", "value"] == "4"
    assert frame.loc["chunk_size", "source"] == "default"
    assert frame.loc["openai_api_key", "value"] == "•••••••• (set, hidden)"
    assert "sk-do-not-show" not in frame.to_string()


@pytest.mark.slow
def test_knowledge_base_page_previews_a_document_shows_its_chunks_and_deletes_it(kb_db):
    at = app("pages/knowledge_base.py")
    from pipeline.knowledge.documents import list_documents

    rag_id = next(d["id"] for d in list_documents(kb_db) if d["path"].endswith("rag.md"))
    at.selectbox(key="kb_document").set_value(rag_id).run()
    assert "Retrieval-Augmented Generation" in at.text[0].value  # the preview
    chunk_table = at.dataframe[1].value
    assert list(chunk_table["ordinal"]) == list(range(len(chunk_table))) and chunk_table["ingested_at"].notna().all()
    next(b for b in at.button if b.label == "Delete this document…").click().run()
    assert any("Delete rag.md from the knowledge base?" in w.value.replace("\\", "") for w in at.warning)
    next(b for b in at.button if b.label == "Yes, delete it").click().run()
    assert not at.exception, at.exception
    assert any("Deleted rag" in s.value for s in at.success)
    assert "rag.md" not in set(at.dataframe[0].value["path"])
    assert (ROOT / "data" / "kb" / "rag.md").exists()  # a file outside the uploads folder is left alone


@pytest.mark.slow
def test_annotate_page_shows_the_rubric_and_hides_the_verifier_until_saved(fake, settings, kb_db):
    from test_evaluation import ITEMS, dataset

    from pipeline.calibration.annotations import CRITERIA, criterion_rubric, ratings_for
    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "to-rate")
    at = app("pages/annotate.py")
    at.text_input(key="annotator").set_value("ana").run()
    shown = markdown_text(at)
    for criterion in CRITERIA:  # each score's anchor, in the rubric popover under the criterion's scores
        _, anchors = criterion_rubric(criterion)
        assert all(f"**{score}** · {escape_markdown(anchors[score])}" in shown for score in (1, 2, 3, 4, 5))
    assert at.toggle(key="hide_verdicts").value is True
    assert "-background[" not in markdown_text(at)  # no claim colours
    claim_boxes = [s for s in at.selectbox if s.label.startswith("Claim ")]
    assert claim_boxes and all(s.value is None for s in claim_boxes)
    for _ in CRITERIA:  # the 1-5 key buttons score one criterion after another
        next(b for b in at.button if b.label == "3").click().run()
    assert [radios.value for radios in at.radio if radios.label.lower() in CRITERIA] == [3] * len(CRITERIA)
    next(b for b in at.button if b.label == "Save rating").click().run()
    assert not at.exception, at.exception
    [saved] = ratings_for(kb_db, list(range(1, 10)))
    assert [saved[c] for c in CRITERIA] == [3] * len(CRITERIA)
    assert any("The verifier's verdicts on run" in e.label for e in at.expander)
    assert "-background[" in markdown_text(at)  # revealed once saved


@pytest.mark.slow
def test_annotate_page_shows_the_verifier_when_the_rater_asks(fake, settings, kb_db):
    from test_evaluation import ITEMS, dataset

    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "to-rate")
    at = app("pages/annotate.py")
    at.text_input(key="annotator").set_value("ana").run()
    at.toggle(key="hide_verdicts").set_value(False).run()
    assert "-background[" in markdown_text(at)
    assert all(s.value is not None for s in at.selectbox if s.label.startswith("Claim "))


@pytest.mark.slow
def test_an_empty_chat_offers_example_questions_and_clicking_one_asks_it(kb_db):
    from pipeline.evaluation.example_questions import example_questions

    at = app()
    examples = [b for b in at.button if b.key and b.key.startswith("example-")]
    assert sorted(b.label for b in examples) == sorted(escape_markdown(q) for q in example_questions(kb_db))
    asked = example_questions(kb_db)[0]
    next(b for b in examples if b.label == escape_markdown(asked)).click().run()
    assert not at.exception, at.exception
    assert [t.value for t in at.chat_message[0].text] == [asked]  # the question, asked as if typed
    assert "faithfulness" in markdown_text(at)
    at.run()
    assert not [b for b in at.button if b.key and b.key.startswith("example-")]  # gone once the chat has begun


@pytest.mark.slow
def test_pinning_a_baseline_says_so_with_the_run_name_as_text(db):
    import numpy as np
    from test_regression import store_run

    name = "*bold* [log in](http://phish.example/x)"
    store_run(db, name, {"faithfulness": np.linspace(0.8, 1.0, 20)})
    at = app("pages/trends.py")
    next(b for b in at.button if b.label == "Pin as baseline").click().run()
    message = next(s.value for s in at.success if "is now the baseline" in s.value)
    assert "\\*bold\\*" in message and "\\[log in\\]" in message


@pytest.mark.slow
def test_evaluate_report_says_what_drop_the_comparison_with_its_baseline_could_have_detected(db):
    import numpy as np
    from test_regression import store_run

    rng = np.random.default_rng(12)
    base = rng.uniform(0.6, 1.0, 40)
    store_run(db, "before", {"faithfulness": base, "context_recall": base})
    store_run(db, "after", {"faithfulness": base + rng.normal(0, 0.05, 40), "context_recall": base})
    at = app("pages/evaluate.py")
    assert next(s for s in at.selectbox if s.label == "Evaluation").value == "after"
    captions = [c.value.replace("\\", "") for c in at.caption if "could have detected" in c.value]  # unescaped
    assert len(captions) == 1
    assert captions[0].startswith("Against the baseline before: this run could have detected a faithfulness drop")
    assert "(80% power, 40 items)" in captions[0] and "context_recall 0." in captions[0]


@pytest.mark.slow
def test_a_drop_alert_on_trends_says_the_smallest_drop_its_test_could_detect(db):
    import numpy as np
    from test_regression import store_run

    from pipeline.config import load_settings
    from pipeline.evaluation.regression import check

    rng = np.random.default_rng(5)
    base = rng.uniform(0.8, 1.0, 20)
    store_run(db, "mon", {"faithfulness": base})
    store_run(db, "tue", {"faithfulness": base - 0.3 + rng.normal(0, 0.05, 20)})
    check(db, load_settings(), "tue")
    at = app("pages/trends.py")
    drop = next(e for e in at.expander if "regression (drop)" in e.label.replace("\\", ""))
    message = " ".join(m.value.replace("\\", "") for m in drop.markdown)
    assert "the smallest drop it could detect: 0." in message and "(80% power)" in message


def test_drilldown_labels_the_judge_scores_a_second_evaluation_replayed_from_the_cache(fake, settings, kb_db):
    from pipeline.evaluation.dataset import Dataset, GoldenItem
    from pipeline.evaluation.runner import run_evaluation

    item = GoldenItem(id="rag", question=QUESTION, reference="The Wikipedia index had 21 million passages.")
    golden = Dataset("golden-test.jsonl", [item], [], "hash")
    scores = {}
    for name in ("first", "second"):
        outcome = run_evaluation(settings, kb_db, golden, name, metrics=["judge_correctness", "faithfulness"])
        with kb_db.cursor() as cur:
            (run_id,) = cur.execute(
                "SELECT run_id FROM eval_items WHERE eval_run_id = ?", [outcome.eval_run_id]
            ).fetchone()
        at = open_runs_page(str(run_id), tab="Scores")
        frame = next(d.value for d in at.dataframe if "metric" in d.value.columns)
        scores[name] = dict(zip(frame["metric"], frame["replay"], strict=True))
    assert scores["first"] == {"faithfulness": "", "judge correctness": ""}  # the judge was asked
    assert scores["second"]["judge correctness"].startswith("replayed from the cache (first computed at 20")
    assert scores["second"]["faithfulness"] == ""  # the verifier's: no model call of its own to replay


@pytest.mark.slow
def test_an_abstention_shows_the_withheld_answer_with_its_verdicts_and_why_in_chat_and_the_drilldown(fake, kb_db):
    withheld = "<img src=x onerror=alert(1)> The RAG paper won the best paper award at ICML 2019 [1]."
    fake.enqueue(withheld, model="llama3.2", match=lambda body: not body.get("format"), times=3)
    at = app()
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception, at.exception
    result = at.session_state["conversation"][0]["result"]
    assert result.status == "abstained" and result.final_record.answer == withheld
    for page in (at, open_runs_page(str(result.run_id))):
        text = markdown_text(page)
        assert escape_markdown(result.answer) in text  # what the abstention says
        assert ":gray-badge[:material/visibility_off: Withheld]" in text
        assert escape_markdown("not given as the answer: faithfulness below the threshold") in text  # why
        # the withheld attempt itself, its sentence coloured by its claim's verdict; escaped, never HTML
        assert (
            ":orange-background[\\<img src\\=x onerror\\=alert\\(1\\)\\> The RAG paper won the best paper award at "
            "ICML 2019 \\[1\\]\\.]:orange-badge[:material/warning: claim 1]"
        ) in text
        assert "<img" not in text.replace("\\<img", "")  # only escaped
        assert not any(m.allow_html for m in page.markdown)
