"""Thresholds that calibrate themselves to the embedding model (issue 25): the same decisions under two embedding
fakes of very different scales, the bag of words (unrelated texts near 0) and a dense one whose every cosine is
(bag + 1) / 2 (unrelated texts near 0.5)."""

from __future__ import annotations

import shutil
import threading
from contextlib import contextmanager

import pytest
from conftest import KB, TEST_ENV, reset_process_state
from fake_ollama import FakeOllama
from test_app import app, fresh_streamlit_caches  # noqa: F401 - autouse: no page sees another test's cached settings
from test_judge_and_metrics import result_with, schema_has
from test_on_topic import OFF_TARGET, ON_TARGET, QUESTION, UNSURE, topic_requests

from pipeline.answering import on_topic, status
from pipeline.answering.engine import QuestionRun, final_result, run_config
from pipeline.config import load_settings
from pipeline.evaluation import metrics
from pipeline.evaluation.dataset import GoldenItem
from pipeline.evaluation.item import evaluate_item
from pipeline.evaluation.kb_snapshot import take_snapshot
from pipeline.knowledge import similarity_scale
from pipeline.knowledge.ingest import ingest, ingest_and_record
from pipeline.models.llm import LLM
from store import db as store_db
from store import similarity

SCALES = ("bag", "dense")
GOLDEN = "What exact match score did RAG-Sequence reach on Natural Questions?"
MARS = "What is the atmosphere of Mars made of?"
GENERATION = ("/api/chat", "/api/generate")


@pytest.fixture(scope="session")
def templates(tmp_path_factory):
    """A store with data/kb ingested under each embedding fake, built once per scale and copied per test."""
    built: dict[str, str] = {}
    lock = threading.Lock()

    def template(scale: str) -> str:
        with lock:
            if scale not in built:
                path = tmp_path_factory.mktemp(f"scale-{scale}") / "kb.duckdb"
                with FakeOllama(embed_scale=scale) as server:
                    env = {**TEST_ENV, "OLLAMA_HOST": server.url, "WORKBENCH_DB": str(path)}
                    settings = load_settings(environ=env)
                    database = store_db.Database(str(path), 2, 0)
                    ingest([str(KB)], settings, database, LLM(settings, database))
                    database.close()
                built[scale] = str(path)
            return built[scale]

    return template


@contextmanager
def under(scale: str, templates, monkeypatch, tmp_path, with_kb: bool = True):
    """(fake, settings, db): a fake of this embedding scale and a store holding the sample knowledge base
    ingested under it."""
    with FakeOllama(embed_scale=scale) as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        path = tmp_path / f"{scale}.duckdb"
        monkeypatch.setenv("WORKBENCH_DB", str(path))
        reset_process_state()
        similarity_scale.forget()
        settings = load_settings()
        if with_kb:
            shutil.copy(templates(scale), path)
        yield server, settings, store_db.get_database(settings)
        reset_process_state()
        similarity_scale.forget()


@pytest.fixture(params=SCALES)
def scaled(request, templates, monkeypatch, tmp_path):
    with under(request.param, templates, monkeypatch, tmp_path) as env:
        yield request.param, *env


def ask(settings, db, question: str):
    return final_result(QuestionRun(settings, db, question, "chat").events())


@pytest.mark.slow
def test_the_scale_is_measured_stored_with_the_digest_and_its_median_differs(scaled):
    scale_name, fake, settings, db = scaled
    llm = LLM(settings, db)
    scale = similarity_scale.scale_for(db, llm)
    assert scale.measured and scale.n_chunks >= 20 and scale.n_pairs == scale.n_chunks * len(similarity_scale.PROBES)
    expected = {"bag": 0.0, "dense": 0.5}[scale_name]
    assert scale.median == pytest.approx(expected, abs=0.02)
    assert scale.quantile(0.95) > scale.median
    stored = similarity.get(db, settings.embed_model, llm.embed_digest(), similarity_scale.kb_fingerprint(db, "x"))
    assert stored is None  # keyed by the model's own fingerprint
    row = similarity.get(db, settings.embed_model, llm.embed_digest(), scale.kb_fingerprint)
    assert row is not None and row.digest == llm.embed_digest() and row.median == pytest.approx(scale.median)
    assert len(row.sample) == similarity_scale.SAMPLE_POINTS and row.sample == sorted(row.sample)
    # measured once: the next question reads it (from this process, or the store after a restart)
    similarity_scale.forget()
    again = similarity_scale.scale_for(db, LLM(settings, db))
    assert again.sample == scale.sample
    assert [c.stage for c in llm.calls].count("embed_queries") == 1


