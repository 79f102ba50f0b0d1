"""One voice (issue 51): what the pages say agrees with what happened. Extraction errors are said as such, the
diagnosis knows when every item abstained, Annotate asks only about the claims of the answer it shows, the sidebar
counts metrics below floor (not breaches), and the sidebar's health is read again on every page load."""

from __future__ import annotations

import socket
import threading
import time
from datetime import datetime, timezone

import pytest
from test_app import app

from pages.views.annotate import claims_to_rate
from pages.views.answer import extraction_error_note, unsupported_banner
from pages.views.common import sidebar_health
from pipeline.answering.events import AnswerResult, Attempt
from pipeline.config import load_settings
from pipeline.evaluation.diagnosis import diagnose
from pipeline.models.health import PROBE_TIMEOUT_S, probe_model_servers
from pipeline.regression.alerts import below_floor_metrics, count_below_floor
from pipeline.verification.claims import CheckedClaim
from store.records import AttemptRecord

ANSWER = "The index holds 21 million passages. It was built in 2020."
FIRST, SECOND = (0, 36), (37, len(ANSWER))


def claim(n: int, verdict: str, span=FIRST) -> CheckedClaim:
    return CheckedClaim(n, f"claim {n}", verdict, "m", answer_span=span)


def result_with(claims: list[CheckedClaim], status: str = "accepted", answer: str = ANSWER) -> AnswerResult:
    attempt = Attempt(AttemptRecord(1, False, ANSWER, status, 1.0, len(claims), 1), claims)
    return AnswerResult(
        run_id=1,
        kind="chat",
        status=status,
        question="q",
        started_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        answer=answer,
        faithfulness=1.0,
        attempts=[attempt],
        final_attempt=1,
    )


# -- extraction errors are not unsupported claims ---------------------------------------------------------------


def test_extraction_errors_beside_a_supported_claim_are_no_unsupported_claims():
    claims = [claim(1, "supported"), claim(2, "extraction_error"), claim(3, "extraction_error", SECOND)]
    assert unsupported_banner(ANSWER, claims) is None  # was: "2 of 3 claims are not supported ...: 2 marked"
    note = extraction_error_note(claims)
    assert note.startswith("2 extracted claims of 3 were extraction errors: the extractor got them wrong")
    assert "left out of its score" in note


def test_the_banner_counts_only_scored_claims_and_marks_only_what_is_marked():
    claims = [claim(1, "supported"), claim(2, "unsupported", SECOND), claim(3, "extraction_error")]
    assert (
        unsupported_banner(ANSWER, claims) == "1 of 2 claims is not supported by the sources: 1 marked in the answer."
    )
    assert extraction_error_note(claims).startswith("1 extracted claim of 3 was an extraction error")
    assert extraction_error_note([claim(1, "supported")]) is None


# -- a diagnosis that knows about abstentions -------------------------------------------------------------------


def test_when_every_item_abstained_the_diagnosis_does_not_blame_the_generator():
    means = {"faithfulness": 0.2, "context_recall": 0.9, "context_precision": 0.8, "answer_relevancy": 0.8}
    found = diagnose(means, abstained=10, items=10)
    assert found.component == "abstention"
    assert found.sentence.startswith("All 10 items abstained: no answer was given")
    assert "adds claims" not in found.sentence
    # some abstained: the generator rule still applies to the items that answered, and says what it left out
    some = diagnose(means, abstained=3, items=10)
    assert some.component == "generator" and "(3 abstained items left out" in some.sentence


# -- Annotate asks only about what the rater sees ---------------------------------------------------------------


def test_annotate_asks_about_the_answers_own_claims_only():
    claims = [claim(1, "supported"), claim(2, "extraction_error", SECOND)]
    assert [c.claim_no for c in claims_to_rate(result_with(claims))] == [1]
    # an abstention shows its abstention, not the withheld attempt these claims belong to
    withheld = result_with(claims, status="abstained", answer="The retrieved sources do not answer this question.")
    assert claims_to_rate(withheld) == []


# -- counts that count what they say ----------------------------------------------------------------------------


def add_floor_alert(db, eval_run_id: int, metric: str, status: str = "open") -> None:
    with db.cursor() as cur:
        cur.execute(
            "INSERT INTO alerts (eval_run_id, kind, metric, slice, message, status) "
            "VALUES (?, 'floor', ?, 'all', ?, ?)",
            [eval_run_id, metric, f"{metric} below its floor", status],
        )


def test_one_metric_below_its_floor_in_two_runs_is_one_metric(db):
    add_floor_alert(db, 1, "faithfulness")
    add_floor_alert(db, 2, "faithfulness")
    assert below_floor_metrics(db) == (1, 2) and count_below_floor(db) == 2
    add_floor_alert(db, 2, "context_recall")
    add_floor_alert(db, 3, "answer_relevancy", status="acknowledged")
    assert below_floor_metrics(db) == (2, 3)


def test_the_sidebar_says_how_many_metrics_are_below_floor(kb_db):
    add_floor_alert(kb_db, 1, "faithfulness")
    add_floor_alert(kb_db, 2, "faithfulness")
    at = app("pages/trends.py")
    links = [link.proto for link in at.sidebar.get("page_link")]
    floor = next(link for link in links if "below floor" in link.label)
    assert floor.label == "1 metric below floor"  # was "2 metrics below floor"
    assert floor.help.startswith("2 open floor breaches")


# -- health read again on every page load -----------------------------------------------------------------------


def sidebar_alert(at) -> str:
    return " ".join([e.value for e in at.sidebar.success] + [e.value for e in at.sidebar.error])


