"""How fast each page of the running app answers in a browser (issue 29): `streamlit run` against a store of
BENCH_RUNS runs (default 10,000; the synthetic store of bench/scale_data.py, with people's ratings of 300
evaluation answers added so that Calibration has statistics to compute), a fake Ollama for the health checks,
and Debian's Chromium driven by Playwright. `python -m bench page_speed` (BENCH_PAGES=Evaluate,Runs: only those
pages).

For each page, in the order of the sidebar:
- first render: a new tab (a new Streamlit session) of a browser profile that has opened the app before (its
  HTTP cache holds Streamlit's scripts, as a user's browser does) opens the page's URL, the first time the page is
  opened since the server started; the time from the start of the navigation until the page is ready;
- first render, a later tab: one more new tab opens it, what the server computed for the first kept;
- visit: in the first tab, after going to another page by its sidebar link, a click on this page's link; the time
  from the click until the page is ready (the median of VISITS visits).
Ready: the app's script run that the action started has finished (`stApp`'s data-test-script-state is
notRunning after having been running) and no element is a skeleton (stSkeleton, stSkeletonElement, a lazily
loaded element's placeholder) or stale (data-stale="true", greyed out), with nothing changing for QUIET_S; the
time taken is the moment that state was reached, read from the page's own clock (a MutationObserver records
each change). Each figure's note says how much of it came after the script had finished (skeletons, stale
elements, the browser drawing). One load of the app before all of this (not counted) lets the server import
its modules and fill its process-wide caches; its time, with nothing cached in the browser either, is reported
apart.

The floors, served the same way in the same run (Streamlit's `streamlit run` with the app's configuration, a new
tab of a profile that loaded it once, median of FLOOR_TABS): a one-line page, and a page of one plotly chart (a
new tab loads plotly.js, ~4.7 MB, the first time it shows one). A page's first render is held to its floor +
FLOOR_MARGIN_S: the plotly floor when the page drew a plotly chart (read from the page itself once it is ready:
a `stPlotlyChart` element), else the one-line floor. A visit and a drilldown tab click are held to
VISIT_TARGET_S.

A run's drilldown (Runs at ?run_id=, the run with the most spans; BENCH_PAGES=Drilldown for it alone): its first
render in a new tab, then a click on each of its tabs until the page is ready (a tab is drawn when chosen).
Compare's two tabs likewise (in a new tab on its default pair; with BENCH_PAGES=Compare).

Also: the Evaluate page's script runs in IDLE_S seconds with nothing running (a timed fragment reran it every
second; the target is none)."""

from __future__ import annotations

import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from bench.common import FakeOllama, Figure
from bench.scale import ready_store
from pages.views.compare import ITEM_TABS as COMPARE_TABS
from pages.views.navigation import DRILLDOWN_TABS, PAGES
from pages.views.plotly_charts import CONFIG

N_RUNS = 10_000
VISITS = 3
QUIET_S = 0.7
IDLE_S = 4.0
FLOOR_MARGIN_S, VISIT_TARGET_S = 0.6, 0.5
WIDTH, HEIGHT = 1280, 1000
RATED = 300  # evaluation answers given a person's rating (and a second person's for a sixth of them)

# In the page: a record of every change of the script's state and of whether any element is a skeleton or stale.
RECORDER = """
(() => {
  const BUSY = '[data-testid="stSkeleton"], [data-testid="stSkeletonElement"], [data-testid="stAppSkeleton"], '
    + '[data-stale="true"]';
  const bench = window.__bench = {events: [], last: null, changed: 0};
  const check = () => {
    bench.changed = performance.now();
    const app = document.querySelector('[data-testid="stApp"]');
    const state = app ? app.getAttribute('data-test-script-state') : 'none';
    const busy = document.querySelectorAll(BUSY).length > 0;
    const last = bench.last;
    if (!last || last.state !== state || last.busy !== busy) {
      bench.last = {t: performance.now(), state, busy};
      bench.events.push(bench.last);
    }
  };
  new MutationObserver(check).observe(document, {subtree: true, childList: true, attributes: true,
    attributeFilter: ['data-test-script-state', 'data-stale', 'data-testid', 'aria-selected', 'hidden']});
  check();
})();
"""

