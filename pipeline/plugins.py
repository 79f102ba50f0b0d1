"""Registries fill themselves: importing every module of a package runs each module's registration."""

from __future__ import annotations

import importlib
import pkgutil
import threading

_imported: set[str] = set()
_importing = threading.RLock()  # evaluation workers may ask first at the same time


def import_package_modules(package_name: str) -> None:
    """Import each module of the package once per process."""
    with _importing:
        if package_name in _imported:
            return
        package = importlib.import_module(package_name)
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package_name}.{module.name}")
        _imported.add(package_name)
