"""Widget values kept while their widgets are not drawn (a panel or a tab drawn only when open)."""

from __future__ import annotations

from collections.abc import Iterable


def keep_widget_values(state, keys: Iterable[str]) -> None:
    """Streamlit drops a widget's value at the end of a run that did not draw it, unless the page set the value
    in that run: each key that has a value is set to it again, so the widgets find it when drawn next."""
    for key in keys:
        if key in state:
            state[key] = state[key]
