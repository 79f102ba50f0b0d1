"""The metric registry: every score an evaluation stores is a registered metric.

A metric is a name (the `scores.metric` value), the component it speaks for, its scale, a compute
function `(MetricInput) -> MetricScore`, and what it declares: the prompts it sends and the settings its
scores depend on (its options). `@register_metric(...)` on that function in any module of
pipeline/evaluation/metrics/ registers it (its prompt in the same module); the modules are imported on first
use. The runner, the report, the store's result query, regression, the diagnosis, the CLI table, the Evaluate
page and bench/ all read the names, scales and components from here; an evaluation's configuration records the
declarations of the metrics it measures (evaluation_config).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipeline.declarations import declared, option_values, prompt_versions
from pipeline.errors import InputError
from pipeline.evaluation.judge import ALL_CRITERIA, MetricScore, own_versions
from pipeline.plugins import import_package_modules

if TYPE_CHECKING:
    from pipeline.answering.events import AnswerResult
    from pipeline.config import Settings
    from pipeline.evaluation.dataset import GoldenItem
    from pipeline.models.llm import LLM
    from pipeline.prompting import Prompt

# The components in the order reports list them; a metric may name another, listed after these.
COMPONENTS = ("generator", "generator/prompt", "retriever ranking", "retriever/chunking", "judge")
UNIT, JUDGE_SCALE = (0.0, 1.0), (1.0, 5.0)
STATUSES = ("ok", "invalid", "not_applicable")
NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class MetricInput:
    """Everything a metric may read about one evaluated item."""

    llm: LLM
    settings: Settings
    item: GoldenItem
    result: AnswerResult
    pin: Any  # the evaluation's JudgePin (with its corrections, if any)
    # the embedding model's similarity scale the question was answered under (None: looked up when needed)
    scale: Any = None
    # a turn of a conversation: the turns before it, oldest first (pipeline.answering.conversation.Turn); () for none
    history: tuple = ()


@dataclass(frozen=True)
class Metric:
    name: str
    component: str
    scale: tuple[float, float]
    compute: Callable[[MetricInput], MetricScore]
    label: str
    higher_is_better: bool = True  # every shipped metric; a comparison colours a change by it
    prompts: tuple[Prompt, ...] = ()  # the prompts it sends
    options: tuple[str, ...] = ()  # the settings its scores depend on (the models it asks among them)
    turns_only: bool = False  # it applies only to a follow-up turn of a conversation (not_applicable elsewhere)

    @property
    def span(self) -> float:
        """The width of the scale: a drop of min_effect on 0-1 is min_effect × span here."""
        return self.scale[1] - self.scale[0]

    def measure(self, inputs: MetricInput) -> MetricScore:
        """The metric's score, named and checked: a value on its scale with status ok, else None with the reason.
        A score made with `MetricScore.of` gets the metric's name here; one that names another metric is refused."""
        score = self.compute(inputs)
        if isinstance(score, MetricScore) and not score.metric:  # MetricScore.of: the name is stamped here
            score = dataclasses.replace(score, metric=self.name)
        if not isinstance(score, MetricScore) or score.metric != self.name:
            raise ValueError(f"metric {self.name} returned {score!r}, not a MetricScore named {self.name!r}")
        if score.status not in STATUSES:
            raise ValueError(f"metric {self.name} returned status {score.status!r}; use one of {', '.join(STATUSES)}")
        if score.status != "ok" and score.value is not None:
            raise ValueError(
                f"metric {self.name} gave the value {score.value} with status {score.status}; "
                "a score that is not ok has no value"
            )
        if score.status == "ok" and not (
            isinstance(score.value, (int, float))
            and math.isfinite(score.value)
            and self.scale[0] <= score.value <= self.scale[1]
        ):
            raise ValueError(
                f"metric {self.name} gave {score.value!r}, outside its scale {self.scale[0]:g}-{self.scale[1]:g}"
            )
        return score


METRICS: dict[str, Metric] = {}


def register_metric(
    name: str,
    component: str,
    scale: tuple[float, float] = UNIT,
    label: str | None = None,
    higher_is_better: bool = True,
    prompts: Iterable[Prompt] = (),
    options: Iterable[str] = (),
    turns_only: bool = False,
):
    """Decorator for a compute function `(MetricInput) -> MetricScore`; returns the function unchanged.
    `prompts`: every Prompt the metric sends; `options`: the names of the settings its scores depend on;
    `turns_only`: it scores only a follow-up turn of a conversation (not applicable to a single question)."""
    if not NAME.fullmatch(name):
        raise ValueError(f"metric name {name!r}: lower-case letters, digits and _ only (it is a column name)")
    if scale[0] >= scale[1]:
        raise ValueError(f"metric {name}: scale {scale} is empty")
    prompts, options = declared(f"metric {name!r}", prompts, options)

    def register(compute: Callable[[MetricInput], MetricScore]):
        known = METRICS.get(name)
        if known is not None and known.compute is not compute:
            raise ValueError(f"metric name {name!r} is already registered ({known.component})")
        METRICS[name] = Metric(
            name,
            component,
            (float(scale[0]), float(scale[1])),
            compute,
            label or name.replace("_", " "),
            higher_is_better,
            prompts,
            options,
            turns_only,
        )
        return compute

    return register


def unregister_metric(name: str) -> None:
    METRICS.pop(name, None)


def load_metrics() -> dict[str, Metric]:
    """Import every module of the metrics package once; returns the registry."""
    import_package_modules("pipeline.evaluation.metrics")
    return METRICS