# The time (page clock) the page became ready after t0, and when its script run finished; null while not yet.
READY = """
([t0, quiet, seen]) => {
  const events = window.__bench.events.filter(e => e.t >= t0);
  const last = window.__bench.last;
  if (!last || last.state !== 'notRunning' || last.busy) return null;
  const ran = events.some(e => e.state === 'running' || e.state === 'rerunRequested');
  const now = performance.now();
  if (now - last.t < quiet * 1000) return null;
  // an action that started no script run (a tab the browser shows without one) is ready at its last change
  // (or whose run was too short for the observer to see it running)
  if (!ran) {
    const changed = window.__bench.changed;
    if (now - t0 <= seen * 1000 || now - changed < quiet * 1000) return null;
    return {ready: Math.max(changed, t0), finished: t0, runs: 0, busy: 0};
  }
  const finished = [...events].reverse().find(e => e.state === 'notRunning');
  const runs = events.filter(e => e.state === 'running').length;
  let busy = 0;  // how long some element was a skeleton or stale, between t0 and ready
  const all = window.__bench.events;
  for (let i = 0; i < all.length - 1; i++) {
    if (all[i].busy) busy += Math.max(0, all[i + 1].t - Math.max(all[i].t, t0));
  }
  return {ready: Math.max(last.t, t0), finished: finished ? finished.t : last.t, runs, busy};
}
"""


def page_urls() -> list[tuple[str, str]]:
    """(label, URL path) of each page in sidebar order."""
    return [(page.label, page.url_path) for page in PAGES]


def rated_store(n_runs: int, folder: Path) -> Path:
    """A copy of the synthetic store of n_runs runs with people's ratings of RATED evaluation answers: the
    judge's scores moved by -1, 0 or +1 at random (seeded), and a second annotator on every sixth."""
    from pipeline.calibration.annotations import CRITERIA, save_rating

    db, _ = ready_store(n_runs)
    source = db.path
    db.close()
    path = folder / "workbench.duckdb"
    shutil.copy(source, path)
    from store.db import Database

    db = Database(str(path), 10, 60)
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT run_id, metric, value FROM scores WHERE run_id <= ? AND metric LIKE 'judge_%' AND status = 'ok'",
            [RATED],
        ).fetchall()
    judged: dict[int, dict[str, int]] = {}
    for run_id, metric, value in rows:
        judged.setdefault(run_id, {})[metric.removeprefix("judge_")] = int(value)
    rng = random.Random(29)
    for run_id, scores in sorted(judged.items()):
        for annotator in ["ana", "ben"] if run_id % 6 == 0 else ["ana"]:
            rating = {c: min(5, max(1, scores[c] + rng.choice([-1, 0, 0, 1]))) for c in CRITERIA if c in scores}
            save_rating(db, run_id, annotator, rating)
    db.close()
    return path


@contextmanager
def app_serving(store: Path, ollama_url: str):
    """`streamlit run` on a free port against the store, with default settings; its URL."""
    from browser_server import serving

    env = {k: v for k, v in os.environ.items() if not (k.startswith("WORKBENCH_") or k == "OLLAMA_HOST")}
    env.update({"OLLAMA_HOST": ollama_url, "WORKBENCH_DB": str(store), "WORKBENCH_CONFIG": ""})
    with serving(env, idle_release_s=None) as url:
        yield url


def wait_ready(page, t0: float, timeout_s: float = 180) -> dict:
    """{ready, finished, runs} (ms, page clock) once the page is ready after t0."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = page.evaluate(READY, [t0, QUIET_S, 2.0])
        if state is not None:
            return state
        page.wait_for_timeout(50)
    raise TimeoutError(f"the page was not ready within {timeout_s:.0f} s: {page.evaluate('window.__bench.last')}")


def click_link(page, label: str) -> float:
    """Click the sidebar's link to a page; the page clock's time just before."""
    return page.evaluate(
        """(label) => {
          const links = [...document.querySelectorAll('[data-testid="stSidebar"] [data-testid="stPageLink"] a')];
          const link = links.find(a => a.innerText.trim().split('\\n').pop().trim() === label);
          if (!link) throw new Error('no sidebar link ' + label);
          const t0 = performance.now();
          link.click();
          return t0;
        }""",
        label,
    )


def after(state: dict, t0: float) -> tuple[float, float, float]:
    """(seconds to ready, of which after the script finished, with a skeleton or stale element shown)."""
    return (
        (state["ready"] - t0) / 1000,
        max(0.0, state["ready"] - state["finished"]) / 1000,
        state["busy"] / 1000,
    )


def browser_profile(browser):
    """One browser profile for every tab, as a user's browser: what it has loaded before is in its HTTP cache."""
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    context.add_init_script(RECORDER)
    return context


def first_render(context, url: str, path: str) -> tuple[tuple, object]:
    """A new tab (a new Streamlit session) opens the page's URL: after(...) of it, and the tab."""
    page = context.new_page()
    page.set_default_timeout(180_000)
    page.goto(f"{url}/{path}", wait_until="commit")
    return after(wait_ready(page, 0.0), 0.0), page


