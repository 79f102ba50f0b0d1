"""Two evaluation runs side by side: metric means with their change (B − A), the paired change over the items
both scored (the regression check's own test, pipeline.evaluation.regression), and the items that got worse or
better per metric. Items are matched by golden id, else by normalised question (matching.py), so two pipelines'
answers to the same questions are compared item by item. Judge scores are compared only under the same judge pin
(and a criterion's own prompt version); runs over different datasets (content hash or size; for a golden set kept
in the store, another version) are compared item by item but marked, naming the two."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.answering.events import AnswerResult
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation import family
from pipeline.evaluation.compare_items import ItemPair, RunCosts, item_pairs, run_costs
from pipeline.evaluation.datasets import identity_text, version_label
from pipeline.evaluation.judge import recorded_version
from pipeline.evaluation.matching import in_terms_of_a, matched_items
from pipeline.evaluation.registry import get_metric, higher_is_better, label_of, metric_names, scale_of
from pipeline.evaluation.regression import Comparison, baseline_of, compare_family, config_diff, same_pin
from pipeline.history.runs import load_result
from pipeline.text import plural
from pipeline.verification.sentence_first import claims_label, granularity_of
from store import alerts as alert_store
from store import baselines, evals
from store.db import Database

PIN_DIFFERS = "not comparable: judge pin differs"
VERSION_DIFFERS = "not comparable: its judge prompt version differs"
GRANULARITY_DIFFERS = "not comparable: claim granularity differs (faithfulness counts other claims)"


@dataclass(frozen=True)
class Side:
    run: evals.EvalRun
    dataset_hash: str | None
    latency: dict = field(default_factory=dict)  # p50_ms, p95_ms (original costs) and replayed (evals.latency_summary)
    costs: RunCosts | None = None  # latency, tokens and cost of its items' answers
    item_usage: list[dict] = field(default_factory=list, repr=False)  # per item (evals.item_usage): costs, pairs

    @property
    def latency_text(self) -> str:
        """Its latency per question as first measured, with the share of calls replayed from the cache beside it."""
        p50, p95, replayed = (self.latency.get(k) for k in ("p50_ms", "p95_ms", "replayed"))
        if p50 is None:
            return "no latency"
        share = f", {replayed:.0%} of calls replayed from the cache" if replayed else ""
        return f"latency p50 {p50:,.0f} ms, p95 {p95:,.0f} ms{share}"

    @property
    def pin(self) -> str:
        return f"{self.run.judge_model}@{(self.run.judge_digest or '')[:12]} / {self.run.judge_prompt_version}"

    @property
    def claims(self) -> str:
        """The claims its faithfulness counts ("claims: auto")."""
        return claims_label(self.run.config)

    @property
    def dataset_text(self) -> str:
        """Its dataset in words: `golden@2 (3 items)` for a golden set's version kept in the store, else the name
        with the content hash's prefix: `golden.jsonl (3 items, content 1a2b3c4d5e6f)`."""
        items = plural(self.run.n_items, "item")
        if version_label(self.dataset_hash):
            return f"{self.run.dataset_label} ({items})"
        return f"{self.run.dataset_label} ({items}, {identity_text(self.dataset_hash)})"


@dataclass(frozen=True)
class Tile:
    metric: str
    label: str
    scale: tuple[float, float]
    higher_is_better: bool
    a_mean: float | None
    a_n: int
    b_mean: float | None
    b_n: int
    not_comparable: str | None  # why not: a judge criterion under another judge pin or prompt version
    paired: Comparison | None = None  # the paired change over shared items, when tested

    @property
    def comparable(self) -> bool:
        return self.not_comparable is None

    @property
    def delta(self) -> float | None:
        """B − A of the means; None when not comparable or a side has no mean."""
        if not self.comparable or self.a_mean is None or self.b_mean is None:
            return None
        return self.b_mean - self.a_mean


