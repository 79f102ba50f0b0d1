"""Widgets of the Datasets page (the datasets kept in the store, by name and version) and the "add to dataset" form
that the Runs page and the run drilldown share.

Every question, reference and answer is untrusted text: it is shown with st.text or in a table cell (both literal),
and a dataset's name in Markdown only escaped. Each review (accept, edit, reject) saves a new version of the dataset
and says which; the versions before it keep what they held.
Keys of the review: A accepts, E edits, X rejects (Streamlit keeps R for itself), J and K move to the next and the
previous item pending review (Streamlit's own button shortcuts, which ignore keys typed into a text box).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.views.common import show_error
from pages.views.markup import escape_markdown, plural
from pages.views.tables import count_column, table
from pipeline.errors import WorkbenchError
from pipeline.evaluation.dataset import Dataset
from pipeline.evaluation.datasets import (
    Diff,
    accept_item,
    add_run,
    check_name,
    diff,
    edit_item,
    export_text,
    listing,
    load,
    pending_review,
    reject_item,
)

ACCEPT_KEY, EDIT_KEY, REJECT_KEY, NEXT_KEY, PREVIOUS_KEY = "a", "e", "x", "j", "k"
EXPORT_FORMATS = {"jsonl": "application/jsonl", "csv": "text/csv"}
SAVED = "datasets_saved"  # session state: what the last review saved, said once after the page reruns
BOX_HEIGHT = 200  # px: the question's and the reference's boxes under review, each scrolling on its own


def cell(value) -> str | None:
    """A field's value as one table cell of readable text: a list comma-separated, an object (an item's provenance)
    as "key: value" pairs in words (kind: single-hop · chunk ids: c1, c2 · review: accepted), nothing as a missing
    cell."""
    if value is None:
        return None
    if isinstance(value, dict):
        return " · ".join(f"{str(k).replace('_', ' ')}: {readable(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(readable(v) for v in value)
    return str(value)


def readable(value) -> str:
    """A provenance value: yes or no for a flag, a stored word with its underscores as hyphens."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | dict):
        return cell(value) or ""
    return str(value).replace("_", "-") if isinstance(value, str) and " " not in value else str(value)


def review_state(item) -> str | None:
    return item.provenance.get("review")


# -- the list of datasets, a dataset's versions and items --------------------------------------------------------


def datasets_table(rows) -> None:
    """Every dataset: its latest version, how many versions, its items, where the latest came from, when."""
    frame = pd.DataFrame(
        [
            {
                "name": info.name,
                "latest version": info.version,
                "versions": count,
                "items": info.n_items,
                "origin": info.origin,
                "created": info.created_at,
            }
            for info, count in rows
        ]
    )
    table(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "name": st.column_config.TextColumn("name"),
            "latest version": count_column("latest version"),
            "versions": count_column("versions"),
            "items": count_column("items"),
            "created": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD HH:mm"),
        },
        key="datasets_list",
    )


def pick_dataset(names: list[str]) -> str:
    """The dataset to open: the one the link names (?dataset=NAME), else the first."""
    asked = st.query_params.get("dataset", "")
    return st.selectbox(
        "Dataset",
        names,
        index=names.index(asked) if asked in names else 0,
        key=f"datasets_pick-{asked}",  # a new link picks again
    )


def versions_table(versions) -> None:
    frame = pd.DataFrame(
        [
            {"version": v.version, "items": v.n_items, "origin": v.origin, "note": v.note, "created": v.created_at}
            for v in versions
        ]
    )
    table(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "version": count_column("version"),
            "items": count_column("items"),
            "note": st.column_config.TextColumn("note"),
            "created": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD HH:mm"),
        },
        key="datasets_versions",
    )


def items_table(dataset: Dataset) -> None:
    frame = pd.DataFrame(
        [
            {
                "id": i.id,
                "tags": ", ".join(i.tags) or None,
                "origin": i.origin,
                "review": review_state(i),
                "question": i.question,
                "reference": i.reference,
            }
            for i in dataset.items
        ]
    )
    table(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "question": st.column_config.TextColumn("question", width="large"),
            "reference": st.column_config.TextColumn("reference", width="large"),
        },
        key="datasets_items",
    )


def export_button(dataset: Dataset) -> None:
    """The version as JSONL or CSV text, the file named NAME-vVERSION.EXT."""
    left, right = st.columns([1, 3], vertical_alignment="bottom")
    fmt = left.radio("Export as", list(EXPORT_FORMATS), horizontal=True, key="datasets_export_format")
    right.download_button(
        f"Download {dataset.name}-v{dataset.version}.{fmt}",
        export_text(dataset, fmt),
        file_name=f"{dataset.name}-v{dataset.version}.{fmt}",
        mime=EXPORT_FORMATS[fmt],
        icon=":material/download:",
        key="datasets_export",
    )