def test_on_topic_decisions_are_the_same_on_both_scales(templates, monkeypatch, tmp_path):
    outcomes, raw = {}, {}
    for name in SCALES:
        with under(name, templates, monkeypatch, tmp_path) as (fake, settings, db):
            llm = LLM(settings, db)
            scale = similarity_scale.scale_for(db, llm)
            fake.enqueue({"addresses": True, "gap": ""}, model="llama3.2")
            checks = {
                label: on_topic.check(llm, settings, QUESTION, answer, scale)
                for label, answer in (("on", ON_TARGET), ("off", OFF_TARGET), ("unsure", UNSURE))
            }
            outcomes[name] = {label: (c.on_topic, c.method, round(c.score, 6)) for label, c in checks.items()}
            raw[name] = on_topic.check(llm, settings, QUESTION, OFF_TARGET)  # without the scale: raw cosine
            assert len(topic_requests(fake)) == 1  # the unsure answer alone went to the model
            assert f"unrelated pairs' median {scale.median:.2f}" in checks["off"].reason
    assert outcomes["bag"] == outcomes["dense"]
    assert outcomes["bag"]["on"][:2] == (True, "embedding")
    assert outcomes["bag"]["off"][:2] == (False, "embedding")
    assert outcomes["bag"]["unsure"][:2] == (True, "model")
    # what the calibration prevents: on the dense scale an off-target answer's raw cosine passes on_topic_accept
    assert raw["bag"].on_topic is False and raw["dense"].on_topic is True


@pytest.mark.slow
def test_the_floor_answers_a_golden_question_and_abstains_on_mars_before_generating(scaled):
    scale_name, fake, settings, db = scaled
    golden = ask(settings, db, GOLDEN)
    assert golden.status != "abstained", golden.abstain_reason
    assert golden.config["retrieval_floor"] == 0.95
    before = len(fake.requests)
    mars = ask(settings, db, MARS)
    assert mars.status == "abstained" and mars.answer == status.NOT_COVERED
    assert mars.abstain_reason.startswith("the knowledge base does not cover this question (the best chunk's")
    assert "no higher than unrelated text: the 95th percentile of unrelated pairs is" in mars.abstain_reason
    assert not [r for r in fake.requests[before:] if r["path"] in GENERATION]  # no answer, no rewrite, no grade
    assert mars.attempts == []


def test_the_floor_is_off_at_zero_and_recorded_in_the_run(scaled):
    _, fake, settings, db = scaled
    import dataclasses

    off = dataclasses.replace(settings, retrieval_floor=0.0)
    assert run_config(off)["retrieval_floor"] == 0.0
    mars = ask(off, db, MARS)
    assert "unrelated text" not in (mars.abstain_reason or "")
    assert [r for r in fake.requests if r["path"] in GENERATION]  # it went on to generate


def test_the_ray_path_carries_the_scale_in_the_snapshot(scaled):
    _, fake, settings, db = scaled
    scale = similarity_scale.current(settings, db, origin="evaluation")
    snapshot = take_snapshot(db, settings.embed_model, scale)
    assert snapshot.scale is scale
    item = GoldenItem(id="mars", question=MARS)
    outcome, log, _scores, error = evaluate_item(
        settings, None, item, None, threading.Event(), metrics=["faithfulness"], knowledge=snapshot
    )
    assert error is None and log.run.status == "abstained"
    assert "unrelated text" in log.run.abstain_reason
    # without a scale (nothing to measure in on a worker) there is no floor: it answers
    bare = take_snapshot(db, settings.embed_model)
    assert not bare.scale.measured and "without a scale" in bare.scale.reason


