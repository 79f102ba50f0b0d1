"""A file replaced whole (store/atomic.py): the settings file, an upload and a journal entry are written by it."""

from __future__ import annotations

import os
import stat

import pytest

from store import atomic
from store.atomic import write_atomically


def test_a_file_is_replaced_whole_keeping_its_permissions_and_no_temporary_file_stays(tmp_path):
    tmp_path = tmp_path / "folder"
    tmp_path.mkdir()
    path = tmp_path / "workbench.toml"
    path.write_text("old = 1\n")
    path.chmod(0o644)
    assert write_atomically(path, "new = 2\n") == path
    assert path.read_text() == "new = 2\n" and stat.S_IMODE(path.stat().st_mode) == 0o644
    write_atomically(tmp_path / "upload.pdf", b"%PDF-1.7", durable=True, prefix=".upload-")
    assert (tmp_path / "upload.pdf").read_bytes() == b"%PDF-1.7"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["upload.pdf", "workbench.toml"]


def test_a_failed_write_leaves_the_old_file_and_no_part_of_the_new(tmp_path, monkeypatch):
    tmp_path = tmp_path / "folder"
    tmp_path.mkdir()
    path = tmp_path / "entry.json"
    path.write_text("{}")

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(path, '{"id": 1}', durable=True, prefix=".entry-")
    assert path.read_text() == "{}" and os.listdir(tmp_path) == ["entry.json"]
