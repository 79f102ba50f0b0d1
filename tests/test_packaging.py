"""The workbench installs as a package with a `workbench` console command; requirements.txt stays the one list of
direct dependencies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from pipeline.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_console_command_points_at_the_cli_entry():
    target = _pyproject()["project"]["scripts"]["workbench"]
    module, _, function = target.partition(":")
    assert module == "pipeline.cli.main"
    assert getattr(cli, function) is cli.main


def test_dependencies_come_from_requirements_txt():
    document = _pyproject()
    project = document["project"]
    assert "dependencies" in project["dynamic"] and "dependencies" not in project
    assert document["tool"]["setuptools"]["dynamic"]["dependencies"]["file"] == ["requirements.txt"]


@pytest.mark.slow
def test_installed_workbench_command_runs_the_cli():
    """make test installs the checkout (pip install -e .), so the command sits beside this Python."""
    command = Path(sys.executable).parent / "workbench"
    assert command.exists(), "the workbench command is not installed: run `pip install -e .` (make test does)"
    result = subprocess.run([str(command), "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: workbench")
    for name in ("ask", "eval", "runs", "gate"):
        assert name in result.stdout


def test_module_entry_keeps_its_name(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/somewhere/pipeline/__main__.py"])
    assert cli.build_parser().prog == "python -m pipeline"
    monkeypatch.setattr(sys, "argv", ["/venv/bin/workbench"])
    assert cli.build_parser().prog == "workbench"
