"""A file replaced whole: a reader (another process, the app's next page) sees the old file or the new one, never
half of either, and a failed write leaves no part behind."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: str | bytes, durable: bool = False, prefix: str | None = None) -> Path:
    """Write data to a temporary file beside path, then rename it over path; path. A file replaced keeps its
    permissions (a new one is readable by its owner only). durable: on the disk (fsync) before the rename, for a
    file that must outlive a crash. prefix: the temporary file's name's start (default `.<name>.`)."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=prefix or f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        if path.exists():
            os.chmod(temporary, stat.S_IMODE(path.stat().st_mode))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
