"""The verifier registry: `@register_verifier("name", prompts=(...), options=(...))` on a Verifier subclass in
verifiers/ adds it, with the prompts it sends and the settings its verdicts depend on.

Every module in pipeline/verification/verifiers/ is imported on first use, so a new verifier is one
file there (its prompt, if it has one, in the same file); the setting `verifier_chain` then names it. A run
records the versions of the prompts the verifiers of its chain declare and the values of every verifier's
options (engine.run_config).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from pipeline import config
from pipeline.declarations import declared
from pipeline.errors import ConfigError
from pipeline.plugins import import_package_modules
from pipeline.prompting import Prompt
from pipeline.verification.base import Verifier

VERIFIERS: dict[str, type[Verifier]] = {}
V = TypeVar("V", bound=type[Verifier])


def register_verifier(name: str, prompts: Iterable[Prompt] = (), options: Iterable[str] = ()) -> Callable[[V], V]:
    """`prompts`: every Prompt the verifier sends (none for a verifier that sends none, or only bespoke-minicheck's
    own format); `options`: the names of the settings its verdicts depend on (the model it asks among them)."""
    prompts, options = declared(f"verifier {name!r}", prompts, options)

    def register(cls: V) -> V:
        if not (isinstance(cls, type) and issubclass(cls, Verifier)):
            raise TypeError(f"@register_verifier({name!r}) decorates a Verifier subclass, not {cls!r}")
        if VERIFIERS.get(name, cls) is not cls:
            raise ValueError(f"verifier name {name!r} is taken by {VERIFIERS[name].__qualname__}")
        cls.name, cls.prompts, cls.options = name, prompts, options  # on the class itself, never inherited
        VERIFIERS[name] = cls
        return cls

    return register


def unregister_verifier(name: str) -> None:
    VERIFIERS.pop(name, None)


def load_verifiers() -> dict[str, type[Verifier]]:
    """Import every module of the verifiers package once; returns the registry."""
    import_package_modules("pipeline.verification.verifiers")
    return VERIFIERS


def verifier_names() -> list[str]:
    return list(load_verifiers())


def verifier_class(name: str) -> type[Verifier]:
    registered = load_verifiers()
    if name not in registered:
        raise ConfigError(
            f"there is no verifier named {name!r}",
            fix=f"name registered verifiers in WORKBENCH_VERIFIER_CHAIN: {', '.join(registered)}",
        )
    return registered[name]


config.registered_verifiers = lambda: load_verifiers().keys()  # settings check a verifier chain against these