def measure(context, url: str, label: str, path: str, other: str) -> tuple[tuple, tuple, list[tuple], bool]:
    """(first render, the first render of a later new tab, visits, whether the page drew a plotly chart)."""
    first, page = first_render(context, url, path)
    try:
        draws_plotly = page.evaluate(DRAWS_PLOTLY)
        later, later_page = first_render(context, url, path)  # what the server computed once is kept
        later_page.close()
        visits = []
        for _ in range(VISITS):
            wait_ready(page, click_link(page, other))
            t0 = click_link(page, label)
            visits.append(after(wait_ready(page, t0), t0))
        return first, later, visits, draws_plotly
    finally:
        page.close()


# One-element Streamlit pages served with the app's configuration: the floors under a first render. A page that
# draws plotly charts stands on the second: a new tab loads plotly.js the first time it shows one.
ONE_LINE, ONE_PLOTLY = "a one-line page", "a one-plotly-chart page"
FLOOR_PAGES = {
    ONE_LINE: "st.write('One line of text.')",
    ONE_PLOTLY: f"st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])), config={CONFIG!r})",
}
FLOOR_TABS = 3
FLOOR_IMPORTS = "import plotly.graph_objects as go\nimport streamlit as st\n"
DRAWS_PLOTLY = "() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"]').length > 0"


def floor_of(floors: dict[str, float], draws_plotly: bool) -> tuple[str, float]:
    """(the name of the floor a page's first render stands on, its target: that floor + FLOOR_MARGIN_S)."""
    name = ONE_PLOTLY if draws_plotly else ONE_LINE
    return name, round(floors[name] + FLOOR_MARGIN_S, 2)


def floor_renders(browser, folder: Path) -> dict[str, float]:
    """Each FLOOR_PAGES page's first render in a new tab (median of FLOOR_TABS, after the profile's first load):
    loading Streamlit's own scripts, its connection, the script run and the element's lazily loaded scripts."""
    from browser_server import serving

    floors = {}
    for i, (name, element) in enumerate(FLOOR_PAGES.items()):
        script = folder / f"floor_{i}.py"
        script.write_text(f"{FLOOR_IMPORTS}\nst.title('A page')\n{element}\n")
        with serving(dict(os.environ), idle_release_s=None, script=str(script)) as url:
            context = browser_profile(browser)
            try:
                first_render(context, url, "")[1].close()  # the profile's first load of this server's scripts
                renders = []
                for _ in range(FLOOR_TABS):
                    (first_s, _, _), page = first_render(context, url, "")
                    page.close()
                    renders.append(first_s)
            finally:
                context.close()
        floors[name] = statistics.median(renders)
    return floors


def floor_figures(floors: dict[str, float]) -> list[Figure]:
    return [
        Figure(
            f"floor: {name}, first render",
            value,
            "s",
            note=f"Streamlit alone, a new tab of a profile that loaded it once; median of {FLOOR_TABS}",
        )
        for name, value in floors.items()
    ]


def idle_runs(browser, url: str) -> int:
    """Script runs of the Evaluate page in IDLE_S seconds after it is ready, with nothing running."""
    context = browser_profile(browser)
    page = context.new_page()
    try:
        page.goto(f"{url}/evaluate", wait_until="commit")
        ready = wait_ready(page, 0.0)["ready"]
        page.wait_for_timeout(IDLE_S * 1000)
        return page.evaluate("(t) => window.__bench.events.filter(e => e.t > t && e.state === 'running').length", ready)
    finally:
        context.close()


# The page clock's time of each key press (keydown, captured before Streamlit's own listeners).
KEY_RECORDER = """
(() => {
  window.__keys = [];
  document.addEventListener('keydown', (e) => window.__keys.push(performance.now()), true);
})();
"""
# From now on, each frame: the first time (page clock) at least n scores are checked.
WATCH_CHECKED = """
(n) => {
  window.__checkedAt = null;
  const tick = () => {
    if (document.querySelectorAll("[role='radiogroup'] input[type='radio']:checked").length >= n) {
      window.__checkedAt = performance.now();
    } else {
      requestAnimationFrame(tick);
    }
  };
  requestAnimationFrame(tick);
}
"""
# Ready after a key press at t0: its score is checked, the script is not running, nothing is a skeleton or stale,
# and nothing changed for `quiet` s; the time is the later of the check and the last change of the script's state.
KEY_READY = """
([t0, quiet]) => {
  const checked = window.__checkedAt;
  const last = window.__bench.last;
  if (checked === null || !last || last.state !== 'notRunning' || last.busy) return null;
  const ready = Math.max(checked, last.t, t0);
  if (performance.now() - ready < quiet * 1000) return null;
  const events = window.__bench.events.filter(e => e.t >= t0);
  const finished = [...events].reverse().find(e => e.state === 'notRunning');
  return {ready, finished: finished ? finished.t : ready, runs: events.filter(e => e.state === 'running').length,
          busy: 0};
}
"""
KEY_PRESSES = 5  # one per criterion: each 1-5 key scores the next criterion not yet scored
KEY_PRESS_TARGET_S = 0.3


