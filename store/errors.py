"""The store's errors, and the root of the workbench's one error family.

The root lives here, in the bottom layer, so that the store can raise into the same family as the
pipeline without importing upward: pipeline.errors re-exports it and adds its own kinds, and the pages
and the CLI catch `WorkbenchError` alone. Every message says what went wrong; `fix` says what to do.
"""

from __future__ import annotations


class WorkbenchError(Exception):
    """An expected failure the user can fix; pages show it with st.error, the CLI exits non-zero."""

    def __init__(self, message: str, fix: str = ""):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message}: {self.fix}" if self.fix else self.message


class StoreError(WorkbenchError):
    """The store could not do what was asked."""


class StoreUnavailable(StoreError):
    def __init__(self, path: str, detail: str):
        super().__init__(
            f"cannot open the store {path}: {detail}", fix="check the path in WORKBENCH_DB and its permissions"
        )
        self.path = path


class StoreLocked(StoreError):
    def __init__(self, path: str, seconds: float):
        super().__init__(
            f"the store {path} stayed locked by another process for {seconds:g} s",
            fix="wait for the other workbench process (a CLI batch or the app) to finish, "
            "or point WORKBENCH_DB at another file",
        )
        self.path = path


class StoreReadOnly(StoreError):
    def __init__(self, path: str, why: str):
        super().__init__(
            f"the store {path} is read-only ({why}): it can be browsed, but nothing can be written to it",
            fix="make the file and its folder writable, or point WORKBENCH_DB at a writable file; "
            "results computed meanwhile are kept in the journal and saved on the next writable open",
        )
        self.path = path


class StoreFull(StoreError):
    """The disk that holds the store has no room left for a write (ENOSPC): what was stored before is intact."""

    def __init__(self, path: str, detail: str):
        super().__init__(
            f"the disk holding the store {path} is full ({detail})",
            fix="free space on that disk, or point WORKBENCH_DB at a file on another disk; what was stored before "
            "is intact, and results computed meanwhile are kept in the journal and saved on the next open with room",
        )
        self.path = path


class RecordRefused(StoreError):
    """A value the store will not take (out of its range or of its kind): nothing was written."""

    def __init__(self, what: str, fix: str):
        super().__init__(f"{what}; nothing was saved", fix=fix)


class StoreTooNew(StoreError):
    def __init__(self, path: str, unknown: list[str]):
        super().__init__(
            f"the store {path} was written by a newer version of the workbench "
            f"(unknown migrations: {', '.join(unknown)})",
            fix="update the workbench (`git pull`, then `make run`), or point WORKBENCH_DB at another file",
        )
        self.path = path
        self.unknown = unknown


class StoreCorrupt(StoreError):
    def __init__(self, path: str, detail: str):
        super().__init__(
            f"the store {path} is damaged: {detail}",
            fix=f"move it aside (`mv {path} {path}.damaged`) and start a fresh store "
            "(`python -m pipeline ingest data/kb`); results that could not be saved are kept in the journal",
        )
        self.path = path


class StoreForeign(StoreError):
    """A DuckDB file that holds tables of something else: refused, and nothing in it is changed."""

    def __init__(self, path: str, tables: list[str]):
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        super().__init__(
            f"the file {path} is not a workbench store: it holds other tables ({shown}); it was left untouched",
            fix="point WORKBENCH_DB at a workbench store, or at a new file to start one",
        )
        self.path = path
        self.tables = tables


class ResultNotKept(StoreError):
    """Neither the store nor any journal folder could take a computed result: it exists only in this process."""

    def __init__(self, store_error: StoreError, journal_error: OSError | None, folders: list):
        why = f"{journal_error.strerror or journal_error}" if journal_error else "not writable"
        super().__init__(
            f"it could not be kept anywhere: the store could not take it ({store_error.message}), and no journal "
            f"folder is writable ({', '.join(str(f) for f in folders)}: {why})",
            fix="make the store or one of those folders writable (WORKBENCH_STATE_DIR names another state "
            "directory); nothing of this result was saved",
        )
        self.store_error = store_error
