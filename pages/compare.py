"""Two evaluation runs side by side (deep link ?a=NAME&b=NAME): metric tiles with B − A, latency, tokens and cost
with B − A, the items that got worse or better, every item's costs, and both answers with their claims' verdicts."""

import streamlit as st

from pages.views.cached import comparison
from pages.views.common import page_setup, show_error
from pages.views.compare import choose_runs, item_tabs, show_comparison, show_costs
from pages.views.markup import escape_markdown
from pipeline.errors import WorkbenchError
from pipeline.evaluation.compare_runs import answers_of, default_pair, evaluation_names

settings, db = page_setup(__file__)

names = evaluation_names(db)
if len(names) < 2:
    st.info("Comparing needs two evaluation runs; run them on the Evaluate page or with `python -m pipeline eval`.")
    st.stop()
default_a, default_b, why = default_pair(db)
a, b = choose_runs(names, default_a, default_b)
st.caption(escape_markdown(f"By default, B is the newest run and A its baseline by the one baseline rule ({why})."))
try:
    result = comparison(settings, db, a, b)
except WorkbenchError as exc:
    show_error(exc)
    st.stop()
show_comparison(result)
show_costs(result)
item_tabs(result, lambda pair: answers_of(db, pair))