@dataclass(frozen=True)
class ItemChange:
    item_id: str
    question: str
    metric: str
    a: float
    b: float
    a_run_id: int | None
    b_run_id: int | None
    worse: bool

    @property
    def delta(self) -> float:
        return self.b - self.a


@dataclass
class RunComparison:
    a: Side
    b: Side
    tiles: list[Tile]
    changes: list[ItemChange]  # per metric, shared items whose score changed, the largest change first
    shared: list[str]  # golden ids both runs hold
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    pairs: list[ItemPair] = field(default_factory=list)  # every shared item, those that got worse first

    @property
    def same_pin(self) -> bool:
        return same_pin(self.a.run, self.b.run)

    @property
    def same_dataset(self) -> bool:
        return (self.a.dataset_hash, self.a.run.n_items) == (self.b.dataset_hash, self.b.run.n_items)

    @property
    def settings_diff(self) -> dict:
        """{setting: [A's, B's]} for every recorded setting (prompt versions included) the two runs differ in."""
        return config_diff(self.a.run.config or {}, self.b.run.config or {})

    def changed(self, metric: str, worse: bool) -> list[ItemChange]:
        return [c for c in self.changes if c.metric == metric and c.worse == worse]


def evaluation_names(db: Database) -> list[str]:
    """Every evaluation run's name, newest first."""
    return [row["name"] for row in evals.list_eval_runs(db)]


def default_pair(db: Database) -> tuple[str | None, str | None, str]:
    """(A, B, why): B the newest run, A its baseline by the one rule (pipeline.evaluation.regression.baseline_of);
    without a baseline, the run before it."""
    runs = evals.list_eval_runs(db)
    if not runs:
        return None, None, "there is no evaluation run yet"
    newest = evals.get_eval_run(db, runs[0]["name"])
    baseline_id = baseline_of(db, newest)
    if baseline_id is not None:
        baseline = evals.get_eval_run_by_id(db, baseline_id)
        return baseline.name, newest.name, f"A is the baseline of B, the newest run ({newest.name})"
    if len(runs) < 2:
        return None, newest.name, "there is only one evaluation run"
    return runs[1]["name"], newest.name, f"the newest run ({newest.name}) has no baseline; A is the run before it"


def _side(settings: Settings, db: Database, name: str, which: str) -> Side:
    run = evals.get_eval_run(db, name)
    if run is None:
        raise InputError(f"there is no evaluation named {name!r} (run {which})", fix="choose one from the list")
    identity = baselines.dataset_identity(db, run.id) or (None, None)
    latency = evals.latency_summary(db, run.id)
    usage = evals.item_usage(db, run.id)
    return Side(run, identity[0], latency, run_costs(settings, usage, latency), usage)


def _worse_first(pairs: list[ItemPair], changes: list[ItemChange]) -> list[ItemPair]:
    """The items that got worse on some metric first, then those that got better, then the rest (A's order)."""
    worse = {c.item_id for c in changes if c.worse}
    better = {c.item_id for c in changes if not c.worse}
    return sorted(pairs, key=lambda p: 0 if p.item_id in worse else 1 if p.item_id in better else 2)


def _not_comparable(metric: str, a: Side, b: Side) -> str | None:
    """Why a metric's scores of the two runs cannot be compared (None: they can): a judge criterion is compared
    only under the same judge pin and its own prompt version (pipeline.evaluation.judge.recorded_version)."""
    registered = get_metric(metric)
    if metric == "faithfulness" and granularity_of(a.run.config) != granularity_of(b.run.config):
        return GRANULARITY_DIFFERS
    if not (metric.startswith("judge_") or (registered is not None and registered.component == "judge")):
        return None
    if not same_pin(a.run, b.run):
        return PIN_DIFFERS
    versions = {recorded_version(metric, s.run.judge_prompt_version, s.run.config) for s in (a, b)}
    return VERSION_DIFFERS if len(versions) > 1 else None


