"""Golden sets written from the user's own knowledge base (`python -m pipeline synth`).

sampling.py chooses the chunks (stratified over documents), prompts.py holds the prompts that write a question of
each kind, candidate.py writes one candidate and passes it through gates.py, run.py runs a job (resumable) and saves
what was kept as a dataset version, report.py says what happened.
"""

from pipeline.evaluation.synth.kinds import DEFAULT_SHARES, KINDS, allocate, default_shares_text, parse_shares
from pipeline.evaluation.synth.report import SynthProgress, SynthReport
from pipeline.evaluation.synth.run import run_synth

__all__ = [
    "DEFAULT_SHARES",
    "KINDS",
    "SynthProgress",
    "SynthReport",
    "allocate",
    "default_shares_text",
    "parse_shares",
    "run_synth",
]
