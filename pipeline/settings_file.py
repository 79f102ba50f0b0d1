"""The settings file, changed from the Settings & health page.

A change is checked by the loader itself (pipeline/config.py: load_settings on the file as it would be, so the very
checks and messages of a start), then written keeping the file's comments, layout and other keys (tomlkit). A
setting read for each run and page applies at once (live_settings); one declared `restart` in config.py waits for
the app, or `collect`, to start again (waiting_for_restart says which)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from pipeline.config import (
    DECLARATIONS,
    Settings,
    SettingValueError,
    config_path,
    declarations,
    env_name,
    is_secret,
    load_settings,
    parse_value,
)
from pipeline.errors import ConfigError, InputError
from store.atomic import write_atomically

NEW_FILE_HEADER = (
    "# Settings of the RAG quality workbench. Every setting, its valid values and its meaning:\n"
    "# docs/reference/settings.md\n"
)


@dataclass(frozen=True)
class Written:
    path: Path
    changed: list[str]  # the settings whose value in the file changed
    restart: list[str]  # of those, the ones read once at start: they wait for a restart

    @property
    def applied(self) -> list[str]:
        return [name for name in self.changed if name not in self.restart]


def settings_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """The settings file the app reads and a change is written to; None when WORKBENCH_CONFIG is set empty."""
    return config_path(os.environ if environ is None else environ)


def editable(name: str) -> bool:
    """A setting the page can change: any but a key, which is never shown."""
    return name in DECLARATIONS and not is_secret(name)


def overriding_variable(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The environment variable that sets the setting now, winning over the file; None when none does."""
    env = os.environ if environ is None else environ
    value = env.get(env_name(name))
    settable_empty = DECLARATIONS[name].spec.empty is not None
    return env_name(name) if value is not None and (value != "" or settable_empty) else None


def _refuse_unwritable(name: str, path: Path, env: Mapping[str, str]) -> None:
    if name not in DECLARATIONS:
        raise InputError(f"there is no setting {name!r}", fix="docs/reference/settings.md lists every setting")
    if is_secret(name):
        raise SettingValueError(
            name, f"{name} is a key and is not changed here", fix=f"set {env_name(name)} or {name} in {path}"
        )
    variable = overriding_variable(name, env)
    if variable:
        raise SettingValueError(
            name,
            f"{variable} sets {name} and wins over {path}",
            fix=f"unset {variable} to set {name} here",
        )


def _changed_text(text: str, changes: Mapping[str, str]) -> str:
    """The file's text with each change made: a value as its environment variable would be read; empty text puts
    the setting back to its default (removed from the file), except for a setting that can be set empty."""
    doc = tomlkit.parse(text)
    for name, raw in changes.items():
        raw = raw.strip()
        if raw == "" and DECLARATIONS[name].spec.empty is None:
            doc.pop(name, None)
        else:
            doc[name] = parse_value(name, raw)
    return tomlkit.dumps(doc)


def write_settings(changes: Mapping[str, str], environ: Mapping[str, str] | None = None) -> Written:
    """Write the changes ({setting: value as text}) to the settings file, all or none: every change is checked
    with the file as it would be, by the loader, and a refused one raises its error (a SettingValueError naming
    the setting, with the message a start would give) and writes nothing."""
    env = os.environ if environ is None else environ
    path = settings_file(env)
    if path is None:
        raise ConfigError(
            "no settings file is read: WORKBENCH_CONFIG is set empty",
            fix="point WORKBENCH_CONFIG at a TOML file, or unset it to use workbench.toml, then restart the app",
        )
    for name in changes:
        _refuse_unwritable(name, path, env)
    text = path.read_text(encoding="utf-8") if path.exists() else NEW_FILE_HEADER
    before = load_settings(env, path, text)  # a file that fails its checks now is named before anything is changed
    after = load_settings(env, path, new_text := _changed_text(text, changes))
    changed = [name for name in changes if getattr(before, name) != getattr(after, name)]
    if new_text != text:
        write_atomically(path, new_text)
    return Written(path, changed, [name for name in changed if DECLARATIONS[name].needs_restart])


# (settings file, its modification time and size, the settings' environment variables) -> the settings it gives
_fresh: dict[tuple, Settings | None] = {}


def _environment(env: Mapping[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith("WORKBENCH_") or k == "OLLAMA_HOST"))


def _current(env: Mapping[str, str]) -> Settings | None:
    """The settings as the file and the environment hold them now, read again only when the file changed; None
    when they fail the checks now (the settings running stay as they are)."""
    try:
        path = config_path(env)
        stat = path.stat() if path is not None and path.exists() else None
    except (ConfigError, OSError):
        return None
    key = (path, stat and (stat.st_ino, stat.st_mtime_ns, stat.st_size), _environment(env))
    if key not in _fresh:
        try:
            settings = load_settings(env, path)
        except ConfigError:
            settings = None
        _fresh.clear()
        _fresh[key] = settings
    return _fresh[key]


def current_settings(environ: Mapping[str, str] | None = None) -> Settings | None:
    """The settings as the file and the environment hold them now, a restart's included; None when they fail the
    checks now."""
    return _current(os.environ if environ is None else environ)


def live_settings(started: Settings, environ: Mapping[str, str] | None = None) -> Settings:
    """The settings a page, and the runs it starts, use: those the app started with, and every setting that
    applies at once as the file holds it now (a file that fails the checks now changes nothing)."""
    current = _current(os.environ if environ is None else environ)
    if current is None:
        return started
    live = {d.name: getattr(current, d.name) for d in declarations() if not d.needs_restart}
    if all(getattr(started, name) == value for name, value in live.items()):
        return started
    return dataclasses.replace(started, **live)


def waiting_for_restart(running: Settings, environ: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(setting, value running, value in the file) of each setting read at start whose file value differs."""
    current = _current(os.environ if environ is None else environ)
    if current is None:
        return []
    return [
        (d.name, str(getattr(running, d.name)), str(getattr(current, d.name)))
        for d in declarations()
        if d.needs_restart and getattr(running, d.name) != getattr(current, d.name)
    ]
