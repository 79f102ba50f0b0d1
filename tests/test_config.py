import pytest

from pipeline.config import Settings, load_settings, normalise_host
from pipeline.errors import ConfigError


def test_defaults_match_the_design():
    s = load_settings(environ={}, toml_path=None)
    assert (s.generator_model, s.verifier_model, s.embed_model) == ("llama3.2", "bespoke-minicheck", "nomic-embed-text")
    assert s.faithfulness_threshold == 0.8 and s.max_retries == 2
    assert s.ollama_host == "http://127.0.0.1:11434"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("localhost:9999", "http://localhost:9999"),
        ("http://gpu-box:11434/", "http://gpu-box:11434"),
        ("https://ollama.example", "https://ollama.example:11434"),
    ],
)
def test_ollama_host_is_read_like_ollama_does(raw, expected):
    assert normalise_host(raw) == expected
    assert load_settings(environ={"OLLAMA_HOST": raw}).ollama_host == expected


def test_environment_overrides_toml_which_overrides_defaults(tmp_path):
    toml = tmp_path / "workbench.toml"
    toml.write_text('top_k = 7\ngenerator_model = "qwen2.5"\ncache_enabled = false\n')
    s = load_settings(environ={"WORKBENCH_TOP_K": "3", "WORKBENCH_DB": "/tmp/x.duckdb"}, toml_path=toml)
    assert s.top_k == 3 and s.generator_model == "qwen2.5" and s.cache_enabled is False
    assert s.store_path == "/tmp/x.duckdb"


def test_an_empty_floors_turns_floors_off_while_unset_keeps_the_defaults(tmp_path):
    default = "faithfulness=0.70,context_recall=0.75"
    missing = tmp_path / "none.toml"
    assert load_settings(environ={}, toml_path=missing).floors == default
    assert load_settings(environ={"WORKBENCH_FLOORS": ""}, toml_path=missing).floors == ""  # set empty: off
    toml = tmp_path / "workbench.toml"
    toml.write_text('floors = ""\n')
    assert load_settings(environ={}, toml_path=toml).floors == ""
    toml.write_text('floors = "faithfulness=0.9"\n')
    assert load_settings(environ={"WORKBENCH_FLOORS": ""}, toml_path=toml).floors == ""  # the variable wins
    # any other setting's empty variable still leaves it at its default
    assert load_settings(environ={"WORKBENCH_TOP_K": "", "WORKBENCH_JUDGE_MODEL": ""}, toml_path=missing).top_k == 5


@pytest.mark.parametrize(
    "env, message",
    [
        ({"WORKBENCH_TOP_K": "many"}, "setting top_k = 'many' is not a valid int"),
        ({"WORKBENCH_FAITHFULNESS_THRESHOLD": "1.5"}, "setting faithfulness_threshold = 1.5 is out of range"),
        ({"WORKBENCH_CHUNK_OVERLAP": "600"}, "setting chunk_overlap = 600 is out of range"),
    ],
)
def test_bad_values_say_which_variable_to_fix(env, message):
    with pytest.raises(ConfigError) as caught:
        load_settings(environ=env)
    assert caught.value.message == message
    assert next(iter(env)) in caught.value.fix


# Every value the hand-written checks refused before the settings declared their valid values, and the edges
# they accepted.
REFUSED = [
    ("top_k", "0"),
    ("chunk_size", "31"),
    ("chunk_overlap", "-1"),
    ("faithfulness_threshold", "-0.1"),
    ("abstain_below", "1.1"),
    ("when_unverified", "sometimes"),
    ("precheck_novel_share", "0"),
    ("precheck_novel_words", "0"),
    ("max_retries", "-1"),
    ("verify_concurrency", "0"),
    ("request_timeout_s", "0"),
    ("max_question_chars", "9"),
    ("verify_scope", "sentence"),
    ("verifier_chain", " , "),
    ("context_window", "255"),
    ("llm_backend", "vllm"),
    ("ollama_slots_per_host", "-1"),
    ("ollama_host_backoff_s", "0"),
    ("price_per_1k_prompt_tokens", "-0.01"),
    ("price_per_1k_completion_tokens", "-0.01"),
    ("on_topic_reject", "-1.1"),
    ("on_topic_accept", "1.1"),
    ("off_topic_final", "ignore"),
]


@pytest.mark.parametrize("name, raw", REFUSED)
def test_values_out_of_range_are_still_refused(name, raw, tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={f"WORKBENCH_{name.upper()}": raw}, toml_path=tmp_path / "none.toml")
    assert caught.value.message.startswith(f"setting {name} = ") and caught.value.message.endswith(" is out of range")
    assert caught.value.fix.startswith(f"set WORKBENCH_{name.upper()} to a value ")


def test_the_edges_of_each_range_are_accepted(tmp_path):
    env = {
        "WORKBENCH_CHUNK_OVERLAP": "0",
        "WORKBENCH_FAITHFULNESS_THRESHOLD": "1",
        "WORKBENCH_ABSTAIN_BELOW": "0",
        "WORKBENCH_PRECHECK_NOVEL_SHARE": "1",
        "WORKBENCH_MAX_RETRIES": "0",
        "WORKBENCH_ON_TOPIC_REJECT": "0.3",
        "WORKBENCH_ON_TOPIC_ACCEPT": "0.3",
        "WORKBENCH_CONTEXT_WINDOW": "256",
        "WORKBENCH_STORE_IDLE_RELEASE_S": "0",
    }
    s = load_settings(environ=env, toml_path=tmp_path / "none.toml")
    assert (s.chunk_overlap, s.faithfulness_threshold, s.on_topic_reject, s.context_window) == (0, 1.0, 0.3, 256)


def test_unknown_or_broken_toml_is_refused(tmp_path):
    toml = tmp_path / "workbench.toml"
    toml.write_text("top_kk = 3\n")
    with pytest.raises(ConfigError, match="unknown settings: top_kk") as caught:
        load_settings(environ={}, toml_path=toml)
    assert "docs/reference/settings.md lists every setting" in caught.value.fix
    toml.write_text("top_k = [\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(environ={}, toml_path=toml)


def test_every_setting_is_shown_with_its_variable():
    items = dict((name, env) for name, _, env in Settings().public_items())
    assert items["ollama_host"] == "OLLAMA_HOST" and items["store_path"] == "WORKBENCH_DB"
    assert items["top_k"] == "WORKBENCH_TOP_K"
