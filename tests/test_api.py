"""The Python API: verdicts for an answer written by the user's own code, and a LlamaIndex response evaluator in a
query engine the user built with llama-index's own classes; both log imported runs that appear on Runs."""

import pytest

from pipeline.api import WorkbenchEvaluator, check_answer
from pipeline.errors import InputError
from pipeline.history.runs import load_result
from store.history import RunFilter, find_runs

TOWER = "The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair in Paris."
INVENTED = "It was painted bright green by a travelling circus from Lisbon."


def imported_runs(db):
    return find_runs(db, RunFilter(kinds=["imported"])).rows


def test_check_answer_returns_claims_with_verdicts_evidence_and_score_and_logs_the_run(fake, settings, db):
    answer = f"The Eiffel Tower is 330 metres tall. {INVENTED}"
    checked = check_answer(
        "How tall is the Eiffel Tower?",
        answer,
        [{"text": TOWER, "source": "tower.md", "score": 0.8}, "Paris is the capital of France."],
        pipeline="my-rag",
        settings=settings,
    )
    assert checked.status == "flagged" and checked.faithfulness == 0.5 and checked.passing is False
    supported, invented = checked.claims
    assert (supported.text, supported.verdict, supported.context, supported.source) == (
        "The Eiffel Tower is 330 metres tall.",
        "supported",
        1,
        "tower.md",
    )
    start, end = supported.evidence_span
    assert TOWER[start:end] == supported.evidence and "330 metres" in supported.evidence
    assert answer[slice(*supported.answer_span)] == "The Eiffel Tower is 330 metres tall."
    assert invented.verdict in ("unsupported", "contradicted") and invented.evidence is None
    rows = imported_runs(db)
    assert [r["id"] for r in rows] == [checked.run_id]
    stored = load_result(db, checked.run_id)
    assert stored.kind == "imported" and stored.pipeline == "my-rag"
    assert [c.verdict for c in stored.final_claims] == [c.verdict for c in checked.claims]
    assert [p.text for p in stored.passages] == [TOWER, "Paris is the capital of France."]


def test_check_answer_without_contexts_is_not_scored_and_bad_input_is_refused(fake, settings, db):
    checked = check_answer("How tall is the Eiffel Tower?", "It is 330 metres tall.", [], settings=settings)
    assert checked.status == "no_contexts" and checked.faithfulness is None and checked.passing is None
    with pytest.raises(InputError, match="the answer is empty"):
        check_answer("Q?", "  ", ["x"], settings=settings)
    with pytest.raises(InputError, match="a context is a int"):
        check_answer("Q?", "An answer.", [3], settings=settings)


def test_a_users_own_llamaindex_query_engine_is_evaluated_and_its_runs_appear_on_runs(fake, settings, db):
    from llama_index.core import Document, PromptTemplate, VectorStoreIndex
    from llama_index.embeddings.ollama import OllamaEmbedding
    from llama_index.llms.ollama import Ollama

    documents = [
        Document(text=TOWER, metadata={"file_name": "tower.md"}),
        Document(
            text="The Golden Gate Bridge opened in 1937. Its main span is 1,280 metres long.",
            metadata={"file_name": "bridge.md"},
        ),
    ]
    embed = OllamaEmbedding(model_name="nomic-embed-text", base_url=fake.url)
    llm = Ollama(model="llama3.2", base_url=fake.url, request_timeout=30, context_window=4096)
    template = PromptTemplate("Answer from the context only.\nContext:\n{context_str}\nQuestion: {query_str}\nAnswer:")
    engine = VectorStoreIndex.from_documents(documents, embed_model=embed).as_query_engine(
        llm=llm, similarity_top_k=2, text_qa_template=template
    )
    evaluator = WorkbenchEvaluator(pipeline="users-llamaindex-app", settings=settings)

    questions = ["How tall is the Eiffel Tower?", "When did the Golden Gate Bridge open?"]
    results = [evaluator.evaluate_response(query=q, response=engine.query(q)) for q in questions]

    assert all(r.score is not None or r.invalid_result for r in results)
    rows = imported_runs(db)
    assert len(rows) == 2 and {load_result(db, r["id"]).pipeline for r in rows} == {"users-llamaindex-app"}
    assert {r["question"] for r in rows} == set(questions)
    for row in rows:
        run = load_result(db, row["id"])
        assert run.final_claims and any(c.verdict == "supported" for c in run.final_claims)
        assert {p.source for p in run.passages} == {"tower.md", "bridge.md"}  # the engine's source nodes
    assert evaluator.last is not None and evaluator.last.run_id == max(r["id"] for r in rows)
