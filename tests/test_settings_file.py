"""Changing a setting from the app: the settings file written after the loader's own checks (the CLI's rules and
messages), its comments and other keys kept, what applies at once applied, what waits for a restart said."""

import pytest
import tomllib

from pipeline.cli.main import main
from pipeline.config import DECLARATIONS, SettingValueError, load_settings
from pipeline.evaluation.runner import floor_breaches
from pipeline.settings_file import live_settings, waiting_for_restart, write_settings
from pipeline.settings_reference import render

COMMENTED = """\
# the team's settings: ask Ana before changing the judge
generator_model = "qwen2.5"  # the small one

# CI gates on these
floors = "faithfulness=0.70"  # raised in March
top_k = 7
"""


@pytest.fixture
def settings_file(tmp_path, monkeypatch):
    path = tmp_path / "team.toml"
    path.write_text(COMMENTED, encoding="utf-8")
    monkeypatch.setenv("WORKBENCH_CONFIG", str(path))
    return path


def test_a_valid_floor_and_price_are_written_and_apply_at_once(settings_file):
    started = load_settings()
    assert started.floors == "faithfulness=0.70" and started.price_per_1k_prompt_tokens == 0.0
    written = write_settings({"floors": "faithfulness=0.60,context_recall=0.5", "price_per_1k_prompt_tokens": "0.002"})
    assert written.changed == ["floors", "price_per_1k_prompt_tokens"] and written.restart == []
    assert tomllib.loads(settings_file.read_text()) == {
        "generator_model": "qwen2.5",
        "floors": "faithfulness=0.60,context_recall=0.5",
        "top_k": 7,
        "price_per_1k_prompt_tokens": 0.002,
    }
    live = live_settings(started)  # what the next page, and the runs it starts, read
    assert live.floors == "faithfulness=0.60,context_recall=0.5" and live.price_per_1k_prompt_tokens == 0.002
    assert live.top_k == 7 and live.store_path == started.store_path
    # the evaluation report's floor check reads the new floor: a mean of 0.65 is no longer below it
    assert [(c.metric, c.baseline_value) for c in floor_breaches(started, {"faithfulness": 0.65})] == [
        ("faithfulness", 0.70)
    ]
    assert floor_breaches(live, {"faithfulness": 0.65, "context_recall": 0.4})[0].baseline_value == 0.5
    assert [c.metric for c in floor_breaches(live, {"faithfulness": 0.65, "context_recall": 0.6})] == []


def test_the_files_comments_layout_and_other_keys_are_kept(settings_file):
    write_settings({"floors": "faithfulness=0.80"})
    assert settings_file.read_text() == COMMENTED.replace("faithfulness=0.70", "faithfulness=0.80")
    write_settings({"judge_repeats": "3"})  # a new key goes after the others
    assert settings_file.read_text() == COMMENTED.replace("faithfulness=0.70", "faithfulness=0.80") + (
        "judge_repeats = 3\n"
    )


def cli_error(capsys) -> str:
    """What the CLI says when it starts: its error line, unwrapped."""
    capsys.readouterr()
    assert main(["runs"]) == 1
    return " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(
    "name, typed, by_hand",
    [
        ("faithfulness_threshold", "1.5", "faithfulness_threshold = 1.5"),  # out of its range
        ("top_k", "seven", 'top_k = "seven"'),  # not an integer
        ("floors", "faithfulness", 'floors = "faithfulness"'),  # no metric=number pair
        ("chunk_overlap", "600", "chunk_overlap = 600"),  # the cross check: below chunk_size
        ("answer_schedule", "fastest", 'answer_schedule = "fastest"'),  # not one of the choices
    ],
)
def test_an_invalid_value_is_refused_with_the_clis_message_and_nothing_is_written(
    settings_file, name, typed, by_hand, capsys
):
    before = settings_file.read_bytes()
    with pytest.raises(SettingValueError) as refused:
        write_settings({"judge_repeats": "2", name: typed})  # all or nothing: the valid change is not written
    assert refused.value.setting == name
    assert settings_file.read_bytes() == before
    # the same value put in the file by hand: the CLI refuses to start with the very message the page showed
    kept = [line for line in COMMENTED.splitlines(keepends=True) if not line.startswith(f"{name} =")]
    settings_file.write_text("".join(kept) + by_hand + "\n")
    assert " ".join(str(refused.value).split()) in cli_error(capsys)