def test_answer_relevancy_reads_similarities_on_the_calibrated_scale(templates, monkeypatch, tmp_path):
    question = "When was the Transformer introduced?"
    values = {}
    for name in SCALES:
        with under(name, templates, monkeypatch, tmp_path) as (fake, settings, db):
            fake.enqueue(
                {"questions": [question, "Who wrote the original paper?", "What are bananas?"], "noncommittal": False},
                match=schema_has("questions"),
            )
            llm = LLM(settings, db)
            scale = similarity_scale.scale_for(db, llm)
            score = metrics.answer_relevancy(llm, "llama3.2", question, result_with(), scale)
            values[name] = [round(s, 6) for s in score.details["similarities"]]
    assert values["bag"] == values["dense"]
    assert values["bag"][0] == pytest.approx(1.0) and values["bag"][2] == 0.0


@pytest.mark.slow
def test_an_ingest_that_changes_the_knowledge_base_measures_the_scale_again(scaled, tmp_path):
    _, fake, settings, db = scaled
    first = similarity_scale.scale_for(db, LLM(settings, db))
    extra = tmp_path / "gardening.md"
    extra.write_text(
        "# Gardening\n\nTomatoes need six hours of sun a day and deep watering twice a week. "
        "Prune the side shoots so the plant puts its energy into the fruit. "
        "Compost adds nitrogen to the soil and keeps it moist in dry summers.\n"
    )
    ingest_and_record([str(extra)], settings, db)
    rows = [r for r in similarity.latest(db)]
    with db.cursor() as cur:
        stored = cur.execute("SELECT kb_fingerprint, n_chunks FROM similarity_scales ORDER BY measured_at").fetchall()
    assert len(stored) == 2 and stored[1][1] == first.n_chunks + 1 and stored[0][0] != stored[1][0]
    assert rows[0].n_chunks == first.n_chunks + 1
    now = similarity_scale.scale_for(db, LLM(settings, db))
    assert now.n_chunks == first.n_chunks + 1 and now.kb_fingerprint != first.kb_fingerprint


def test_too_small_a_knowledge_base_reads_similarities_raw_with_the_reason(templates, monkeypatch, tmp_path):
    with under("bag", templates, monkeypatch, tmp_path, with_kb=False) as (fake, settings, db):
        small = tmp_path / "one.md"
        small.write_text("# One\n\nThe RAG paper's Wikipedia index held 21 million passages.\n")
        ingest_and_record([str(small)], settings, db)
        scale = similarity_scale.scale_for(db, LLM(settings, db))
        assert not scale.measured and "measuring needs at least 3" in scale.reason
        assert scale.relative(0.3) == 0.3 and similarity_scale.floor(scale, 0.95) is None
        topic = on_topic.check(LLM(settings, db), settings, QUESTION, ON_TARGET, scale)
        assert "raw cosine; the scale is not measured" in topic.reason


@pytest.mark.slow
def test_settings_page_and_doctor_show_the_scale(scaled):
    scale_name, fake, settings, db = scaled
    scale = similarity_scale.scale_for(db, LLM(settings, db))
    at = app("pages/settings.py")
    assert not at.exception
    frame = next(d.value for d in at.dataframe if "unrelated median" in d.value.columns)
    row = frame.iloc[0]
    assert row["embedding model"] == "nomic-embed-text" and row["digest"] == scale.digest[:12]
    assert row["unrelated median"] == pytest.approx(round(scale.median, 3))
    assert row["retrieval floor"] == pytest.approx(round(scale.quantile(0.95), 3))
    assert any(s.value.startswith("**similarity scale**") for s in at.success)