def _tiles(
    settings: Settings, db: Database, a: Side, b: Side, metrics: list[str], matched: dict[str, str]
) -> list[Tile]:
    summaries = [{r["metric"]: r for r in evals.metric_summary(db, side.run.id)} for side in (a, b)]
    tested = [m for m in metrics if _not_comparable(m, a, b) is None]
    base = {m: alert_store.item_scores(db, a.run.id, m) for m in tested}
    new = {m: in_terms_of_a(alert_store.item_scores(db, b.run.id, m), matched) for m in tested}
    paired = {c.metric: c for c in compare_family(base, new, settings.min_effect) if c.slice == family.OVERALL}
    tiles = []
    for metric in metrics:
        ra, rb = (s.get(metric, {}) for s in summaries)
        tiles.append(
            Tile(
                metric,
                label_of(metric),
                scale_of(metric),
                higher_is_better(metric),
                ra.get("mean"),
                ra.get("n", 0),
                rb.get("mean"),
                rb.get("n", 0),
                _not_comparable(metric, a, b),
                paired.get(metric),
            )
        )
    return tiles


def _changes(
    db: Database, a: Side, b: Side, metrics: list[str], shared: list[str], matched: dict[str, str]
) -> list[ItemChange]:
    rows_a = {r["item_id"]: r for r in evals.item_results(db, a.run.id, metrics)}
    rows_b = in_terms_of_a({r["item_id"]: r for r in evals.item_results(db, b.run.id, metrics)}, matched)
    changes = []
    for metric in metrics:
        up = higher_is_better(metric)
        for item in shared:
            va, vb = rows_a[item].get(metric), rows_b[item].get(metric)
            if va is None or vb is None or va == vb:
                continue
            changes.append(
                ItemChange(
                    item,
                    rows_b[item]["question"],
                    metric,
                    va,
                    vb,
                    rows_a[item]["run_id"],
                    rows_b[item]["run_id"],
                    worse=(vb < va) == up,
                )
            )
    return sorted(changes, key=lambda c: (metrics.index(c.metric), -abs(c.delta), c.item_id))


def compare_runs(settings: Settings, db: Database, a_name: str, b_name: str) -> RunComparison:
    """Run A against run B; the metrics are the registry's, in its order, that either run scored."""
    a, b = _side(settings, db, a_name, "A"), _side(settings, db, b_name, "B")
    if a.run.id == b.run.id:
        raise InputError(f"A and B are both {a_name!r}", fix="choose two different evaluation runs")
    scored = {r["metric"] for side in (a, b) for r in evals.metric_summary(db, side.run.id)}
    metrics = [m for m in metric_names() if m in scored] + sorted(scored - set(metric_names()))
    items_a, items_b = (set(evals.item_statuses(db, s.run.id)) for s in (a, b))
    matched = matched_items(db, a.run.id, b.run.id)
    shared = sorted(set(matched.values()))
    compared = [m for m in metrics if _not_comparable(m, a, b) is None]
    changes = _changes(db, a, b, compared, shared, matched)
    return RunComparison(
        a,
        b,
        _tiles(settings, db, a, b, metrics, matched),
        changes,
        shared,
        sorted(items_a - set(matched.values())),
        sorted(items_b - set(matched)),
        _worse_first(item_pairs(settings, db, a.item_usage, b.item_usage, b.run.id, matched), changes),
    )


def answers_of(db: Database, pair: ItemPair) -> tuple[AnswerResult | None, AnswerResult | None]:
    """Both runs' answers to the paired item, with their claims (None where a run is gone or the item failed)."""
    return tuple(load_result(db, run_id) if run_id is not None else None for run_id in (pair.a_run_id, pair.b_run_id))


def answers(db: Database, change: ItemChange) -> tuple[AnswerResult | None, AnswerResult | None]:
    """Both runs' answers to the item, with their claims (None where a run is gone or the item failed)."""
    return tuple(
        load_result(db, run_id) if run_id is not None else None for run_id in (change.a_run_id, change.b_run_id)
    )
