"""`python -m pipeline align CRITERION` against the fake Ollama: a refused alignment keeps the current prompt; an
accepted one is a new judge prompt version that changes the judge pin (so the baseline rule never pairs runs
judged under two versions), listed with its held-out kappa and fitted ratings, and one can go back; a run killed
with SIGKILL resumes without asking again for what it had finished."""

import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timezone

import duckdb
import pytest
from conftest import ROOT

from pipeline.calibration.align_run import Aligner
from pipeline.calibration.annotations import save_rating
from pipeline.cli.main import main
from pipeline.evaluation.judge_prompts import judge_prompt
from pipeline.evaluation.runner import evaluation_pin
from store import judge_versions
from store.baselines import previous_comparable
from store.records import RunLog, RunRecord
from store.runs import save_run

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
QUESTIONS = 20
FILLER = "and the documents give much more background on this point that a careful reader may want to know"


def rated_store(db, human_noise: bool = False) -> list[int]:
    """20 questions, each with a short and a long answer naming k of the reference's 4 terms (the fake judge scores
    1 + k); people score 1 + k too, or, with human_noise, one point off on every third answer."""
    run_ids = []
    for q in range(QUESTIONS):
        terms = [f"term{q}x{i}" for i in range(4)]
        for a, short in enumerate((True, False)):
            k = (q + 2 * a) % 5
            answer = " ".join(terms[:k]) + "." if short else f"In short, {' '.join(terms[:k]) or 'nothing'} {FILLER}."
            run = RunRecord(
                kind="chat", question=f"What is topic {q}?", status="accepted", started_at=T0, answer=answer
            )
            run_id = save_run(db, RunLog(run))
            with db.transaction() as cur:
                cur.execute(
                    "INSERT INTO eval_items (eval_run_id, item_id, run_id, status, question, reference)"
                    " VALUES (0, ?, ?, 'done', ?, ?)",
                    [f"i{run_id}", run_id, run.question, " ".join(terms)],
                )
            human = 1 + k
            if human_noise and len(run_ids) % 3 == 0:
                human = human + 1 if human < 5 else human - 1
            save_rating(db, run_id, "ana", {"correctness": human, "helpfulness": 3, "faithfulness": 3})
            run_ids.append(run_id)
    return run_ids


def judge_requests(fake, since=0, system=None) -> list:
    found = []
    for r in fake.requests[since:]:
        messages = (r.get("body") or {}).get("messages") or []
        text = messages[0]["content"] if messages else ""
        if text.startswith(judge_prompt("correctness").system) and (system is None or text == system):
            found.append(r)
    return found


def eval_run(db, name: str, version: str, minute: int) -> int:
    with db.transaction() as cur:
        return cur.execute(
            "INSERT INTO eval_runs (name, dataset, dataset_hash, status, config, n_items, judge_model, judge_digest,"
            " judge_prompt_version, created_at) VALUES (?, 'golden', 'h', 'done', '{}', 0, 'judge', 'd', ?, ?)"
            " RETURNING id",
            [name, version, datetime(2026, 1, 2, 0, minute)],
        ).fetchone()[0]


