"""Argument types the commands share; light to import, so that `--help` loads nothing of the workbench."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence


def positive_int(text: str) -> int:
    """An argparse type: a whole number of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number: give 1 or more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is out of range: give 1 or more")
    return value


class Later(Sequence):
    """Choices read when first needed (to check a value, or to print a command's own --help), not when the parser
    is built: the names come from modules that `--help` of another command should not import."""

    def __init__(self, read: Callable[[], Sequence[str]]):
        self._read = read
        self._names: Sequence[str] | None = None

    def _all(self) -> Sequence[str]:
        if self._names is None:
            self._names = list(self._read())
        return self._names

    def __getitem__(self, index):
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __contains__(self, name) -> bool:
        return name in self._all()
