"""The judge's rubric prompts, one per criterion, with their versions (pipeline/evaluation/judge.py sends them;
each judge_<criterion> metric in metrics/judge_criteria.py declares its own)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from pipeline.prompting import DATA_RULE, Prompt


class JudgeVerdict(BaseModel):
    reasoning: str = Field(description="two or three sentences that justify the score")
    score: int = Field(ge=1, le=5)


RUBRICS = {
    "correctness": (
        "Correctness: is the answer factually right? Compare it with the reference answer when one is given, "
        "otherwise with the context.",
        {
            5: "fully correct: every key fact agrees with the reference (or the context) and nothing is wrong",
            4: "correct on the main point; a minor omission or imprecision, but no false statement",
            3: "partly correct: some key facts right, others missing, or one minor error",
            2: "mostly incorrect: the main point is wrong or a key fact contradicts the reference",
            1: "wrong or off-topic; or it answers confidently where the reference says the knowledge base does "
            "not cover the question",
        },
    ),
    "helpfulness": (
        "Helpfulness: does the answer give the user what they asked for, clearly and without filler?",
        {
            5: "directly and completely answers the question, clear and concise",
            4: "answers the question with small gaps or some unnecessary text",
            3: "partly answers; the user must look elsewhere for part of it (an honest 'the knowledge base does "
            "not cover this' when that is true also scores 3)",
            2: "barely addresses the question",
            1: "does not address the question, or refuses for no reason",
        },
    ),
    "faithfulness": (
        "Faithfulness: is every statement of the answer supported by the context? Judge only support by the "
        "context, not truth in the world.",
        {
            5: "every statement is supported by the context (an abstention also scores 5)",
            4: "all substantive statements supported; one trivial detail is not in the context",
            3: "mostly supported, but one substantive statement is not in the context",
            2: "several statements are not supported, or one contradicts the context",
            1: "largely unsupported by the context, or contradicts it",
        },
    ),
    "grounding": (
        "Grounding: can the answer, taken as a whole, be traced to the context passages it was given? For what "
        "the answer says, could a reader find the passage it comes from: are its names, numbers and facts taken "
        "from the passages, and do its citations like [1] point to the passages that state them? Judge the whole "
        "answer at once, not claim by claim, and judge traceability only: not whether the answer is true, "
        "complete or on topic. Unlike faithfulness (does the context support each statement, or contradict it), "
        "grounding asks where the answer's content comes from: an answer drawn from general knowledge, or whose "
        "citations point to passages that do not hold what it says, is poorly grounded even when nothing in it "
        "contradicts the context.",
        {
            5: "fully traceable: every statement can be found in a passage and every citation points to a passage "
            "that states it; nothing comes from outside the context (an answer that only says the knowledge base "
            "does not cover the question also scores 5)",
            4: "traceable as a whole; one minor detail cannot be found in the passages, or one citation points to "
            "the wrong passage",
            3: "partly traceable: the main point can be found in the passages, but a substantive part of the answer "
            "cannot, or several citations point to passages that do not state what is cited",
            2: "mostly untraceable: only a small part of the answer can be found in the passages; the rest comes "
            "from elsewhere",
            1: "not traceable: the answer does not draw on the passages (general knowledge, or other material), or "
            "its citations are missing or wrong throughout",
        },
    ),
    "topicality": (
        "Topicality: does the answer stay on the question's topic and address what was asked: the same subject, "
        "the same thing about it, and the kind of information asked for (a number, a date, a name, a reason)? "
        "Judge only whether it is on topic, not whether it is correct, complete or supported by the context. "
        "Shared words are not enough, unlike a similarity between the question and the answer: an answer about "
        "the question's subject that answers a different question about it (another figure, another model, "
        "another year) is off topic; an answer in other words that addresses the question is on topic.",
        {
            5: "addresses exactly what was asked and stays on it throughout",
            4: "addresses what was asked; some sentences drift to related material that was not asked for",
            3: "partly on topic: answers a neighbouring question (a related entity or another figure of the same "
            "subject) or only part of the question; an answer that only says the knowledge base does not cover the "
            "question also scores 3 (it stays on the question but does not address it)",
            2: "on the question's general subject, but does not address what was asked",
            1: "about something else, or ignores the question",
        },
    ),
}
# Criteria of a conversation's turns: judged on what the turn was asked with (the earlier turns and the standalone
# question retrieval used), not on the answer. They are metrics like the others, but not rated by people (Annotate and
# Calibration rate CRITERIA = RUBRICS), since a rating form shows one answer, not a conversation.
TURN_RUBRICS = {
    "question_rewrite": (
        "Question rewrite: a follow-up question in a conversation was rewritten into a standalone question before "
        "the search for passages. Given the earlier turns, does the standalone question keep the user's meaning? "
        "It should ask exactly what the user asked, with every reference to an earlier turn (it, they, that one, "
        "what about ...) replaced by what it refers to, and nothing added, dropped or changed. Judge only the "
        "rewrite, not the answer, and not whether the question is a good one.",
        {
            5: "same meaning: asks exactly what the user asked, every reference resolved to what the earlier turns "
            "name, nothing added or dropped",
            4: "same meaning; a small loss of nuance or an unneeded word, that would not change what is retrieved",
            3: "partly kept: the main ask is there, but a reference is left unresolved or resolved vaguely, or a "
            "qualifier (a time, a quantity, a comparison) is dropped or added",
            2: "changed: a reference is resolved to the wrong thing, or the question asks something else about the "
            "right subject",
            1: "a different question: another subject or another ask, or a rewrite that ignores the conversation",
        },
    ),
}
JUDGE_PROMPT_VERSION = "judge-v1"
# Each criterion's prompt version: the first three share judge-v1 (their pins and trend series predate the others);
# a criterion added later carries its own, so adding or revising one never changes another's.
JUDGE_PROMPT_VERSIONS = {
    "correctness": JUDGE_PROMPT_VERSION,
    "helpfulness": JUDGE_PROMPT_VERSION,
    "faithfulness": JUDGE_PROMPT_VERSION,
    "grounding": "judge-grounding-v1",
    "topicality": "judge-topicality-v1",
    "question_rewrite": "judge-question-rewrite-v1",
}


def judge_prompt(criterion: str, corrections: tuple[str, ...] = (), clarification: str = "") -> Prompt:
    """The rubric prompt; `corrections` are people's past corrections of this judge (or an aligned version's rated
    answers), as worked examples; `clarification`, an aligned version's clarification of the rubric, follows the
    rubric's own text (which stays the system text's opening, so the prompt is still known by it)."""
    description, anchors = {**RUBRICS, **TURN_RUBRICS}[criterion]
    levels = "\n".join(f"{score}: {text}" for score, text in sorted(anchors.items(), reverse=True))
    return Prompt(
        name=f"judge_{criterion}",
        version=JUDGE_PROMPT_VERSIONS[criterion],
        output=JudgeVerdict,
        examples=corrections,
        system=(
            "You are an impartial evaluator of answers from a question-answering system. "
            + description
            + "\n\nScore from 1 to 5:\n"
            + levels
            + "\n\nJudge content, not length or style. "
            + DATA_RULE
            + " Reply with JSON: first your reasoning, then the score."
            + (
                f"\n\nWhat people who rated this criterion reward or punish, beyond the rubric: {clarification}"
                if clarification
                else ""
            )
        ),
    )


def correction_example(correction) -> str:
    """A person's correction of an earlier judgement, phrased as an example to follow."""
    judged = f" (the judge had said {correction.judge_score})" if correction.judge_score else ""
    return (
        f"Question: {correction.question}\nAnswer excerpt: {correction.answer_excerpt}\n"
        f"Correct score: {correction.human_score}{judged}. Why: {correction.why}"
    )


def aligned_example(example: dict) -> str:
    """A rated answer of an aligned version's few-shot set, as an example to follow."""
    return (
        f"Question: {example['question']}\nAnswer excerpt: {example['answer_excerpt']}\n"
        f"Score people gave: {example['human_score']}."
    )


def judge_input(question: str, answer: str, context: str, reference: str | None) -> str:
    reference_block = f"Reference:\n{reference}\n\n" if reference else ""
    return f"Question: {question}\n\n{reference_block}Context:\n{context}\n\nAnswer:\n{answer}"


def rewrite_input(history: str, question: str, standalone: str) -> str:
    """The question_rewrite criterion's input: the earlier turns, the question as asked, the standalone question."""
    return f"Earlier turns:\n{history or '(none)'}\n\nQuestion: {question}\n\nStandalone question: {standalone}"