# -- the diff of two versions --------------------------------------------------------------------------------------


def diff_section(db, name: str, numbers: list[int]) -> None:
    """Two versions (by default the one before the latest, and the latest): the items added, removed and changed."""
    if len(numbers) < 2:
        st.caption("This dataset has one version: nothing to compare yet.")
        return
    left, right = st.columns(2)
    key = f"{name}-{numbers[0]}"  # a new version starts from the latest two again
    before = left.selectbox("From version", numbers, index=1, key=f"datasets_diff_from-{key}")
    after = right.selectbox("To version", numbers, index=0, key=f"datasets_diff_to-{key}")
    show_diff(diff(load(db, name, before), load(db, name, after)), before, after)


def show_diff(changes: Diff, before: int, after: int) -> None:
    if changes.empty:
        st.info(f"Versions {before} and {after} hold the same items.", icon=":material/info:")
        return
    st.markdown(
        f"From version {before} to {after}: {plural(len(changes.added), 'item')} added, "
        f"{len(changes.removed)} removed, {plural(len(changes.changed), 'field')} changed."
    )
    for heading, items, key in (("Added", changes.added, "added"), ("Removed", changes.removed, "removed")):
        if items:
            st.markdown(f"**{heading}**")
            table(
                pd.DataFrame([{"id": i.id, "question": i.question, "reference": i.reference} for i in items]),
                hide_index=True,
                width="stretch",
                key=f"datasets_diff_{key}",
            )
    if changes.changed:
        st.markdown("**Changed**")
        table(
            pd.DataFrame(
                [
                    {"item": c.item_id, "field": c.field, "before": cell(c.before), "after": cell(c.after)}
                    for c in changes.changed
                ]
            ),
            hide_index=True,
            width="stretch",
            column_config={
                "before": st.column_config.TextColumn("before", width="large"),
                "after": st.column_config.TextColumn("after", width="large"),
            },
            key="datasets_diff_changed",
        )


# -- the review of pending items, one at a time ------------------------------------------------------------------


def position_key(name: str) -> str:
    return f"datasets_review_pos-{name}"


def editing_key(name: str) -> str:
    return f"datasets_review_editing-{name}"


def move(name: str, step: int, n: int) -> None:
    """J or K (a callback: it runs before the review is drawn): the next or the previous pending item."""
    key = position_key(name)
    st.session_state[key] = min(max(st.session_state.get(key, 0) + step, 0), max(n - 1, 0))
    st.session_state.pop(editing_key(name), None)


def start_editing(name: str, item_id: str) -> None:
    st.session_state[editing_key(name)] = item_id


def said_saved() -> None:
    """What the last review saved, once (it reran the page)."""
    message = st.session_state.pop(SAVED, None)
    if message:
        st.success(escape_markdown(message), icon=":material/check_circle:")


def source_line(item) -> str:
    """Where a pending item came from, from its provenance: the synthesis's kind and chunks, or the run."""
    p = item.provenance
    if "run_id" in p:
        draft = "; its answer is the draft reference" if p.get("draft_reference") else ""
        return f"From run {p['run_id']}{draft}."
    parts = [f"{item.origin}"]
    if p.get("kind"):
        parts.append(f"a {str(p['kind']).replace('_', '-')} question")  # single_hop: a single-hop question
    chunks = p.get("chunk_ids") or []
    if chunks:
        parts.append(f"from {plural(len(chunks), 'chunk')}: {', '.join(str(c) for c in chunks)}")
    if p.get("model"):
        parts.append(f"by {p['model']}")
    return " · ".join(parts)


def keys_caption() -> None:
    st.caption(
        f"Keys: {ACCEPT_KEY.upper()} accepts, {EDIT_KEY.upper()} edits, {REJECT_KEY.upper()} rejects, "
        f"{NEXT_KEY.upper()} and {PREVIOUS_KEY.upper()} move to the next and the previous item "
        "(when the focus is not in a text box)."
    )


def saved_line(action: str, item_id: str, name: str, version: int) -> str:
    return f"{action} item {item_id}: saved dataset {name} as version {version}."


def review_section(db, name: str, dataset: Dataset) -> None:
    """The items of the latest version that no person has reviewed yet, one at a time."""
    said_saved()
    pending = pending_review(dataset)
    if not pending:
        st.caption(f"Nothing to review: no item of version {dataset.version} is pending review.")
        return
    review_form(db, name, dataset.version, pending)


