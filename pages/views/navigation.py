"""The app's pages and the drilldown's tabs, declared once: the sidebar, each page's heading, the tests and the
page-speed bench all read these lists. Nothing here imports Streamlit, so tests and benches can read it cheaply."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Page:
    file: str  # the script, relative to the repository root
    label: str  # the sidebar link and the browser tab's title
    icon: str  # a Material Symbol (shipped with Streamlit): emoji render as empty boxes without an emoji font
    heading: str = ""  # the page's title when it says more than its short sidebar label

    @property
    def title(self) -> str:
        return self.heading or self.label

    @property
    def url_path(self) -> str:
        """The page's address under the app's root ("" for the start page)."""
        return "" if self.file == START_PAGE else Path(self.file).stem


START_PAGE = "streamlit_app.py"

# The page order of the sidebar. Streamlit's own page list is hidden (.streamlit/config.toml) because it
# names pages after their files; these links carry labels and icons and keep the order explicit.
PAGES = (
    Page(START_PAGE, "Chat", ":material/chat:"),
    Page("pages/evaluate.py", "Evaluate", ":material/science:"),
    Page("pages/datasets.py", "Datasets", ":material/dataset:"),
    Page("pages/runs.py", "Runs", ":material/table_rows:"),
    Page("pages/spans.py", "Spans", ":material/account_tree:", heading="Search spans"),
    Page("pages/annotate.py", "Annotate", ":material/rate_review:"),
    Page("pages/calibration.py", "Calibration", ":material/balance:"),
    Page("pages/trends.py", "Trends", ":material/trending_up:"),
    Page("pages/compare.py", "Compare", ":material/compare_arrows:", heading="Compare evaluations"),
    Page("pages/experiments.py", "Experiments", ":material/experiment:"),
    Page("pages/detector.py", "Detector", ":material/radar:", heading="Detector benchmarks"),
    Page("pages/knowledge_base.py", "Knowledge base", ":material/library_books:"),
    Page("pages/settings.py", "Settings & health", ":material/settings:"),
)


def page(file: str) -> Page:
    """The declared page of a script, by its path relative to the repository root (or its absolute path)."""
    for declared in PAGES:
        if file == declared.file or Path(file).as_posix().endswith("/" + declared.file):
            return declared
    raise KeyError(f"{file} is not in PAGES (pages/views/navigation.py): add it there")


# A run's drilldown, in this order; the first is the one open on arrival.
DRILLDOWN_TABS = ("Answer and claims", "Retrieval", "Trace", "Calls", "Scores")
