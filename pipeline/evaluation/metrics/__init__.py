"""The metrics, one module per group; each registers its metrics with @register_metric
(pipeline.evaluation.registry imports every module here), declaring the prompts it sends (defined in the same
module) and the settings its scores depend on. A new metric is a new module here.

- faithfulness (generator) and answer relevancy (generator/prompt): generator.py;
- context precision (retriever ranking) and context recall (retriever/chunking): retriever.py;
- the judge's criteria on 1-5 (judge): judge_criteria.py.
"""

from pipeline.evaluation.metrics.generator import NOT_APPLICABLE, answer_relevancy, faithfulness
from pipeline.evaluation.metrics.retriever import average_precision, context_precision, context_recall

__all__ = [
    "NOT_APPLICABLE",
    "answer_relevancy",
    "average_precision",
    "context_precision",
    "context_recall",
    "faithfulness",
]
