"""Several Ollama hosts: routing to the freest host, backoff and failover, the digest pin, and the host rows
that doctor and Settings & health show. Two (or three) fake Ollama servers stand for the hosts."""

from __future__ import annotations

import threading

import ollama
import pytest
from fake_ollama import FakeOllama

from pipeline.config import load_settings
from pipeline.errors import ConfigError, OllamaUnreachable
from pipeline.knowledge.health import health
from pipeline.models import hosts
from pipeline.models.failures import HostsUnavailable
from pipeline.models.health import check_hosts
from pipeline.models.llm import LLM

ASK = [{"role": "user", "content": "Question: what is RAG?\nContext: RAG retrieves passages."}]
OTHER_DIGEST = "sha256:" + "0" * 64


class SteppedClock:
    """The time backoffs are counted on (hosts.clock), standing still until a test moves it on."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def fresh_hosts(monkeypatch):
    """No host state from another test, and a backoff that ends only when the test steps the clock past it."""
    hosts.forget_hosts()
    clock = SteppedClock()
    monkeypatch.setattr(hosts, "clock", clock)
    yield clock
    hosts.forget_hosts()


@pytest.fixture
def two(monkeypatch):
    """Two fake hosts, A and B, listed in that order in WORKBENCH_OLLAMA_HOSTS."""
    with FakeOllama() as a, FakeOllama() as b:
        monkeypatch.setenv("WORKBENCH_OLLAMA_HOSTS", f"{a.url},{b.url}")
        yield a, b


def chats(fake) -> int:
    return sum(r["path"] == "/api/chat" for r in fake.requests)


def state(fake) -> hosts.HostState:
    return hosts.host_state(fake.url)


def test_ollama_hosts_are_read_normalised_and_default_to_ollama_host(tmp_path):
    settings = load_settings(environ={"WORKBENCH_OLLAMA_HOSTS": " gpu1:11434, http://gpu2:8080/ ,gpu1"})
    assert settings.model_hosts() == ["http://gpu1:11434", "http://gpu2:8080"]
    assert load_settings(environ={"OLLAMA_HOST": "box:7"}).model_hosts() == ["http://box:7"]
    toml = tmp_path / "w.toml"
    toml.write_text('ollama_hosts = ["a", "b:9"]\nollama_slots_per_host = 2\n')
    from_file = load_settings(environ={}, toml_path=toml)
    assert from_file.model_hosts() == ["http://a:11434", "http://b:9"] and from_file.ollama_slots_per_host == 2
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"WORKBENCH_OLLAMA_SLOTS_PER_HOST": "-1"})
    assert "WORKBENCH_OLLAMA_SLOTS_PER_HOST" in caught.value.fix


def test_hosts_with_their_own_slot_counts_get_calls_by_their_free_slots(two, monkeypatch):
    from pipeline.models import slots

    a, b = two
    monkeypatch.setenv("WORKBENCH_OLLAMA_HOST_SLOTS", f"{a.url.removeprefix('http://')}=1, {b.url}=4")
    settings = load_settings()
    assert (settings.slots_set_for(a.url), settings.slots_set_for(b.url)) == (1, 4)
    pool = hosts.HostPool(settings)
    leases = [pool.lease("llama3.2", None, []) for _ in range(4)]
    assert [lease.host.url for lease in leases] == [b.url, b.url, b.url, a.url]  # 4 free on B before A's one
    assert slots.host_slots(settings, a.url, "llama3.2") == slots.Slots(1, "set by ollama_host_slots")
    assert slots.schedule(settings)[0] == "sequential"  # the generator's first host, A, has one slot
    for lease in leases:
        lease.release()
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"WORKBENCH_OLLAMA_HOST_SLOTS": "gpu1:11434=0"})
    assert "WORKBENCH_OLLAMA_HOST_SLOTS" in caught.value.fix and "host=N pairs" in str(caught.value)


def test_a_call_goes_to_the_host_with_the_most_free_slots(two):
    a, b = two
    settings = load_settings()
    pool = hosts.HostPool(settings)
    first, second = pool.lease("llama3.2", None, []), pool.lease("llama3.2", None, [])
    assert [first.host.url, second.host.url] == [a.url, b.url]  # a tie goes to the host chosen least recently
    busy = [pool.lease("llama3.2", None, []) for _ in range(2)]
    assert [lease.host.url for lease in busy] == [a.url, b.url]
    second.release()  # A: 2 in flight, B: 1
    assert (state(a).in_flight, state(b).in_flight) == (2, 1)
    LLM(settings, None).chat("generate", "llama3.2", ASK)
    assert (chats(a), chats(b)) == (0, 1)  # the call went to B, the host with the most free slots
    for lease in busy[1:]:
        lease.release()  # B: 0 in flight, A still 2
    LLM(settings, None).chat("generate", "llama3.2", ASK)
    assert (chats(a), chats(b)) == (0, 2)
    first.release(), busy[0].release()
    assert (state(a).in_flight, state(b).in_flight) == (0, 0)


def test_concurrent_calls_spread_over_the_hosts(two):
    a, b = two
    llm = LLM(load_settings(), None)
    threads = [threading.Thread(target=llm.chat, args=("generate", "llama3.2", ASK)) for _ in range(8)]
    gates = [fake.hold() for fake in two]  # every reply waits until all eight calls are in flight at once
    try:
        for thread in threads:
            thread.start()
        for fake, gate in zip(two, gates, strict=True):
            assert fake.wait_until(lambda f, gate=gate: gate.waiting == 4), [g.waiting for g in gates]
    finally:
        for gate in gates:
            gate.release()
    for thread in threads:
        thread.join()
    assert (chats(a), chats(b)) == (4, 4) and (a.max_in_flight, b.max_in_flight) == (4, 4)


def test_a_streamed_reply_holds_its_slot_until_it_is_drained(two):
    a, _ = two
    llm = LLM(load_settings(), None)
    seen = []
    llm.stream_chat("generate", "llama3.2", ASK, on_delta=lambda _: seen.append(state(a).in_flight))
    assert seen and set(seen) == {1}  # the first call goes to A, which holds it until the last piece
    assert state(a).in_flight == 0 and len(state(a).latencies) >= 1


def test_a_killed_host_is_backed_off_and_the_call_fails_over(two):
    a, b = two
    llm = LLM(load_settings(), None)
    llm.chat("generate", "llama3.2", ASK)  # A
    llm.chat("generate", "llama3.2", ASK)  # B; A is now the host chosen least recently
    a.stop()
    reply = llm.chat("generate", "llama3.2", ASK)
    assert reply.text and chats(b) == 2 and llm.calls[-1].error is None
    a_state = state(a)
    assert a_state.backed_off() and a_state.failures == 1 and "not reachable" in a_state.last_error
    llm.chat("generate", "llama3.2", ASK)
    assert chats(b) == 3 and state(a).failures == 1  # backed off: A was not tried again
    a.start()  # back, on a new port: A's old address stays down


def test_a_failing_host_comes_back_after_its_backoff(two, monkeypatch, fresh_hosts):
    a, b = two
    clock = fresh_hosts
    monkeypatch.setenv("WORKBENCH_OLLAMA_HOST_BACKOFF_S", "0.3")
    llm = LLM(load_settings(), None)
    a.inject("500", path="/api/chat")
    llm.chat("generate", "llama3.2", ASK)
    assert (chats(a), chats(b)) == (1, 1)  # A's server error was not retried on A: the call failed over to B
    assert state(a).backed_off() and "HTTP 500" in state(a).last_error
    for _ in range(3):
        llm.chat("generate", "llama3.2", ASK)
    assert (chats(a), chats(b)) == (1, 4)
    clock.now += 0.29
    llm.chat("generate", "llama3.2", ASK)
    assert (chats(a), chats(b)) == (1, 5) and state(a).backed_off()  # 0.29 s on: still backed off
    clock.now += 0.02  # 0.31 s after the failure: the 0.3 s backoff is over
    llm.chat("generate", "llama3.2", ASK)
    llm.chat("generate", "llama3.2", ASK)
    assert chats(a) == 2 and not state(a).backed_off()  # tried again once its backoff ended


def test_when_every_host_is_down_the_error_names_each(two):
    a, b = two
    llm = LLM(load_settings(), None)
    llm.chat("generate", "llama3.2", ASK)  # the listings are read while the hosts are up
    a.stop(), b.stop()
    with pytest.raises(OllamaUnreachable) as caught:
        llm.chat("generate", "llama3.2", ASK)
    error = caught.value
    assert isinstance(error, HostsUnavailable) and "not usable at any of its 2 hosts" in error.message
    assert a.url in error.message and b.url in error.message and "ollama serve" in error.fix
    assert llm.calls[-1].error and a.url in llm.calls[-1].error
    a.start(), b.start()


def test_a_host_with_another_digest_is_not_used_and_is_reported(two):
    a, b = two
    b.set_digest("llama3.2", OTHER_DIGEST)
    llm = LLM(load_settings(), None)
    for _ in range(4):
        llm.chat("generate", "llama3.2", ASK)
    assert (chats(a), chats(b)) == (4, 0)
    assert {c.digest for c in llm.calls} == {a._models["llama3.2:latest"]}  # the pin: the first host's digest
    llm.embed_query("what is RAG?")
    llm.embed_query("what is a chunk?")
    embeds = [sum(r["path"] == "/api/embed" for r in f.requests) for f in two]
    assert embeds == [1, 1]  # B still serves the models it has at the pinned digest
    statuses = hosts.host_statuses(load_settings(), ["llama3.2", "nomic-embed-text"])
    assert statuses[0].unusable == {}
    pin = a._models["llama3.2:latest"]
    assert statuses[1].unusable == {"llama3.2:latest": f"digest sha256:00000 differs from the pinned {pin[:12]}"}
    checks = {c.name: c for c in check_hosts(statuses)}
    assert checks[f"host {a.url}"].ok and not checks[f"host {b.url}"].ok
    assert "not used for llama3.2:latest: digest" in checks[f"host {b.url}"].detail


def test_a_host_without_the_model_is_not_used_for_it(two):
    a, b = two
    a.remove_model("bespoke-minicheck")
    llm = LLM(load_settings(), None)
    verify = [{"role": "user", "content": "Document: RAG retrieves passages.\nClaim: RAG retrieves passages."}]
    for _ in range(3):
        llm.chat("verify", "bespoke-minicheck", verify)
    assert (chats(a), chats(b)) == (0, 3)
    assert state(a).unusable == {"bespoke-minicheck:latest": "not pulled"}


def test_doctor_lists_each_host_with_what_is_wrong_there(two, monkeypatch, capsys):
    from pipeline.cli.main import main

    a, b = two
    b.set_digest("llama3.2", OTHER_DIGEST)
    with FakeOllama() as c:
        down = c.url  # a host that was there and is gone
    monkeypatch.setenv("WORKBENCH_OLLAMA_HOSTS", f"{a.url},{b.url},{down}")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert f"ok   ollama: reachable at 2 of 3 hosts ({a.url}, {b.url}); not reachable: {down}" in out
    assert f"ok   host {a.url}: reachable, serves every model at its pinned digest" in out
    assert f"FAIL host {b.url}: reachable, not used for llama3.2:latest: digest" in out
    assert f"FAIL host {down}: not reachable: Ollama is not reachable at {down}" in out
    assert "ok   model llama3.2: pulled (generator" in out and "served at it by 1 of 3 hosts" in out
    table = out[out.index("Ollama hosts") :]
    rows = [line for line in table.splitlines() if line.startswith("│ http://")]
    assert [row.split("│")[1].strip() for row in rows] == [a.url, b.url, down]
    assert "│ reachable " in rows[0] and "│ not reachable " in rows[2] and "UTC" in rows[2] and "0 / 1" in rows[0]


def test_settings_page_shows_a_row_per_host(two):
    import streamlit as st
    from test_app import app

    a, b = two
    b.remove_model("nomic-embed-text")
    ollama.Client(host=a.url).chat(model="llama3.2", messages=[{"role": "user", "content": "hi"}])  # loaded on A
    a.gpu = False
    st.cache_resource.clear()
    st.cache_data.clear()
    try:
        at = app("pages/settings.py")
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()
    frame = next(d.value for d in at.dataframe if "host" in d.value.columns)  # the hosts table, among the settings
    assert list(frame["host"]) == [a.url, b.url] and list(frame["state"]) == ["reachable", "reachable"]
    # A runs the generator on its CPU; B has it on a GPU (the fake loads what it lists) or not loaded
    assert list(frame["in flight / slots"])[0] == "0 / 1"
    assert frame["slots: why"][0] == "Ollama's default: llama3.2:latest runs on the CPU"
    (plan,) = [m.value for m in at.markdown if "A question's calls" in m.value]
    assert plan.startswith("**A question's calls: sequential** (the context grade first")
    assert "1 slot for llama3\\.2 \\(Ollama\\'s default\\: llama3\\.2\\:latest runs on the CPU\\)" in plan
    assert list(frame["models not used here"]) == ["", "nomic-embed-text:latest: not pulled"]
    assert frame["p50 latency (ms)"].notna().all()
    port = b.url.rsplit(":", 1)[1]  # the URL itself is shown escaped
    assert any(e.value.startswith("**host") and port in e.value and "nomic" in e.value for e in at.error)


def test_one_host_is_never_skipped_even_after_a_failure(fake, db):
    """The default: a single host behaves as before; a failure backs it off, yet the next call still goes there."""
    llm = LLM(load_settings(), None)
    llm.chat("generate", "llama3.2", ASK)
    fake.inject("500", path="/api/chat", times=3)
    with pytest.raises(Exception, match="HTTP 500"):
        llm.chat("generate", "llama3.2", ASK)  # retried on the one host (3 tries), then failed
    assert chats(fake) == 4 and state(fake).backed_off()
    assert llm.chat("generate", "llama3.2", ASK).text
    assert not state(fake).backed_off()
    checks, statuses = health(load_settings(), db)
    assert [s.host for s in statuses] == [fake.url] and not [c for c in checks if c.name.startswith("host ")]


@pytest.mark.slow
def test_an_evaluation_finishes_on_the_other_host_when_one_is_killed(two, kb_db):
    from test_app import QUESTION

    from pipeline.evaluation.dataset import Dataset, GoldenItem
    from pipeline.evaluation.runner import run_evaluation

    a, b = two
    items = [GoldenItem(id=f"q{i}", question=f"{QUESTION} ({i})", reference="21 million") for i in range(3)]
    served_by_a = []

    def kill_a_after_the_first_item(progress):
        if progress.done == 1 and not served_by_a:
            served_by_a.append(chats(a))
            a.stop()

    outcome = run_evaluation(
        load_settings(), kb_db, Dataset("g.jsonl", items), "two-hosts", 1, on_progress=kill_a_after_the_first_item
    )
    assert outcome.status == "finished" and (outcome.progress.done, outcome.progress.failed) == (3, 0)
    assert served_by_a[0] > 0 and chats(b) > 0  # both hosts served the first item; B alone the rest
    assert state(a).failures >= 1 and state(a).backed_off()
    a.start()