@st.fragment
def review_form(db, name: str, version: int, pending: list) -> None:
    """One pending item with Accept, Edit and Reject, a fragment: J and K rerun only this; a save reruns the page
    (its tables and the next item follow)."""
    n = len(pending)
    pos = min(st.session_state.get(position_key(name), 0), n - 1)
    st.session_state[position_key(name)] = pos
    item = pending[pos]
    editing = st.session_state.get(editing_key(name)) == item.id
    st.markdown(
        f"Item {pos + 1} of {n} pending review in version {version}: **{escape_markdown(item.id)}**"
        + (f" · tags {escape_markdown(', '.join(item.tags))}" if item.tags else "")
    )
    keys_caption()
    st.caption(escape_markdown(source_line(item)))
    if "run_id" in item.provenance:
        st.page_link(
            "pages/runs.py",
            label=f"Open run {item.provenance['run_id']}",
            icon=":material/table_rows:",
            query_params={"run_id": str(item.provenance["run_id"])},
        )
    if editing:
        edit_form(db, name, item)
        return
    question, reference = st.columns(2)
    with question:
        st.markdown("**Question**")
        with st.container(height=BOX_HEIGHT, key="datasets-review-question"):
            st.text(item.question)
    with reference:
        st.markdown("**Reference**" + (" (draft)" if item.provenance.get("draft_reference") else ""))
        with st.container(height=BOX_HEIGHT, key="datasets-review-reference"):
            st.text(item.reference or "(no reference)")
    read_only = db.read_only
    with st.container(horizontal=True, vertical_alignment="center"):
        accept = st.button("Accept", type="primary", shortcut=ACCEPT_KEY, disabled=read_only, key="datasets_accept")
        st.button(
            "Edit",
            shortcut=EDIT_KEY,
            disabled=read_only,
            on_click=start_editing,
            args=(name, item.id),
            key="datasets_edit",
        )
        reject = st.button("Reject", shortcut=REJECT_KEY, disabled=read_only, key="datasets_reject")
        st.button("Previous", shortcut=PREVIOUS_KEY, on_click=move, args=(name, -1, n), key="datasets_previous")
        st.button("Next", shortcut=NEXT_KEY, on_click=move, args=(name, 1, n), key="datasets_next")
    if accept:
        save_review(lambda: accept_item(db, name, item.id), "Accepted", item.id)
    if reject:
        save_review(lambda: reject_item(db, name, item.id), "Rejected", item.id)


def edit_form(db, name: str, item) -> None:
    """The item's question, reference and tags, editable; Save keeps them as a new version. An edit that empties
    the question is refused with why, and nothing is saved."""
    key = f"datasets_edit-{name}-{item.id}"
    question = st.text_area("Question", item.question, key=f"{key}-question")
    reference = st.text_area("Reference", item.reference or "", key=f"{key}-reference")
    tags = st.text_input("Tags (comma-separated)", ", ".join(item.tags), key=f"{key}-tags")
    with st.container(horizontal=True):
        save = st.button("Save", type="primary", disabled=db.read_only, key="datasets_edit_save")
        cancel = st.button("Cancel", key="datasets_edit_cancel")
    if cancel:
        st.session_state.pop(editing_key(name), None)
        st.rerun(scope="fragment")
    if save:
        changes = {
            "question": question,
            "reference": reference,
            "tags": [t.strip() for t in tags.split(",") if t.strip()],
        }
        save_review(lambda: edit_item(db, name, item.id, changes), "Edited", item.id, name)


def save_review(action, verb: str, item_id: str, editing: str | None = None) -> None:
    """Run one review's save; on success say which version it saved (after the page reruns), else the error and
    its fix (nothing was saved)."""
    try:
        saved = action()
    except WorkbenchError as exc:
        show_error(exc)
        return
    if editing:
        st.session_state.pop(editing_key(editing), None)
    st.session_state[SAVED] = saved_line(verb, item_id, saved.name, saved.version)
    st.rerun(scope="app")  # the page, not only the review: its tables and the next item


# -- "add to dataset", from the Runs page and the drilldown --------------------------------------------------------


def dataset_names(db) -> list[str]:
    return [info.name for info, _ in listing(db)]


def add_run_form(db, run_id: int, key: str) -> None:
    """A run's question into a chosen dataset's next version, its answer as a draft reference to confirm."""
    names = dataset_names(db)
    left, middle, right = st.columns([2, 2, 1], vertical_alignment="bottom")
    chosen = left.selectbox(
        "Add to dataset", names, index=None, placeholder="choose a dataset" if names else "none yet", key=f"{key}-pick"
    )
    typed = middle.text_input("or a new dataset", key=f"{key}-new", placeholder="a new name")
    pressed = right.button(
        f"Add run {run_id}",
        key=f"{key}-add",
        disabled=db.read_only,
        width="stretch",
        help="The store is read-only: nothing can be added here." if db.read_only else None,
    )
    st.caption(
        "The run's question joins the dataset's next version, its answer as a draft reference that a person "
        "confirms on the Datasets page."
    )
    if not pressed:
        return
    name = typed if typed.strip() else chosen
    if not name:
        st.error("Choose a dataset or type a new name, then add the run.", icon=":material/error:")
        return
    try:
        existed = check_name(name) in names
        saved = add_run(db, run_id, name)
    except WorkbenchError as exc:
        show_error(exc)
        return
    if existed and typed.strip():
        said = f"dataset {saved.name} exists: saved as version {saved.version}"
    else:
        said = f"added run {run_id} to {saved.name} as version {saved.version}"
    st.success(escape_markdown(said), icon=":material/check_circle:")
    st.page_link(
        "pages/datasets.py",
        label="Review it on the Datasets page",
        icon=":material/dataset:",
        query_params={"dataset": saved.name},
    )


