"""What the slowest pages show first, computed once when the server starts (issue 29): the newest evaluation's
report (Evaluate), the comparison of the newest evaluation with its baseline (Compare) and the agreement of
Calibration's first scope with its kappa intervals. The pages
keep these by their inputs (pages/views/cached.py, pipeline/calibration/agreement.py), so their first visit after
`make run` finds them computed instead of computing them in the visitor's script run. Nothing is shown or
stored; a failure is logged and leaves the page to compute as it always could."""

from __future__ import annotations

import logging
import time

from pages.views.cached import comparison, evaluation_report
from pages.views.calibration import agreement_by_criterion, scope_run_ids, scopes
from pipeline.calibration.agreement import inter_annotator
from pipeline.errors import WorkbenchError
from pipeline.evaluation.compare_runs import default_pair
from pipeline.evaluation.judge import CRITERIA
from pipeline.history.evaluations import list_eval_runs

log = logging.getLogger(__name__)
THREAD = "precompute"  # the name of the thread serve_app starts


def precompute(settings, db) -> list[str]:
    """Compute what Evaluate, Compare and Calibration show by default; what was computed, in words."""
    done = []
    runs = list_eval_runs(db)
    if runs:
        name = runs[0]["name"]  # the newest, Evaluate's default
        evaluation_report(settings, db, name)
        done.append(f"the report of evaluation {name}")
    a, b, _ = default_pair(db)  # Compare's default
    if a is not None and b is not None:
        comparison(settings, db, a, b)
        done.append(f"the comparison of {a} with {b}")
    label, scope = next(iter(scopes(db).items()), (None, None))  # Calibration's default
    run_ids = scope_run_ids(db, scope) if scope else []
    if run_ids:
        _, stats = agreement_by_criterion(db, run_ids)
        shown = next((c for c in CRITERIA if stats[c].n), None)  # the criterion whose details show first
        if shown is not None:
            inter_annotator(db, run_ids, shown)
            done.append(f"Calibration's agreement for {label}")
    return done


def server_is_up() -> bool:
    """Streamlit's runtime exists and serves (its modules are imported by then)."""
    from streamlit.runtime import Runtime, RuntimeState

    serving = {RuntimeState.NO_SESSIONS_CONNECTED, RuntimeState.ONE_OR_MORE_SESSIONS_CONNECTED}
    return Runtime.exists() and Runtime.instance().state in serving


def precompute_when_serving(resources, wait_s: float = 120.0, is_up=server_is_up) -> None:
    """Once Streamlit's server is up (so this thread imports nothing beside a page's script run), precompute with
    the pages' own settings and store (`resources`: pages.views.common.resources)."""
    from streamlit.runtime.scriptrunner_utils import script_run_context

    deadline = time.monotonic() + wait_s
    while not is_up():
        if time.monotonic() > deadline:
            return
        time.sleep(0.1)
    # the cached functions warn, once per call, that this thread runs no script; it need not
    logging.getLogger(script_run_context.__name__).addFilter(lambda record: record.threadName != THREAD)
    start = time.perf_counter()
    try:
        done = precompute(*resources())
    except WorkbenchError as exc:  # e.g. the store is busy: the pages compute their own, as without this thread
        log.warning("the pages' statistics were not precomputed (%s); each page computes its own", exc.message)
        return
    except Exception:
        log.warning("precomputing the pages' statistics failed; each page computes its own", exc_info=True)
        return
    if done:
        log.info("precomputed %s in %.1f s", "; ".join(done), time.perf_counter() - start)
