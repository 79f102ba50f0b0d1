"""Each setting is declared once (pipeline/config.py); its validation, its group and the reference page
docs/reference/settings.md come from that declaration."""

import dataclasses
import re

import pytest

from pipeline.config import (
    DECLARATIONS,
    GROUPS,
    PROJECT_ROOT,
    Settings,
    declarations,
    essential_settings,
    load_settings,
    setting,
)
from pipeline.errors import ConfigError
from pipeline.settings_reference import COMMAND, REFERENCE_PATH, main, render


def test_the_reference_page_is_what_the_declarations_generate():
    current = REFERENCE_PATH.read_text(encoding="utf-8") if REFERENCE_PATH.exists() else "(missing)"
    assert current == render(), f"{REFERENCE_PATH.relative_to(PROJECT_ROOT)} is out of date: run `{COMMAND}`"
    assert main(["--check"]) == 0


def test_the_reference_page_is_the_same_on_every_machine_and_links_nowhere_outside_docs():
    text = render()
    assert str(PROJECT_ROOT) not in text
    assert "| `store_path` **(essential)** | `WORKBENCH_DB` | `<project>/data/workbench.duckdb` |" in text
    assert "| `kb_path` | `WORKBENCH_KB_PATH` | `<project>/data/kb` |" in text
    assert not [link for link in re.findall(r"\]\(([^)]*)\)", text) if link.startswith(("..", "/"))]
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["Essential settings", *GROUPS.values()]


def test_every_setting_has_a_group_a_doc_and_a_row():
    names = [f.name for f in dataclasses.fields(Settings)]
    assert sorted(DECLARATIONS) == sorted(names)
    text = render()
    for d in DECLARATIONS.values():
        assert d.group in GROUPS and d.doc.strip(), d.name
        assert d.kind is type(d.default), d.name
        assert f"| `{d.name}`" in text and f"`{d.env}`" in text, d.name
    assert all(declarations(key) for key in GROUPS)  # no empty group
    assert 5 <= len(essential_settings()) <= 8
    assert {"ollama_host", "generator_model", "faithfulness_threshold", "store_path"} <= set(essential_settings())


def test_a_setting_cannot_be_declared_without_a_group_a_doc_or_the_rule_of_its_check():
    with pytest.raises(ValueError, match="group"):
        setting(1, "Misc", "a doc")
    with pytest.raises(ValueError, match="doc"):
        setting(1, "answering", " ")
    with pytest.raises(ValueError, match="rule"):
        setting(1, "answering", "a doc", check=lambda v: v > 0)


@pytest.mark.parametrize("name", [d.name for d in DECLARATIONS.values() if d.spec.choices])
def test_a_value_outside_the_declared_choices_is_refused_naming_them(name):
    d = DECLARATIONS[name]
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={d.env: "sometimes"}, toml_path=PROJECT_ROOT / "no-such.toml")
    assert caught.value.message == f"setting {name} = 'sometimes' is out of range"
    assert caught.value.fix.startswith(f"set {d.env} to a value ")
    assert all(repr(choice) in caught.value.fix for choice in d.spec.choices)


@pytest.mark.parametrize(
    "name", [d.name for d in DECLARATIONS.values() if d.spec.minimum is not None or d.spec.maximum is not None]
)
def test_a_value_past_the_declared_bounds_is_refused(name):
    d = DECLARATIONS[name]
    bad = d.spec.minimum - 1 if d.spec.minimum is not None else d.spec.maximum + 1
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={d.env: str(d.kind(bad))}, toml_path=PROJECT_ROOT / "no-such.toml")
    assert caught.value.message.startswith(f"setting {name} = ") and "out of range" in caught.value.message
    assert caught.value.fix == f"set {d.env} to a value {d.valid_values()}"


def test_the_fix_says_the_rule_the_declaration_gives():
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"WORKBENCH_WHEN_UNVERIFIED": "never"}, toml_path=PROJECT_ROOT / "no-such.toml")
    assert caught.value.fix == "set WORKBENCH_WHEN_UNVERIFIED to a value 'abstain' or 'show_best'"
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"WORKBENCH_REQUEST_TIMEOUT_S": "0"}, toml_path=PROJECT_ROOT / "no-such.toml")
    assert caught.value.fix == "set WORKBENCH_REQUEST_TIMEOUT_S to a value above 0"
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"WORKBENCH_FLOORS": "faithfulness:0.7"}, toml_path=PROJECT_ROOT / "no-such.toml")
    assert "metric=number pairs" in caught.value.fix


def test_cross_field_checks_name_the_other_setting():
    env = {"WORKBENCH_DIAGNOSIS_LOW": "0.8", "WORKBENCH_DIAGNOSIS_HIGH": "0.7"}
    with pytest.raises(ConfigError) as caught:
        load_settings(environ=env, toml_path=PROJECT_ROOT / "no-such.toml")
    assert caught.value.message == "setting diagnosis_low = 0.8 is out of range"
    assert caught.value.fix == "set WORKBENCH_DIAGNOSIS_LOW to a value between 0 and 1 and at most diagnosis_high"


def test_code_can_take_one_group_of_settings():
    settings = load_settings(environ={"WORKBENCH_STORE_LOCK_TIMEOUT_S": "2"}, toml_path=PROJECT_ROOT / "no-such.toml")
    store = settings.group("store")
    assert store.store_lock_timeout_s == 2.0 and store["store_path"] == settings.store_path
    assert dict(settings.group("Store")) == dict(store) and store.title == "Store"
    assert list(store) == [d.name for d in declarations("store")]
    with pytest.raises(AttributeError, match="not a setting of the group 'Store'"):
        store.top_k  # noqa: B018
    with pytest.raises(AttributeError):
        store.store_path = "elsewhere"
    with pytest.raises(KeyError, match="no settings group"):
        settings.group("misc")
    every = [name for key in GROUPS for name in settings.group(key)]
    assert sorted(every) == sorted(DECLARATIONS)  # each setting in exactly one group
