"""What a synthesis job did, from its stored candidates: written, dropped per gate with the reasons, kept per kind,
and what it cost."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from pipeline.evaluation.synth.gates import GATES
from pipeline.evaluation.synth.kinds import KINDS
from store.synth import KEPT, CandidateRow


@dataclass
class Drop:
    position: int
    kind: str
    gate: str
    reason: str
    question: str | None


@dataclass
class SynthProgress:
    """Where a job stands, after each candidate it writes."""

    total: int
    written: int = 0
    kept: int = 0
    calls: int = 0  # model calls made (cache hits not counted)
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    already: int = 0  # written before this run (a resumed job)
    notes: list[str] = field(default_factory=list)  # what the job is: new (from how many documents) or resumed

    @property
    def dropped(self) -> int:
        return self.written - self.kept

    def add(self, row: CandidateRow) -> None:
        self.written += 1
        self.kept += row.status == KEPT
        self.calls += row.calls
        self.cache_hits += row.cache_hits
        self.prompt_tokens += row.prompt_tokens
        self.completion_tokens += row.completion_tokens


@dataclass
class SynthReport:
    name: str
    version: int | None  # the dataset version the kept questions were saved as; None when none was kept
    previous_version: int | None  # the dataset's latest version before this job (None: a new name)
    job_id: int
    resumed: int  # candidates written before this run, by an earlier run of the same job (0: a fresh job)
    planned: int
    requested: dict[str, int]  # candidates planned per kind
    written: int
    kept: int
    kept_per_kind: dict[str, int]
    dropped_per_gate: dict[str, int]
    rewritten: int  # kept after a rewrite (a leading "according to the passage" removed)
    drops: list[Drop] = field(default_factory=list)
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        return self.written - self.kept

    def as_json(self) -> dict:
        out = asdict(self)
        out["dropped"] = self.dropped
        return out


def build(
    name: str,
    job_id: int,
    rows: list[CandidateRow],
    planned_kinds: list[str],
    version: int | None,
    previous_version: int | None,
    resumed: int,
    notes: list[str],
) -> SynthReport:
    kept = [r for r in rows if r.status == KEPT]
    dropped = [r for r in rows if r.status != KEPT]
    per_gate = Counter(r.gate for r in dropped)
    requested = Counter(planned_kinds)
    made = SynthProgress(len(planned_kinds))
    for row in rows:
        made.add(row)
    return SynthReport(
        name=name,
        version=version,
        previous_version=previous_version,
        job_id=job_id,
        resumed=resumed,
        planned=len(planned_kinds),
        requested={k: requested[k] for k in KINDS if requested[k]},
        written=len(rows),
        kept=len(kept),
        kept_per_kind={k: sum(r.kind == k for r in kept) for k in KINDS if requested[k]},
        dropped_per_gate={g: per_gate[g] for g in GATES if per_gate[g]},
        rewritten=sum(r.gate == "source" for r in kept),
        drops=[Drop(r.position, r.kind, r.gate, r.reason, r.question) for r in dropped],
        calls=made.calls,
        cache_hits=made.cache_hits,
        prompt_tokens=made.prompt_tokens,
        completion_tokens=made.completion_tokens,
        notes=notes,
    )
