"""`--help` (issue 51): it loads nothing of the workbench (no LlamaIndex, no store, no Streamlit), so it answers at
the speed of Python and argparse (bench/cli_help.py measures it); `gate --help` lists the gate's exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import ROOT

from pipeline.cli import gate
from pipeline.cli.main import COMMAND_MODULES

HEAVY = ("llama_index", "duckdb", "streamlit", "sklearn", "scipy", "pandas", "pipeline.session", "store.db")


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def imported_after_help(*argv: str) -> set[str]:
    """The modules a fresh process has imported once the CLI printed `argv`'s help."""
    code = (
        "import contextlib, io, json, sys\n"
        "from pipeline.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({list(argv)!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    return set(json.loads(run_python(code)))


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith(HEAVY)}


def test_help_and_gate_help_import_no_model_store_or_app_module():
    assert heavy(imported_after_help("--help")) == set()
    assert heavy(imported_after_help("gate", "--help")) == set()


def test_python_dash_m_pipeline_gate_help_imports_no_heavy_module():
    """The command as a user types it, its imports as Python itself reports them (-X importtime)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pipeline", "gate", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "exit codes:" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")}
    assert "pipeline.cli.main" in imported  # (modules loaded by importlib.import_module are not timed)
    assert heavy(imported) == set()


def test_no_commands_help_loads_llama_index_or_streamlit():
    names = [module.replace("_", "-").replace("evaluate", "eval") for module in COMMAND_MODULES]
    code = (
        "import contextlib, io, json, sys\n"
        "from pipeline.cli.main import build_parser\n"
        "parser = build_parser()\n"
        "loaded = {}\n"
        f"for name in {names!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            parser.parse_args([name, '--help'])\n"
        "        except SystemExit:\n"
        "            pass\n"
        "    loaded[name] = sorted(m for m in sys.modules if m.startswith(('llama_index', 'streamlit')))\n"
        "print(json.dumps(loaded))\n"
    )
    loaded = json.loads(run_python(code))
    assert set(loaded) == set(names) and all(not modules for modules in loaded.values()), loaded


def test_gate_help_lists_each_exit_code_the_gate_returns(capsys):
    from pipeline.cli.main import build_parser

    try:
        build_parser().parse_args(["gate", "--help"])
    except SystemExit:
        pass
    text = capsys.readouterr().out
    listed = text.split("exit codes:\n", 1)[1]
    codes = [int(code) for code in re.findall(r"(?m)^  (\d+)  ", listed)]
    # the gate's own codes, and the two every command shares (2 bad input, 1 the work failed)
    assert codes == [0, gate.GATE_REGRESSION, 2, gate.GATE_BELOW_FLOOR] == [0, 1, 2, 3]
    assert "regression" in listed.split("\n  2  ")[0] and "below a floor" in listed.split("\n  3  ")[1]
    assert "GITHUB_STEP_SUMMARY" in text


def test_help_names_written_in_the_cli_match_the_modules_they_stand_for(capsys):
    """Names the parser writes itself, so that `--help` needs no heavy import, agree with their sources."""
    from pipeline.cli import align, evaluate, sweep, synth
    from pipeline.evaluation.judge import CRITERIA
    from pipeline.evaluation.runner import EXECUTORS
    from pipeline.evaluation.synth.kinds import default_shares_text
    from pipeline.experiments.grid import ALTERNATIVE_SEPARATOR

    assert evaluate.EXECUTORS == EXECUTORS
    assert align.CRITERIA == CRITERIA
    assert sweep.ALTERNATIVE_SEPARATOR == ALTERNATIVE_SEPARATOR
    assert synth.DEFAULT_SHARES_TEXT == default_shares_text()