def key_ready(page, t0: float, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = page.evaluate(KEY_READY, [t0, QUIET_S])
        if state is not None:
            return state
        page.wait_for_timeout(50)
    raise TimeoutError(f"the key press's score was not shown within {timeout_s:.0f} s")


def annotate_key_presses(browser, url: str, size: str) -> list[Figure]:
    """The Annotate page's 1-5 keys: for each press, the time from the keydown until the page is ready again
    with the score checked (the rule of a visit: the script run has finished and nothing is a skeleton or stale,
    quiet for QUIET_S; a run so short that the page never showed it running counts from the check). The rater is
    a new name, so every answer is still to rate."""
    context = browser_profile(browser)
    context.add_init_script(KEY_RECORDER)
    page = context.new_page()
    page.set_default_timeout(180_000)
    try:
        page.goto(f"{url}/annotate", wait_until="commit")
        wait_ready(page, 0.0)
        name = page.get_by_label("Your name (ratings are saved under it)")
        t0 = page.evaluate("performance.now()")
        name.fill("bench-rater")
        name.press("Enter")
        wait_ready(page, t0)
        page.get_by_text("Keys: 1–5 score", exact=False).wait_for()
        page.get_by_role("heading", name="Annotate").click()  # out of the name box: keys typed there are text
        presses = []
        for n in range(KEY_PRESSES):
            page.evaluate(WATCH_CHECKED, n + 1)
            page.keyboard.press(str(n % 5 + 1))
            t0 = page.evaluate("window.__keys[window.__keys.length - 1]")
            state = key_ready(page, t0)
            presses.append((*after(state, t0), state["runs"]))
    finally:
        context.close()
    median = statistics.median(p[0] for p in presses)
    return [
        Figure(
            f"page Annotate: a 1-5 key press ({size})",
            median,
            "s",
            KEY_PRESS_TARGET_S,
            note=f"keydown to ready with the score shown, median of {KEY_PRESSES} (slowest "
            f"{max(p[0] for p in presses):.2f} s); {statistics.median(p[1] for p in presses):.2f} s after the "
            f"script finished; script runs seen {sum(p[3] for p in presses)}",
        )
    ]


# each tab in turn, the one open on arrival last (a click on the open tab would not rerun)
TABS_CLICKED = (*DRILLDOWN_TABS[1:], DRILLDOWN_TABS[0])
CLICK_TAB = """(label) => {
  const tab = [...document.querySelectorAll('[role="tab"]')].find(t => t.innerText.trim() === label);
  if (!tab) throw new Error('no tab ' + label);
  const t0 = performance.now();
  tab.click();
  return t0;
}"""


def busiest_run(store: Path) -> tuple[int, int, int]:
    """(run id, spans, model calls) of the run with the most spans: the drilldown with the most to draw."""
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        run_id, spans = con.execute(
            "SELECT run_id, count(*) FROM spans GROUP BY run_id ORDER BY count(*) DESC, run_id LIMIT 1"
        ).fetchone()
        (calls,) = con.execute("SELECT count(*) FROM llm_calls WHERE run_id = ?", [run_id]).fetchone()
    finally:
        con.close()
    return run_id, spans, calls


def drilldown_figures(context, url: str, run: tuple[int, int, int], size: str, floors: dict) -> list[Figure]:
    """A run's drilldown (?run_id=): its first render in a new tab, then each tab's click until ready."""
    run_id, spans, calls = run
    what = f"run {run_id}: {spans} spans, {calls} calls"
    (first_s, _, _), page = first_render(context, url, f"runs?run_id={run_id}")
    try:
        floor, target = floor_of(floors, page.evaluate(DRAWS_PLOTLY))
        figures = [
            Figure(f"a run's drilldown: first render ({size})", first_s, "s", target, note=f"{what}; floor: {floor}")
        ]
        return figures + tab_clicks(page, "a run's drilldown", TABS_CLICKED, size)
    finally:
        page.close()


def tab_clicks(page, where: str, tabs, size: str) -> list[Figure]:
    """A click on each tab until the page is ready, twice: the second round tells a tab's own cost from its
    scripts' first load."""
    figures = []
    for again in (False, True):
        for label in tabs:
            t0 = page.evaluate(CLICK_TAB, label)
            figures.append(
                Figure(
                    f"{where}: its {label} tab{', clicked again' if again else ''} ({size})",
                    after(wait_ready(page, t0), t0)[0],
                    "s",
                    VISIT_TARGET_S,
                    note="tab click to ready (only the chosen tab is drawn: a click reruns the tabs)"
                    + ("; every tab opened once before in this browser tab" if again else ""),
                )
            )
    return figures


def compare_tab_figures(context, url: str, size: str) -> list[Figure]:
    """Compare's tabs below its tiles (its default pair), each clicked until ready, in a new tab."""
    page = first_render(context, url, "compare")[1]
    try:
        return tab_clicks(page, "Compare", (*COMPARE_TABS[1:], COMPARE_TABS[0]), size)
    finally:
        page.close()


def run(n_runs: int | None = None) -> list[Figure]:
    from browser_server import CHROMIUM, CHROMIUM_FLAGS
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        print(f"page_speed skipped: no Chromium at {CHROMIUM} (apt-get install -y chromium)", file=sys.stderr)
        return []
    n_runs = n_runs or int(os.environ.get("BENCH_RUNS", N_RUNS))
    size = f"{n_runs:,} runs"
    figures = []
    with tempfile.TemporaryDirectory(prefix="workbench-pages-") as folder, FakeOllama() as fake:
        store = rated_store(n_runs, Path(folder))
        busiest = busiest_run(store)  # read before the app holds the store
        with app_serving(store, fake.url) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            try:
                floors = floor_renders(browser, Path(folder))
                figures += floor_figures(floors)
                context = browser_profile(browser)
                (cold_s, _, _), _, _, _ = measure(context, url, "Chat", "", "Settings & health")
                figures.append(
                    Figure(
                        f"the app's first load in a new browser profile ({size})",
                        cold_s,
                        "s",
                        note="Chat, with nothing cached in the browser and the server's first import of the app; "
                        "not counted below",
                    )
                )
                wanted = [w.strip() for w in os.environ.get("BENCH_PAGES", "").split(",") if w.strip()]
                for label, path in page_urls():
                    if wanted and label not in wanted:
                        continue
                    other = "Settings & health" if label == "Chat" else "Chat"
                    print(f"  {label}…", file=sys.stderr, flush=True)
                    first, later, visits, plotly = measure(context, url, label, path, other)
                    first_s, first_after, first_busy = first
                    floor, target = floor_of(floors, plotly)
                    visit_s = statistics.median(v[0] for v in visits)
                    visit_after = statistics.median(v[1] for v in visits)
                    figures.append(
                        Figure(
                            f"page {label}: first render ({size})",
                            first_s,
                            "s",
                            target,
                            note=f"floor: {floor}; the page's first since the server started, new tab to ready; "
                            f"{first_after:.2f} s "
                            f"of it after the script finished; skeleton or stale shown {first_busy:.2f} s",
                        )
                    )
                    figures.append(
                        Figure(
                            f"page {label}: first render, a later tab ({size})",
                            later[0],
                            "s",
                            target,
                            note=f"another new tab, the server's computations kept; skeleton or stale shown "
                            f"{later[2]:.2f} s",
                        )
                    )
                    figures.append(
                        Figure(
                            f"page {label}: visit ({size})",
                            visit_s,
                            "s",
                            VISIT_TARGET_S,
                            note=f"sidebar click to ready, median of {VISITS} (slowest "
                            f"{max(v[0] for v in visits):.2f} s); {visit_after:.2f} s after the script finished; "
                            f"skeleton or stale shown {statistics.median(v[2] for v in visits):.2f} s",
                        )
                    )
                if not wanted or "Compare" in wanted:
                    figures += compare_tab_figures(context, url, size)
                if not wanted or "Drilldown" in wanted:
                    print("  a run's drilldown…", file=sys.stderr, flush=True)
                    figures += drilldown_figures(context, url, busiest, size, floors)
                figures.append(
                    Figure(
                        f"page Evaluate: script runs in {IDLE_S:g} s idle ({size})",
                        idle_runs(browser, url),
                        "runs",
                        0,
                        note="nothing running: a timed fragment used to rerun it every second",
                    )
                )
                if not wanted or "Annotate" in wanted:
                    figures += annotate_key_presses(browser, url, size)
            finally:
                browser.close()
    return figures


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
