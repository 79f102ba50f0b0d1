"""The kinds of question `synth` writes, their default shares, and how a number of candidates is shared out."""

from __future__ import annotations

from pipeline.errors import InputError

# Each kind tests another behaviour of the system under test: answering from one passage (fact), joining two
# documents through what they share (multi_hop), reading a figure exactly (numeric), setting two things side by side
# (comparison), abstaining when the knowledge base has no answer (negative), and correcting a wrong assumption
# instead of answering along with it (false_premise).
KINDS = ("fact", "multi_hop", "numeric", "comparison", "negative", "false_premise")
DEFAULT_SHARES = {
    "fact": 0.3,
    "multi_hop": 0.2,
    "numeric": 0.15,
    "comparison": 0.1,
    "negative": 0.15,
    "false_premise": 0.1,
}
PAIRED = ("multi_hop", "comparison")  # written from two chunks of different documents
KIND_TEXT = {
    "fact": "single-passage facts",
    "multi_hop": "multi-hop (two documents that share an entity)",
    "numeric": "numeric",
    "comparison": "comparisons",
    "negative": "negatives (the knowledge base cannot answer: tests abstention)",
    "false_premise": "false premises",
}


def default_shares_text() -> str:
    return ",".join(f"{kind}={share:g}" for kind, share in DEFAULT_SHARES.items())


def parse_shares(text: str | None) -> dict[str, float]:
    """`fact=0.3,multi_hop=0.2,...` -> {kind: share}, normalised to sum to 1; kinds left out get none. InputError for
    an unknown kind, a share that is not a number or is negative, or shares that add up to nothing."""
    if text is None or not text.strip():
        return dict(DEFAULT_SHARES)
    shares: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, sign, value = (s.strip() for s in part.partition("="))
        if kind not in KINDS:
            raise InputError(f"{kind!r} is not a kind of question synth writes", fix=f"use {', '.join(KINDS)}")
        try:
            share = float(value) if sign else float("nan")
        except ValueError:
            share = float("nan")
        if not share >= 0:
            raise InputError(
                f"the share of {kind} ({value or 'missing'!s}) is not a number of 0 or more",
                fix=f"write kind=share pairs, e.g. {default_shares_text()}",
            )
        shares[kind] = shares.get(kind, 0.0) + share
    total = sum(shares.values())
    if total <= 0:
        raise InputError("the shares add up to nothing", fix="give at least one kind a share, e.g. fact=1")
    return {kind: shares[kind] / total for kind in KINDS if shares.get(kind, 0) > 0}


def allocate(n: int, shares: dict[str, float]) -> dict[str, int]:
    """How many of `n` candidates each kind gets: its share of n, rounded by largest remainder; every kind with a
    share gets at least one when n allows."""
    kinds = [k for k in KINDS if shares.get(k, 0) > 0]
    exact = {k: n * shares[k] for k in kinds}
    counts = {k: int(exact[k]) for k in kinds}
    for kind in sorted(kinds, key=lambda k: (-(exact[k] - counts[k]), KINDS.index(k)))[: n - sum(counts.values())]:
        counts[kind] += 1
    if n >= len(kinds):  # a kind asked for gets at least one, from the kind with the most
        for kind in kinds:
            if counts[kind] == 0:
                donor = max(kinds, key=lambda k: counts[k])
                counts[donor] -= 1
                counts[kind] = 1
    return counts
