"""Run a golden set through the workbench, or score another pipeline's answers as given; see every metric, the
diagnosis, slices and items. ?eval=NAME links to one evaluation's report."""

from pathlib import Path

import streamlit as st

from pages.views.cached import evaluation_report
from pages.views.common import page_setup, show_error
from pages.views.evaluation import choose_dataset, choose_evaluation, live_progress, show_report, start_form
from pipeline.errors import WorkbenchError
from pipeline.history.evaluations import list_eval_runs

START_OPEN = "start_open"  # session state: whether the start form's expander is open


def open_start_form() -> None:
    st.session_state[START_OPEN] = True


settings, db = page_setup(__file__)

# Open while there is no evaluation; once there is one, a primary button above the closed form opens it (the form
# stays where it was, above the report, so the report is not pushed down on every visit).
has_runs = bool(list_eval_runs(db))
# set here rather than as the expander's `expanded`: a changed `expanded` is another widget to Streamlit, so the
# first evaluation's start would close the form on the next rerun, under the hand of a user still in it
st.session_state.setdefault(START_OPEN, not has_runs)
if not st.session_state[START_OPEN]:
    st.button("Start an evaluation", type="primary", icon=":material/play_arrow:", on_click=open_start_form)
else:  # one control at a time: the button while the form is closed, the form (closable) while open
    start_box = st.expander(
        "Start an evaluation",
        key=START_OPEN,
        on_change="rerun",  # tracked: closing it brings the button back
        icon=":material/play_arrow:",
    )
    # its widgets (a radio, a file uploader, text and number inputs) are drawn only while it is open: they would
    # otherwise be sent and mounted, and their scripts loaded, on every first render of the report
    with start_box:
        dataset = choose_dataset(Path(settings.kb_path).parent / "eval", db)
        if dataset is not None:
            start_form(settings, db, dataset)

# In a container of its own: when a timed rerun of the fragment is queued during a full run, Streamlit (1.67)
# drops the full run's unsent fragment output as that fragment run starts, and the browser, ending the full run,
# removes the fragment's block as stale. Placed directly in the page, that moved every later element up one slot
# and the fragment's next output overwrote the Evaluation selector (the browser then kept it hidden until the next
# full run). In this container only the fragment's own block goes and comes back.
with st.container():
    live_progress()

name = choose_evaluation([r["name"] for r in list_eval_runs(db)])
if name is None:
    st.info("No evaluations yet.")
    st.stop()
try:
    show_report(evaluation_report(settings, db, name))
except WorkbenchError as exc:
    show_error(exc)