@pytest.mark.slow
def test_the_sidebar_reads_health_again_when_a_page_loads(fake, kb_db):
    first = app("pages/trends.py")
    assert "Ollama ready at" in sidebar_alert(first)
    fake.stop()  # Ollama stops
    # the next page load (a new session, as a browser reload is) reads it again: a shared cache said "ready"
    second = app("pages/trends.py")
    assert "Ollama: 1 problem; see Settings & health" in sidebar_alert(second)


def test_a_page_load_probes_and_the_same_pages_reruns_reuse_the_reading():
    settings = load_settings()
    calls, now = [], [100.0]

    def probe(s):
        calls.append(s)
        return [len(calls)]

    state = {}
    assert sidebar_health(settings, "pages/runs.py", state, probe, lambda: now[0]) == [1]
    now[0] += 1
    assert sidebar_health(settings, "pages/runs.py", state, probe, lambda: now[0]) == [1]  # a widget's rerun
    assert sidebar_health(settings, "pages/trends.py", state, probe, lambda: now[0]) == [2]  # another page
    assert sidebar_health(settings, "pages/runs.py", state, probe, lambda: now[0]) == [3]  # back: a page load
    now[0] += 60
    assert sidebar_health(settings, "pages/runs.py", state, probe, lambda: now[0]) == [4]  # a long stay


def test_the_health_probe_gives_up_on_a_silent_host_after_its_own_short_timeout(monkeypatch):
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        accepted = []
        threading.Thread(target=lambda: accepted.append(silent.accept()), daemon=True).start()
        monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setenv("WORKBENCH_REQUEST_TIMEOUT_S", "60")
        settings = load_settings()
        started = time.monotonic()
        checks = probe_model_servers(settings)
        waited = time.monotonic() - started
    assert not checks[0].ok
    assert waited < PROBE_TIMEOUT_S + 3, waited  # not the 60 s a model call may take


def test_the_settings_pages_health_asks_a_silent_host_with_the_probes_timeout_the_doctor_with_the_settings(
    monkeypatch, db
):
    from pipeline.knowledge import health as knowledge_health

    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setenv("WORKBENCH_REQUEST_TIMEOUT_S", "60")
        settings = load_settings()
        asked = []
        real = knowledge_health.host_statuses
        monkeypatch.setattr(
            knowledge_health, "host_statuses", lambda s, roles: asked.append(s.request_timeout_s) or real(s, roles)
        )
        started = time.monotonic()
        checks, _ = knowledge_health.health(settings, db, probe=True)  # the Settings page's
        waited = time.monotonic() - started
    assert asked == [PROBE_TIMEOUT_S] and not checks[0].ok
    assert waited < 2 * PROBE_TIMEOUT_S + 3, waited  # not the 60 s a model call may take

    class Listed(Exception):
        pass

    def listing(s, roles):
        asked.append(s.request_timeout_s)
        raise Listed  # the timeout it would list the hosts with is all this part checks

    monkeypatch.setattr(knowledge_health, "host_statuses", listing)
    with pytest.raises(Listed):  # the doctor's: the settings' own timeout
        knowledge_health.health(settings, db)
    assert asked == [PROBE_TIMEOUT_S, 60]


# -- labels in words, tables that fit ---------------------------------------------------------------------------


def test_internal_column_names_are_headed_in_words_with_the_name_in_the_tooltip():
    from pages.views.tables import worded

    config = worded(["item_id", "context_precision", "question", "run_status"], {"run_status": "status"})
    assert config["item_id"] == {"label": "item", "help": "Stored as item_id."}
    assert config["context_precision"]["label"] == "context precision"
    assert "question" not in config and config["run_status"] == "status"  # plain words, and a page's own label


def test_a_table_too_wide_for_1280_px_gets_widths_that_fit():
    import pandas as pd

    from pages.views.tables import MAIN_PX, MIN_PX, fitted, natural_px

    frame = pd.DataFrame(
        {"id": [1, 2], "text": ["x" * 300, "y"], "path": ["guide/a-long-name.md", "b.md"], "note": ["z" * 200, ""]}
    )
    config = fitted(frame, {}, MAIN_PX, with_index=False)
    widths = {c: config[c]["width"] for c in frame.columns}
    assert sum(widths.values()) <= MAIN_PX
    assert widths["id"] == MIN_PX and widths["path"] == int(natural_px("path", frame["path"]))  # narrow: kept
    assert widths["text"] == widths["note"] > widths["path"]  # the widest share what is left
    narrow = frame[["id", "path"]]
    assert fitted(narrow, {}, MAIN_PX, with_index=False) == {}  # a table that fits is left alone


def test_call_stages_and_statuses_read_as_words():
    from pages.views.markup import stage_label
    from pipeline.vocabulary import status_word

    assert stage_label("metric_context_precision") == "context precision (metric)"
    assert stage_label("judge_correctness") == "correctness (judge)"
    assert stage_label("embed_query") == "embed query"
    assert [status_word(s) for s in ("no_claims", "off_topic", "verified", "accepted")] == [
        "no claims",
        "off topic",
        "scored",
        "accepted",
    ]


def test_every_status_label_starts_with_the_word_every_table_shows():
    from pages.views.markup import LEADING_SYMBOLS
    from pipeline.answering.status import STATUS_TEXT, status_label
    from pipeline.vocabulary import Status

    for status in Status:
        label = LEADING_SYMBOLS.sub("", status_label(status))  # the terminal's emoji off, as the pages show it
        assert label.split(":")[0] == status.word, (status, label)
    assert set(STATUS_TEXT) == set(Status)
