"""What each part of a run declares next to its code: the prompts it sends and the settings its result depends on
(its options).

- the engine: `PROMPTS` and `OPTIONS` in pipeline/answering/engine.py;
- the faithfulness checker and the verifier chain: class attributes in pipeline/verification/;
- a verifier: `@register_verifier(name, prompts=(...), options=(...))`;
- a metric: `@register_metric(name, component=..., prompts=(...), options=(...))` (the judge's criteria too);
- an evaluation itself: `EVALUATION_OPTIONS` in pipeline/evaluation/registry.py.

A run's recorded configuration is gathered from these (engine.run_config for a question,
registry.evaluation_config for an evaluation), so a part cannot send a prompt or read a setting that changes a
result without the run recording the prompt's version and the setting's value. Operational settings (hosts,
timeouts, concurrency, the store) change no result and are not options.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields

from pipeline.config import Settings
from pipeline.prompting import Prompt

SETTING_NAMES = frozenset(f.name for f in fields(Settings))


def declared(
    owner: str, prompts: Iterable[Prompt], options: Iterable[str]
) -> tuple[tuple[Prompt, ...], tuple[str, ...]]:
    """(prompts, options) as tuples, checked: Prompt objects, and names of settings."""
    if isinstance(options, str) or isinstance(prompts, Prompt):
        raise TypeError(f"{owner}: prompts and options are sequences, e.g. options=({options!r},)")
    prompts, options = tuple(prompts), tuple(options)
    wrong = [p for p in prompts if not isinstance(p, Prompt)]
    if wrong:
        raise TypeError(f"{owner}: prompts declares {wrong[0]!r}, which is not a Prompt")
    unknown = [o for o in options if o not in SETTING_NAMES]
    if unknown:
        raise ValueError(
            f"{owner}: options names {', '.join(map(repr, unknown))}, which "
            f"{'is not a setting' if len(unknown) == 1 else 'are not settings'} (pipeline/config.py)"
        )
    prompt_versions(prompts)  # two prompts of one name would pin two versions under one key
    return prompts, options


def prompt_versions(prompts: Iterable[Prompt]) -> dict[str, str]:
    """{name: version}, in order; ValueError when one name comes with two versions."""
    versions: dict[str, str] = {}
    for prompt in prompts:
        if versions.setdefault(prompt.name, prompt.version) != prompt.version:
            raise ValueError(
                f"two prompts are named {prompt.name!r}, versions {versions[prompt.name]} and {prompt.version}"
            )
    return versions


def option_values(settings: Settings, options: Iterable[str]) -> dict:
    """{option: its value in the settings}, each option once, in order."""
    return {name: getattr(settings, name) for name in dict.fromkeys(options)}
