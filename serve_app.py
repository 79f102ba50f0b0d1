"""`make run`'s entry: import the modules the pages draw with (and make one plotly figure of each kind, which
imports plotly's figure classes), then start Streamlit's server on streamlit_app.py with the flags given. Each
page's first visit after the server starts then finds its modules imported (they were 0.7 s of the Evaluate page's
first render) instead of importing them in its own script run; importing them here, before the server's threads
exist, cannot deadlock on the import lock as a warm-up thread beside the first page's run could. The list of
element scripts a browser prefetches is made here too. What the warm-up made is then frozen out of the garbage
collector's sight (settle_heap). Once the server is up, a thread computes what Evaluate and Calibration show first
(pages/views/precompute.py)."""

from __future__ import annotations

import gc
import importlib
import logging
import pkgutil
import sys
import threading

import pages.views


def warm() -> list[str]:
    """Import every module of pages/views (and so what they import: pandas, Altair, plotly, the pipeline)."""
    names = [f"pages.views.{module.name}" for module in pkgutil.iter_modules(pages.views.__path__)]
    # st.cache_data checks its parameters when a function is decorated and warns that no server runs yet; the
    # cache itself is made at the first call, inside the server
    from streamlit.runtime.caching import cache_data_api  # its logger gets Streamlit's level when it is made

    quiet = logging.getLogger(cache_data_api.__name__)
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        for name in names:
            importlib.import_module(name)
    finally:
        quiet.setLevel(level)
    return names


def settle_heap() -> int:
    """Collect once, then move every object alive now (the imported modules, their classes, plotly's validators)
    into the collector's permanent generation; how many were moved. Streamlit collects every generation after each
    script run (runner.postScriptGC, kept on: it bounds the memory of long sessions); over the whole heap that
    took 0.24-0.27 s a run on this machine, holding the GIL just after the run's end was queued, so the browser
    waited for that end and for the scripts it asked for meanwhile. Over what the pages made since, 0.02-0.04 s.
    Objects frozen here are still freed when nothing refers to them; only a cycle among them would stay."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def main(flags: list[str] | None = None) -> None:
    warm()
    from pages.views.plotly_charts import prepare

    prepare()
    from pages.views.prefetch import prefetch_script

    prefetch_script()  # the element scripts' list (0.1 s of reading Streamlit's files), not on the first page's run
    settle_heap()
    from pages.views.common import resources
    from pages.views.precompute import THREAD, precompute_when_serving

    threading.Thread(target=precompute_when_serving, args=(resources,), name=THREAD, daemon=True).start()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", "streamlit_app.py", *(sys.argv[1:] if flags is None else flags)]
    cli.main()


if __name__ == "__main__":
    main()
