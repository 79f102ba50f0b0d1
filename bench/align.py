"""`python -m bench align`: does judge alignment keep a prompt only when it agrees better with people on answers it
did not learn from? Simulated data sets run through the real procedure (pipeline/calibration/alignment.py) with
a scripted judge in place of the model.

- A biased judge: it scores a short answer one point above what it deserves, and misjudges 20% of items by one
  point either way (--noise), drawn again for every prompt, as a real judge's errors move with its prompt. A
  clarification that names short answers removes the bias; a few-shot set with two or more short answers people
  scored below the judge removes it on half the items. The clarification writer names whichever of short or long
  answers the disagreements it is shown over-score most.
- A noise judge: the same noise and no bias; nothing can help it.

Each data set has 40 rated answers (20 questions, 2 answers each). The true gain of the kept prompt is its kappa
minus the current prompt's on 4,000 fresh answers from the same population.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from bench.common import Figure, print_table
from pipeline.calibration.alignment import Candidate, MemoryMemo, Procedure, RatedItem, kappa

DATASETS = 200
QUESTIONS, PER_QUESTION = 20, 2
POPULATION = 4000
HUMAN_P = [0.1, 0.2, 0.3, 0.25, 0.15]  # people's scores 1-5
NOISE = 0.2  # share of items the judge misjudges by one point either way
SHORT_CLARIFICATION = "People score short answers lower than the judge does: a short answer earns no extra credit."
LONG_CLARIFICATION = "People score long answers lower than the judge does: a long answer earns no extra credit."


def draw_items(rng, questions: int, prefix: str) -> list[RatedItem]:
    items = []
    for q in range(questions):
        for a in range(PER_QUESTION):
            short = bool(rng.random() < 0.5)
            items.append(
                RatedItem(
                    f"{prefix}q{q}a{a}",
                    f"{prefix}q{q}",
                    int(rng.choice(5, p=HUMAN_P)) + 1,
                    answer="short" if short else "long",
                )
            )
    return items


class ScriptedJudge:
    """The judge and the clarification writer of a simulated data set."""

    def __init__(self, biased: bool, salt: str):
        self.biased, self.salt = biased, salt
        self.by_id: dict[str, RatedItem] = {}

    def _unit(self, *parts) -> float:
        digest = hashlib.sha256("/".join(map(str, (self.salt, *parts))).encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def _bias_on(self, candidate: Candidate, item: RatedItem) -> bool:
        if not self.biased or item.answer != "short" or "short answers" in candidate.clarification:
            return False
        shots = [self.by_id[i] for i in candidate.shots]
        teaching = sum(1 for s in shots if s.answer == "short" and self.current(s) > s.human)
        return not (teaching >= 2 and self._unit("shots", candidate.key(), item.id) < 0.5)

    def judged(self, candidate: Candidate, item: RatedItem) -> float:
        u = self._unit(candidate.key(), item.id)
        noise = -1 if u < NOISE / 2 else (1 if u < NOISE else 0)
        return float(np.clip(item.human + noise + self._bias_on(candidate, item), 1, 5))

    def current(self, item: RatedItem) -> float:
        return self.judged(Candidate("current"), item)

    def score(self, candidate: Candidate, items) -> list[float | None]:
        self.by_id.update({it.id: it for it in items})
        return [self.judged(candidate, it) for it in items]

    def clarify(self, pairs) -> str:
        over = {kind: [j - it.human for it, j in pairs if it.answer == kind] for kind in ("short", "long")}
        mean = {kind: np.mean(v) if v else -np.inf for kind, v in over.items()}
        return SHORT_CLARIFICATION if mean["short"] >= mean["long"] else LONG_CLARIFICATION


def simulate(biased: bool, seed: int) -> dict:
    rng = np.random.default_rng([seed, biased])
    items = draw_items(rng, QUESTIONS, "")
    judge = ScriptedJudge(biased, f"{biased}-{seed}")
    judge.by_id.update({it.id: it for it in items})
    result = Procedure(judge, MemoryMemo()).run(items, seed=seed)
    population = draw_items(rng, POPULATION // PER_QUESTION, "p")
    humans = [it.human for it in population]
    final = result.final if result.final.recipe != "current" else Candidate("current")
    true_gain = kappa([judge.judged(final, it) for it in population], humans) - kappa(
        [judge.current(it) for it in population], humans
    )
    covered = result.gain_low is not None and result.gain_low <= true_gain <= result.gain_high
    return {"accepted": result.accepted, "covered": covered, "gain": result.gain, "true_gain": true_gain}


def rate(hits: int, n: int) -> dict:
    low, high = proportion_confint(hits, n, alpha=0.05, method="wilson")
    return {"rate": round(hits / n, 4), "wilson_95": [round(float(low), 4), round(float(high), 4)], "n": n}


def measure(datasets: int = DATASETS) -> dict:
    start = time.perf_counter()
    biased = [simulate(True, s) for s in range(datasets)]
    noise = [simulate(False, s) for s in range(datasets)]
    return {
        "datasets": datasets,
        "items": QUESTIONS * PER_QUESTION,
        "noise": NOISE,
        "biased_accept_rate": rate(sum(r["accepted"] for r in biased), datasets),
        "gain_coverage": rate(sum(r["covered"] for r in biased), datasets),
        "noise_accept_rate": rate(sum(r["accepted"] for r in noise), datasets),
        "mean_true_gain_biased": round(float(np.mean([r["true_gain"] for r in biased])), 4),
        "mean_reported_gain_biased": round(float(np.mean([r["gain"] for r in biased])), 4),
        "seconds": round(time.perf_counter() - start, 1),
    }


def figures(found: dict) -> list[Figure]:
    def note(key):
        low, high = found[key]["wilson_95"]
        return f"Wilson 95% [{100 * low:.1f}, {100 * high:.1f}] of {found[key]['n']} data sets"

    return [
        Figure("align: biased judge, aligned prompt accepted", 100 * found["biased_accept_rate"]["rate"], "%", 80,
               False, note("biased_accept_rate")),
        Figure("align: reported held-out gain's interval covers the true gain",
               100 * found["gain_coverage"]["rate"], "%", 90, False, note("gain_coverage")),
        Figure("align: noise judge, a prompt accepted", 100 * found["noise_accept_rate"]["rate"], "%", 5, True,
               note("noise_accept_rate")),
    ]  # fmt: skip


def run(datasets: int = DATASETS) -> list[Figure]:
    return figures(measure(datasets))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench align", description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", type=int, default=DATASETS, help=f"simulated data sets (default {DATASETS})")
    parser.add_argument("--noise", type=float, default=NOISE, help=f"share of items misjudged by ±1 (default {NOISE})")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    sys.modules[__name__].NOISE = args.noise
    found = measure(args.datasets)
    if args.json:
        json.dump(found, sys.stdout, indent=2)
        print()
    else:
        print_table(figures(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
