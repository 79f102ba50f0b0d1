"""Where each setting comes from: default, the TOML file or the environment; secrets never shown."""

from pipeline.config import Settings, load_settings, setting_sources


def rows_by_name(settings, environ, toml_path):
    return {row["setting"]: row for row in setting_sources(settings, environ=environ, toml_path=toml_path)}


def test_each_setting_names_its_source(tmp_path):
    toml = tmp_path / "workbench.toml"
    toml.write_text('top_k = 7\ngenerator_model = "qwen2.5"\n')
    env = {"WORKBENCH_TOP_K": "3", "WORKBENCH_CHUNK_SIZE": "256"}
    rows = rows_by_name(load_settings(environ=env, toml_path=toml), env, toml)
    assert rows["top_k"] == {
        "setting": "top_k",
        "value": "3",
        "source": "environment (WORKBENCH_TOP_K)",
        "environment variable": "WORKBENCH_TOP_K",
    }
    assert (rows["generator_model"]["value"], rows["generator_model"]["source"]) == ("qwen2.5", str(toml))
    assert (rows["chunk_size"]["value"], rows["chunk_size"]["source"]) == ("256", "environment (WORKBENCH_CHUNK_SIZE)")
    assert (rows["faithfulness_threshold"]["value"], rows["faithfulness_threshold"]["source"]) == ("0.8", "default")
    assert len(rows) == len(Settings.__dataclass_fields__)  # every setting, not a selection


def test_an_empty_environment_variable_leaves_the_file_value(tmp_path):
    toml = tmp_path / "workbench.toml"
    toml.write_text("top_k = 9\n")
    env = {"WORKBENCH_TOP_K": ""}
    rows = rows_by_name(load_settings(environ=env, toml_path=toml), env, toml)
    assert (rows["top_k"]["value"], rows["top_k"]["source"]) == ("9", str(toml))


def test_api_keys_are_masked_wherever_they_come_from(tmp_path):
    env = {"WORKBENCH_OPENAI_API_KEY": "sk-very-secret-123"}
    settings = load_settings(environ=env, toml_path=tmp_path / "none.toml")
    rows = rows_by_name(settings, env, tmp_path / "none.toml")
    assert settings.openai_api_key == "sk-very-secret-123"
    assert "sk-very-secret" not in str(rows) and "sk-very-secret" not in str(settings.public_items())
    assert rows["openai_api_key"]["value"] == "•••••••• (set, hidden)"
    assert rows["openai_api_key"]["source"] == "environment (WORKBENCH_OPENAI_API_KEY)"
    unset = rows_by_name(load_settings(environ={}, toml_path=tmp_path / "none.toml"), {}, tmp_path / "none.toml")
    assert unset["openai_api_key"]["value"] == "(not set)"