def test_a_setting_read_at_start_is_written_and_flagged_as_waiting_for_a_restart(settings_file):
    started = load_settings()
    assert DECLARATIONS["collect_port"].needs_restart and not DECLARATIONS["floors"].needs_restart
    written = write_settings({"collect_port": "4400", "top_k": "4"})
    assert written.changed == ["collect_port", "top_k"] and written.restart == ["collect_port"]
    assert written.applied == ["top_k"]
    live = live_settings(started)
    assert live.top_k == 4 and live.collect_port == 4318  # applied; running until a restart
    assert waiting_for_restart(live) == [("collect_port", "4318", "4400")]
    assert load_settings().collect_port == 4400  # what the next start reads
    rows = {line.split("|")[1].strip(): line for line in render().splitlines() if line.startswith("| `")}
    assert "| after a restart |" in rows["`collect_port`"] and "| at once |" in rows["`floors`"]


def test_a_setting_its_environment_variable_sets_is_not_written(settings_file, monkeypatch):
    monkeypatch.setenv("WORKBENCH_TOP_K", "3")
    before = settings_file.read_bytes()
    with pytest.raises(SettingValueError, match="WORKBENCH_TOP_K sets top_k and wins over") as refused:
        write_settings({"top_k": "5"})
    assert refused.value.fix == "unset WORKBENCH_TOP_K to set top_k here"
    assert settings_file.read_bytes() == before


def test_empty_text_puts_a_setting_back_to_its_default_but_empties_one_that_can_be_empty(settings_file):
    write_settings({"top_k": "", "floors": ""})
    assert tomllib.loads(settings_file.read_text()) == {"generator_model": "qwen2.5", "floors": ""}
    assert load_settings().top_k == 5 and load_settings().floors == ""


def test_a_file_that_does_not_exist_yet_is_created(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKBENCH_CONFIG")  # the default: workbench.toml in the working directory, made on a change
    monkeypatch.chdir(tmp_path)
    (tmp_path / "workbench.toml").unlink()
    write_settings({"floors": "faithfulness=0.9"})
    text = (tmp_path / "workbench.toml").read_text()
    assert text.startswith("# Settings of the RAG quality workbench") and 'floors = "faithfulness=0.9"' in text
    assert load_settings().floors == "faithfulness=0.9"


@pytest.mark.slow
def test_the_settings_page_writes_a_floor_and_shows_a_refused_value_under_its_field(fake, db, settings_file):
    from test_app import app

    at = app("pages/settings.py")
    at.text_input(key="setting_field_floors").set_value("faithfulness=0.55")
    next(b for b in at.button if b.label == "Save floors and prices").click().run()
    assert not at.exception, at.exception
    assert load_settings().floors == "faithfulness=0.55" and "# raised in March" in settings_file.read_text()
    assert any("floors: applied at once" in s.value.replace("\\", "") for s in at.success)
    tables = [d.value for d in at.dataframe if "setting" in d.value.columns]
    row = next(t for t in tables if "floors" in set(t["setting"])).set_index("setting").loc["floors"]
    assert (row["value"], row["applies"]) == ("faithfulness=0.55", "at once")  # the page reads the new value
    before = settings_file.read_bytes()
    at.text_input(key="setting_field_price_per_1k_prompt_tokens").set_value("-1")
    next(b for b in at.button if b.label == "Save floors and prices").click().run()
    assert settings_file.read_bytes() == before
    error = next(e for e in at.error if "price" in e.value)
    assert error.value.startswith("setting price\\_per\\_1k\\_prompt\\_tokens \\= \\-1\\.0 \\(from ")
    assert "to a value 0 or more" in error.value.replace("\\", "")
