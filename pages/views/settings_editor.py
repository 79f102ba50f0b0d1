"""Changing settings on Settings & health: floors and prices first (Evaluate and Runs send people here), then any
other setting. A change goes through pipeline/settings_file.py: checked as a start checks it, written to the
settings file, applied at once or marked as waiting for a restart. A refused value's message stands under its
field and nothing is written."""

from __future__ import annotations

import streamlit as st

from pages.views.common import escape_keeping_code
from pages.views.markup import escape_markdown
from pipeline.config import DECLARATIONS, GROUPS, Settings, SettingValueError, declarations
from pipeline.errors import WorkbenchError
from pipeline.settings_file import current_settings, editable, overriding_variable, settings_file, write_settings

FLOORS_AND_PRICES = ("floors", "price_per_1k_prompt_tokens", "price_per_1k_completion_tokens")
ERRORS = "settings_errors"  # session state: {setting (or "" for the file): (message, fix)} of the last refused save
WRITTEN = "settings_written"  # session state: what the last save wrote, in words


def _field_key(name: str) -> str:
    return f"setting_field_{name}"


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _save(names: tuple[str, ...]) -> None:
    """The form's submit callback: runs before the page is drawn again, so the page reads the settings written."""
    changes = {name: _text(st.session_state[_field_key(name)]) for name in names}
    st.session_state[ERRORS], st.session_state[WRITTEN] = {}, None
    try:
        written = write_settings(changes)
    except SettingValueError as exc:
        st.session_state[ERRORS] = {exc.setting if exc.setting in names else "": (exc.message, exc.fix)}
        return
    except WorkbenchError as exc:
        st.session_state[ERRORS] = {"": (exc.message, exc.fix)}
        return
    st.session_state[WRITTEN] = _written_text(written)


def _written_text(written) -> str:
    if not written.changed:
        return f"Nothing changed: {written.path} already holds these values."
    parts = []
    if written.applied:
        parts.append(f"{', '.join(written.applied)}: applied at once")
    if written.restart:
        parts.append(f"{', '.join(written.restart)}: takes effect when the app (and `collect`) start again")
    return f"Written to {written.path}. " + "; ".join(parts) + "."


def _error(key: str) -> None:
    refused = st.session_state.get(ERRORS, {}).get(key)
    if refused:
        message, fix = refused
        st.error(
            escape_markdown(message) + (f"  \nFix: {escape_keeping_code(fix)}" if fix else ""), icon=":material/error:"
        )


def _field(name: str, shown: Settings) -> None:
    """One setting's field, its valid values and when a change applies, and the error of a refused value."""
    d = DECLARATIONS[name]
    key = _field_key(name)
    variable = overriding_variable(name)
    if key not in st.session_state or variable:
        value = getattr(shown, name)
        st.session_state[key] = value if d.kind is bool or d.spec.choices else _text(value)
    help_text = f"{d.doc}. Valid: {d.valid_values()}. Applies {d.applies}."
    if d.kind is bool:
        st.toggle(name, key=key, help=help_text, disabled=bool(variable))
    elif d.spec.choices:
        st.selectbox(name, d.spec.choices, key=key, help=help_text, disabled=bool(variable))
    else:
        st.text_input(name, key=key, help=help_text, disabled=bool(variable))
    note = f"Set by {variable}, which wins over the file." if variable else f"Valid: {d.valid_values()}."
    st.caption(escape_markdown(note + (" Needs a restart." if d.needs_restart else "")))
    _error(name)


def _form(form_key: str, names: tuple[str, ...], shown: Settings, label: str) -> None:
    with st.form(form_key, border=False):
        for name in names:
            _field(name, shown)
        st.form_submit_button(label, on_click=_save, args=(names,), icon=":material/save:")


def show_editor(running: Settings) -> None:
    """Floors and prices, then a chosen setting: each a field that writes the settings file."""
    try:
        path = settings_file()
    except WorkbenchError as exc:
        st.error(escape_markdown(exc.message), icon=":material/error:")
        return
    if path is None:
        st.info(
            "No settings file is read (WORKBENCH_CONFIG is set empty), so nothing can be changed here: point "
            "WORKBENCH_CONFIG at a TOML file, or unset it to use workbench.toml, and restart the app."
        )
        return
    shown = current_settings() or running  # the file's values, a restart's included
    _error("")
    left, right = st.columns(2, gap="large")
    with left:
        st.markdown("**Floors and prices**")
        st.caption("Floors: the lowest mean each metric may have. Prices: per 1,000 tokens, for the cost estimate.")
        _form("floors_and_prices", FLOORS_AND_PRICES, shown, "Save floors and prices")
    with right:
        st.markdown("**Any other setting**")
        names = [d.name for d in declarations() if editable(d.name) and d.name not in FLOORS_AND_PRICES]
        name = st.selectbox(
            "Setting",
            names,
            format_func=lambda n: f"{n} ({GROUPS[DECLARATIONS[n].group]})",
            key="setting_chosen",
        )
        _form("one_setting", (name,), shown, "Save")
    written = st.session_state.get(WRITTEN)
    if written:
        st.success(escape_keeping_code(written), icon=":material/check_circle:")
    st.caption(escape_markdown(f"Changes are written to {path}, keeping its comments and other settings."))
