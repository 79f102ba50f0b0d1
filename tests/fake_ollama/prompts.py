"""Which registered prompt a request was built from, read from what a real server receives: the messages' text.

The pipeline declares every prompt it sends (pipeline/prompt_registry.py). A prompt's system text opens the system
message (examples, such as a judge's past corrections, may follow it), and its task, when it has one, closes the
data in the first user message: prompts that share a system text (the calls on one context) differ in their task.
The texts are read from the registry itself, so a prompt whose wording changes is still recognised, and a prompt
registered later is found on the next look."""

import threading
from dataclasses import dataclass

from .text import _LABEL_LINE


@dataclass(frozen=True)
class Registered:
    """A registered prompt as a server sees it: the text it puts in the messages."""

    name: str
    version: str
    system: str
    task: str
    outside: bool = False  # an outside application's, recognised only where no registered prompt is

    def built(self, system, user):
        """Whether a request with this system message and first user message was built from this prompt."""
        return system.startswith(self.system) and self.task in user


_lock = threading.Lock()
_registered = []


def registered(refresh=False):
    """Every prompt in the pipeline's registry, and the outside ones (read once per process, again with `refresh`)."""
    global _registered
    with _lock:
        if refresh or not _registered:
            from pipeline.prompt_registry import all_prompts  # loads every verifier and metric: only when asked

            found = all_prompts().values()
            _registered = [Registered(p.name, p.version, p.system, p.task) for p in found] + outside()
        return _registered


def outside():
    """The prompts of an application outside the pipeline that benchmarks and tests run against the fake: the seed
    pipeline the workbench replaced (bench/seed_pipeline.py), known by its system texts."""
    from bench.seed_pipeline import EXTRACT_SYSTEM, GENERATE_SYSTEM

    return [
        Registered("seed_generate", "seed", GENERATE_SYSTEM, "", outside=True),
        Registered("seed_extract", "seed", EXTRACT_SYSTEM, "", outside=True),
    ]


def first(messages, role):
    """The first `role` message's content; None when there is none."""
    return next((m.get("content") or "" for m in messages if m.get("role") == role), None)


def prompt_name(messages):
    """The name of the registered prompt `messages` were built from; None when they have no system message or no
    registered prompt matches (the registry is read again once before saying so). The most specific match wins: a
    registered prompt before an outside one, then the longest system text, then the longest task."""
    system = first(messages, "system")
    if system is None:
        return None
    user = first(messages, "user") or ""
    for refresh in (False, True):
        matches = [p for p in registered(refresh) if p.built(system, user)]
        if matches:
            return max(matches, key=lambda p: (not p.outside, len(p.system), len(p.task))).name
    return None


def request_messages(body):
    """A chat or generate request body's messages: /api/generate's `system` and `prompt` as a system and a user
    message."""
    if "messages" in body:
        return body.get("messages") or []
    system, prompt = body.get("system") or "", body.get("prompt") or ""
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]


def built_from(*names):
    """A `match` for FakeOllama.enqueue and hold: true for a request built from one of the registered prompts
    named, e.g. fake.enqueue(INVENTED, match=built_from("generate"))."""
    return lambda body: prompt_name(request_messages(body)) in names


def rule_input(messages):
    """The text the rules read: the latest user message with a labelled line ("Question:", "Context:", ...), else
    the last one.

    Follow-ups such as "that was not valid JSON, reply again" thus keep the original task in view.
    """
    users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    labelled = [u for u in users if _LABEL_LINE.search(u)]
    return (labelled or users or [""])[-1]