@pytest.mark.slow
def test_a_refused_alignment_keeps_the_current_prompt_and_says_what_was_tried(fake, settings, db, capsys):
    rated_store(db, human_noise=True)
    before = evaluation_pin(settings, db).prompt_version
    assert main(["align", "correctness", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "planned" in out and "kept the current prompt" in out and "does not lie above zero" in out
    assert "tried: current, clarification, few-shot, combined" in out
    assert judge_versions.versions(db, "correctness") == [] and judge_versions.active(db) == {}
    assert evaluation_pin(settings, db).prompt_version == before == "judge-v1"


@pytest.mark.slow
def test_an_accepted_alignment_is_a_new_version_with_its_own_pin_never_a_baseline_across(fake, settings, db, capsys):
    fake.judge_short_bias = True
    run_ids = rated_store(db)
    old = eval_run(db, "before", evaluation_pin(settings, db).prompt_version, 0)
    assert main(["align", "correctness", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "new judge prompt v1" in out, out
    [version] = judge_versions.versions(db, "correctness")
    assert version["active"] and "short answers" in version["clarification"]
    assert version["gain_low"] > 0 and version["kappa_low"] <= version["held_out_kappa"] <= version["kappa_high"]
    assert sorted(version["fitted_on"]) == sorted(run_ids)
    pin = evaluation_pin(settings, db)
    assert pin.prompt_version == "judge-v1+aligned-correctness-v1"
    assert pin.version_for("correctness") == "judge-v1+aligned-correctness-v1"
    assert pin.version_for("grounding") == "judge-grounding-v1"  # another criterion's identity is unchanged
    new = eval_run(db, "after", pin.prompt_version, 1)
    assert previous_comparable(db, new) is None  # the run judged under the old prompt is no baseline
    assert previous_comparable(db, eval_run(db, "after-2", pin.prompt_version, 2)) == new
    assert main(["align", "correctness", "--versions"]) == 0
    listed = capsys.readouterr().out
    assert "* v1" in listed and "fitted on 40 ratings" in listed and "held-out kappa" in listed
    assert main(["align", "correctness", "--use", "0"]) == 0
    assert evaluation_pin(settings, db).prompt_version == "judge-v1"
    assert previous_comparable(db, eval_run(db, "back", "judge-v1", 3)) == old


@pytest.mark.slow
def test_the_aligned_prompt_is_what_the_judge_sends(fake, settings, db):
    fake.judge_short_bias = True
    rated_store(db)
    Aligner(settings, db, "correctness").run()
    pin = evaluation_pin(settings, db)
    since = len(fake.requests)
    from pipeline.evaluation.judge import JudgePin, judge
    from pipeline.models.llm import LLM

    def judged(pin):
        [score] = judge(LLM(settings, db), settings, "What is topic 1?", "term1x0.", "", "term1x0 term1x1", pin,
                        criteria=("correctness",))  # fmt: skip
        return score

    score = judged(pin)
    [sent] = judge_requests(fake, since)
    assert "short answers" in sent["body"]["messages"][0]["content"]
    # 1 of 2 reference terms: 3, as people score it; the built-in rubric adds the short answer's point
    assert score.prompt_version == "judge-v1+aligned-correctness-v1" and score.value == 3
    built_in = judged(JudgePin(pin.model, pin.digest, "judge-v1"))
    assert built_in.prompt_version == "judge-v1" and built_in.value == 4


@pytest.mark.slow
def test_an_alignment_killed_with_sigkill_resumes_without_redoing_finished_steps(fake, settings, db, tmp_path):
    fake.judge_short_bias = True
    rated_store(db)
    db.close()
    env = {**os.environ, "COLUMNS": "200", "WORKBENCH_CACHE_ENABLED": "false"}  # a redone step reaches the fake
    command = [sys.executable, "-m", "pipeline", "align", "correctness", "--yes"]
    log = open(tmp_path / "child.log", "w")  # noqa: SIM115 (closed below)
    child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    gate = fake.hold(match=lambda body: len(judge_requests(fake)) >= 70, timeout_s=600)
    got_going = fake.wait_until(lambda f: gate.waiting >= 1, timeout_s=600)  # a cold child imports for seconds
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    gate.release()
    log.close()
    assert got_going, "the child never got going: " + (tmp_path / "child.log").read_text()
    con = duckdb.connect(settings.store_path)
    finished = dict(con.execute("SELECT step, saved_at FROM alignment_steps").fetchall())
    con.close()
    assert "baseline" in finished and "outer0/inner0/clarify" in finished
    since = len(fake.requests)
    rerun = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(finished)} steps already done" in rerun.stdout
    current_system = judge_prompt("correctness").system
    assert judge_requests(fake, since, system=current_system) == []  # the baseline's 40 judgements are not asked again
    planned = int(rerun.stdout.split("planned ")[1].split(" model calls")[0].replace(",", ""))
    asked = len([r for r in fake.requests[since:] if (r.get("body") or {}).get("messages")])
    assert 0 < asked <= planned
    con = duckdb.connect(settings.store_path)
    after = dict(con.execute("SELECT step, saved_at FROM alignment_steps").fetchall())
    con.close()
    assert all(after[step] == saved for step, saved in finished.items()) and len(after) > len(finished)
    assert "new judge prompt v1" in rerun.stdout
    json.dumps(after, default=str)
