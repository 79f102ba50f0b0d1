"""The metrics the online worker scores on a verified trace besides its claims (`collect_metrics`): the judge's
criteria or any registered metric, each with the evaluation's judge pin (model, digest, prompt version and
people's corrections), scored as an evaluation item with no reference would be."""

from __future__ import annotations

from pipeline.answering.events import AnswerResult
from pipeline.collect.assemble import TracedRequest
from pipeline.config import Settings
from pipeline.evaluation import registry
from pipeline.evaluation.dataset import GoldenItem
from pipeline.evaluation.registry import MetricInput, evaluation_config
from pipeline.evaluation.runner import evaluation_pin


def chosen(settings: Settings) -> list[str]:
    """The names in collect_metrics, checked against the registry."""
    return list(registry.named_metrics(settings.collect_metrics, "collect_metrics"))


class OnlineMetrics:
    def __init__(self, settings: Settings, db):
        self.settings, self.db = settings, db
        self.names = chosen(settings)
        self._pin = None

    def pin(self):
        if self._pin is None:  # once per worker: the judge model's digest and people's current corrections
            self._pin = evaluation_pin(self.settings, self.db)
        return self._pin

    def scores(self, llm, request: TracedRequest, result: AnswerResult) -> list:
        item = GoldenItem(id=f"trace-{request.trace_id}", question=request.question or "")
        inputs = MetricInput(llm, self.settings, item, result, self.pin())
        return [registry.get_metric(name).measure(inputs) for name in self.names]

    def config(self) -> dict:
        return evaluation_config(self.settings, self.names)