def ordered_metrics() -> list[Metric]:
    """Registered metrics by component (COMPONENTS order, others after), then by registration."""
    registered = list(load_metrics().values())
    rank = {c: i for i, c in enumerate(COMPONENTS)}
    return sorted(registered, key=lambda m: (rank.get(m.component, len(COMPONENTS)), registered.index(m)))


def named_metrics(text: str, setting: str) -> tuple[str, ...]:
    """The registered metric names in a comma list (a setting's value), repeats dropped; InputError naming the
    first unknown one and the setting's environment variable."""
    names = tuple(dict.fromkeys(filter(None, (p.strip() for p in text.split(",")))))
    unknown = [n for n in names if n not in metric_names()]
    if unknown:
        raise InputError(
            f"{setting} names {unknown[0]!r}, which is not a registered metric",
            fix=f"WORKBENCH_{setting.upper()} takes a comma list of {', '.join(metric_names())}",
        )
    return names


def metric_names() -> list[str]:
    return [m.name for m in ordered_metrics()]


def get_metric(name: str) -> Metric | None:
    return load_metrics().get(name)


def scale_of(name: str) -> tuple[float, float]:
    """A registered metric's scale; 0-1 for a name no longer registered (an old run's score)."""
    metric = get_metric(name)
    return metric.scale if metric else UNIT


def span_of(name: str) -> float:
    low, high = scale_of(name)
    return high - low


def higher_is_better(name: str) -> bool:
    metric = get_metric(name)
    return metric.higher_is_better if metric else True


def label_of(name: str) -> str:
    metric = get_metric(name)
    return metric.label if metric else name.replace("_", " ")


def in_registry_order(rows: list[dict], key: str = "metric") -> list[dict]:
    """Rows keyed by metric name in registry order; names no longer registered go last."""
    order = {name: i for i, name in enumerate(metric_names())}
    return sorted(rows, key=lambda row: (order.get(row[key], len(order)), row[key]))


class MetricNames(Sequence):
    """The registered names as a live, ordered sequence (for `from ... import METRICS` callers)."""

    def __getitem__(self, index):
        return metric_names()[index]

    def __len__(self) -> int:
        return len(load_metrics())

    def __iter__(self):
        return iter(metric_names())

    def __contains__(self, name) -> bool:
        return name in load_metrics()

    def __repr__(self) -> str:
        return f"MetricNames({metric_names()!r})"


METRIC_NAMES = MetricNames()


# What an evaluation itself declares: the judge pin's model (pinned even when no judge metric is measured) and the
# cache, and whether it was read (a fresh run): recorded and shown in comparisons, but they change no score, so a
# resume never refuses over them.
EVALUATION_OPTIONS = ("judge_model", "cache_enabled", "cache_read")


def evaluation_config(settings: Settings, metrics: Sequence[str], given_by: str | None = None) -> dict:
    """What an evaluation's configuration records: its question runs' (engine.run_config), its own options, and
    what the metrics it measures declare: their options, their prompts' versions (with the runs' in `prompts`),
    their names, and the version of each judge criterion among them that has its own (so a revised rubric is a
    configuration change); the judge's repeats only when K > 1. A name no longer registered (a stored run's) is
    recorded with nothing declared. `given_by`: the pipeline that wrote the answers of a dataset that carries them
    (their runs' configuration is then given.given_config: no retrieval, no generation)."""
    from pipeline.answering.engine import run_config, run_prompts
    from pipeline.evaluation.given import given_config, given_prompts

    measured = [m for m in (get_metric(name) for name in metrics) if m is not None]
    config = run_config(settings) if given_by is None else given_config(settings, given_by)
    runs_prompts = run_prompts(settings) if given_by is None else given_prompts(settings)
    config.update(option_values(settings, [*EVALUATION_OPTIONS, *(o for m in measured for o in m.options)]))
    config["prompts"] = prompt_versions([*runs_prompts, *(p for m in measured for p in m.prompts)])
    config["metrics"] = list(metrics)
    # the judge's repeats (an option of the judge's criteria) are recorded only where they change something (K > 1):
    # a run judged once records what runs recorded before repeats existed, so resuming or comparing them sees no change
    if config.get("judge_repeats") == 1:
        del config["judge_repeats"]
        config.pop("judge_repeat_temperature", None)
    versions = own_versions([c for c in (m.removeprefix("judge_") for m in metrics) if c in ALL_CRITERIA])
    return {**config, **({"judge_prompt_versions": versions} if versions else {})}


# recorded and shown in comparisons, never a reason to refuse a resume: the cache changes no score, and the metric
# choice is checked on its own (a resume measures the recorded metrics)
SHOWN_ONLY = frozenset({"cache_enabled", "cache_read", "metrics"})


def config_changes(stored: dict, current: dict) -> list[str]:
    """The keys of a stored evaluation's configuration that the configuration it would resume with changes. Of
    `prompts`, the metrics' are compared where both record them: which metrics run is checked on its own, and a run
    started before the metrics' prompts were recorded has none of them; every other prompt is compared as a
    setting is."""
    metric_prompts = {p.name for m in load_metrics().values() for p in m.prompts}
    changed = []
    for key in sorted((set(stored) | set(current)) - SHOWN_ONLY):
        before, now = stored.get(key), current.get(key)
        if key == "prompts" and isinstance(before, dict) and isinstance(now, dict):
            kept = (set(before) & set(now)) | (set(before) | set(now)) - metric_prompts
            before, now = ({k: v for k, v in d.items() if k in kept} for d in (before, now))
        if before != now:
            changed.append(key)
    return changed