# -- writing a golden set from the knowledge base (synth) ---------------------------------------------------------


def synth_form(settings, db, expanded: bool) -> bool:
    """Write questions from the knowledge base (`python -m pipeline synth`): a name, how many candidates, each kind's
    share; the job runs here with a progress bar (a job cut short resumes under the same name) and its report is
    shown below the form. Whether it saved a version."""
    from pipeline.evaluation.synth import DEFAULT_SHARES, KINDS, parse_shares, run_synth
    from pipeline.evaluation.synth.kinds import KIND_TEXT

    with st.expander("Write questions from the knowledge base", expanded=expanded):
        st.caption(
            "The generator model writes candidate questions of each kind with a reference answer from chunks of "
            "every document; a candidate is kept only if its reference is supported by its chunks, it does not copy "
            "them or name its source, it is not a near-duplicate, and a negative finds no answer in the knowledge "
            "base. Kept questions are saved as the dataset's next version, pending review."
        )
        with st.form("synth_form"):
            name = st.text_input("Dataset name", key="synth_name")
            n = st.number_input("Candidates to write", min_value=1, max_value=2000, value=50, step=10, key="synth_n")
            columns = st.columns(3)
            shares = {
                kind: columns[i % 3].number_input(
                    KIND_TEXT.get(kind, kind),
                    min_value=0.0,
                    value=DEFAULT_SHARES.get(kind, 0.0),
                    step=0.05,
                    key=f"synth_share_{kind}",
                )
                for i, kind in enumerate(KINDS)
            }
            seed = st.number_input("Seed (which chunks are sampled)", min_value=0, value=0, step=1, key="synth_seed")
            start = st.form_submit_button("Write questions")
    if not start:
        return False
    bar, status = st.progress(0.0, text="starting…"), st.empty()

    def on_progress(state) -> None:
        bar.progress(state.written / max(state.total, 1), text=f"{state.written} of {state.total} candidates written")
        status.caption(
            f"{state.kept} kept, {state.dropped} dropped; {state.calls:,} model calls, "
            f"{state.prompt_tokens:,} prompt tokens, {state.cache_hits:,} cache hits"
        )

    try:
        text = ",".join(f"{kind}={share}" for kind, share in shares.items())
        report = run_synth(settings, db, name, int(n), parse_shares(text), int(seed), progress=on_progress)
    except WorkbenchError as exc:
        show_error(exc)
        return False
    synth_report(report)
    return report.version is not None


def synth_report(report) -> None:
    """What a synth job did: the version saved, written/kept/dropped, kept per kind, dropped per gate with each
    candidate's reason, and its cost."""
    from pipeline.evaluation.synth.gates import GATES
    from pipeline.evaluation.synth.kinds import KIND_TEXT

    for note in report.notes:
        st.caption(escape_markdown(note))
    if report.version is not None:
        existed = f" (the dataset existed: version {report.previous_version} before)" if report.previous_version else ""
        st.success(escape_markdown(f"Saved dataset {report.name} as version {report.version}{existed}."))
    else:
        st.warning("No candidate passed the gates: nothing was saved. The reasons are below.")
    st.markdown(
        f"{plural(report.written, 'candidate')} written: {report.kept} kept, {report.dropped} dropped. "
        f"Cost: {plural(report.calls, 'model call')}, {report.prompt_tokens:,} prompt tokens, "
        f"{report.cache_hits:,} answered from the response cache."
    )
    kinds = pd.DataFrame(
        [
            {"kind": KIND_TEXT.get(kind, kind), "asked": asked, "kept": report.kept_per_kind.get(kind, 0)}
            for kind, asked in report.requested.items()
        ]
    )
    table(kinds, hide_index=True, key="synth_kinds")
    if report.drops:
        gates = pd.DataFrame(
            [
                {"gate": gate, "dropped": count, "what it drops": GATES.get(gate, "")}
                for gate, count in report.dropped_per_gate.items()
            ]
        )
        table(gates, hide_index=True, key="synth_gates")
        drops = pd.DataFrame(
            [
                {"#": d.position + 1, "kind": d.kind, "gate": d.gate, "question": d.question, "reason": d.reason}
                for d in report.drops
            ]
        )
        table(drops, hide_index=True, width="stretch", key="synth_drops")
