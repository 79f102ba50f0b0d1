"""The rule brain: deterministic replies to each kind of task, each a function of the prompt text alone.

Which function answers a request is decided by the registered prompt it was built from (rules.py), never here."""

import hashlib
import json
import re

from .text import (
    _CITATION,
    _TOKEN,
    LABELS,
    _blocks,
    _context,
    _line_value,
    _section,
    _split_last_claim,
    _squash,
    content_words,
    is_number,
    sentences,
)

NO_ANSWER = "The knowledge base does not cover this question."
ANSWER_STYLES = ("quote", "paraphrase")
PARAPHRASE_SENTENCES = 3  # a paraphrased answer's sentences, each joining two context sentences
ATTRIBUTION = "According to the sources, "
# function words swapped to reword a sentence: all stopwords, so content-word overlap is unchanged
_REWORDINGS = {"the": "this", "this": "the", "is": "was", "was": "is", "are": "were", "were": "are", "a": "the"}
_FABRICATED_NAMES = ("Smith", "Okafor", "Lindqvist", "Tanaka", "Moreau", "Kowalski")
_CLAIM_JOINT = re.compile(r",\s+and\s+|;\s+")


def verify(prompt):
    """MiniCheck-style verdict "Yes"/"No" for a "Document: ...\\nClaim: ..." prompt."""
    before, claim = _split_last_claim(prompt)
    if claim is None:
        return "No"
    document = set(content_words(_section(before, "Document") or ""))
    words = set(content_words(claim))
    numbers = {w for w in words if is_number(w)}
    others = words - numbers
    supported = numbers <= document and len(others & document) >= 0.8 * len(others)
    return "Yes" if supported else "No"


def _ranked_sentences(prompt):
    """[(sentence, passage n)] of the context, best question overlap first, sentences without overlap left out."""
    question = set(content_words(_line_value(prompt, "Question")))
    ranked = {}
    for n, block in _blocks(_context(prompt)):
        for sentence in map(_squash, sentences(block)):
            overlap = len(question & set(content_words(sentence)))
            if overlap and sentence not in ranked:
                ranked[sentence] = (-overlap, len(ranked), n)
    return [(s, n) for s, (_, _, n) in sorted(ranked.items(), key=lambda item: item[1])]


def answer(prompt, n_sentences=2):
    """Extractive RAG answer: the `n_sentences` context sentences that best overlap the question, cited."""
    best = _ranked_sentences(prompt)[:n_sentences]
    return " ".join(f"{s} [{n}]" for s, n in best) or NO_ANSWER


def reword(sentence):
    """`sentence` reworded without touching its content words: its first function word swapped for another
    (else "also" put after its first word), a capitalised first word lowered, the end mark dropped."""
    words = sentence.rstrip(".!?").split()
    swap = next((i for i, w in enumerate(words) if w.lower() in _REWORDINGS), None)
    if swap is None:
        words.insert(1, "also")
    else:
        words[swap] = _REWORDINGS[words[swap].lower()]
    first = words[0]
    if first[:1].isupper() and first[1:2].islower():
        words[0] = first[0].lower() + first[1:]
    return " ".join(words)


def fabricated(context, n, count=2):
    """`count` sentences citing passage `n`, each with a year and a name found nowhere in `context`."""
    present = set(_TOKEN.findall(context.lower()))
    years = [y for y in range(1971, 2000) if str(y) not in present]
    names = [m for m in _FABRICATED_NAMES if m.lower() not in present]
    templates = ("It was first described in {} by {} [{}].", "{1} reported a 41.7 percent gain with it in {0} [{2}].")
    return [templates[i % 2].format(years[i], names[i % len(names)], n) for i in range(count)]


def paraphrase(prompt, fabricate=False):
    """Abstractive RAG answer: `PARAPHRASE_SENTENCES` sentences, each joining two reworded context
    sentences (best question overlap first) after an attribution, cited; with `fabricate`, at least two
    more sentences whose years and names the context does not hold, enough to bring the share of
    supported claims below 0.8."""
    best = _ranked_sentences(prompt)[: 2 * PARAPHRASE_SENTENCES]
    if not best:
        return NO_ANSWER
    out = []
    for pair in (best[i : i + 2] for i in range(0, len(best), 2)):
        cites = "".join(f"[{n}]" for n in dict.fromkeys(n for _, n in pair))
        out.append(f"{ATTRIBUTION}{', and '.join(reword(s) for s, _ in pair)} {cites}.")
    if fabricate:
        supported = sum(len(split_claim(_CITATION.sub("", s))) for s in out)
        out += fabricated(_context(prompt), best[0][1], max(2, supported // 4 + 1))
    return " ".join(out)


def split_claim(text):
    """A sentence as claims: split at ", and " or "; " where both sides have 3 or more words, a leading
    attribution dropped, each claim capitalised and ending in a full stop."""
    for joint in _CLAIM_JOINT.finditer(text):
        left, right = text[: joint.start()], text[joint.end() :]
        if len(left.split()) >= 3 and len(right.split()) >= 3:
            return split_claim(left) + split_claim(right)
    if text.lower().startswith(ATTRIBUTION.lower()):
        text = text[len(ATTRIBUTION) :]
    text = text.rstrip(" .!?")
    return [text[:1].upper() + text[1:] + "."]


def extract_claims(prompt, split=False):
    """{"claims"}: sentences of the text after the "Answer:" line (up to the examples or task after it, if any),
    citations removed; with `split`, each sentence is split into claims by `split_claim`."""
    text = _CITATION.sub("", _section(prompt, "Answer", ("Examples", "Task")) or "")
    if text.startswith("The knowledge base does not cover"):
        return {"claims": []}
    claims = [_squash(s) for s in sentences(text) if len(s.split()) >= 3]
    return {"claims": [c for s in claims for c in split_claim(s)] if split else claims}


def judge_relevance(prompt):
    """{"relevant", "reason", "passages"}: at least half the question terms occur in the context; the passages
    listed are those holding at least a quarter of them (and one at least)."""
    question = set(content_words(_line_value(prompt, "Question")))
    context = _context(prompt)
    found = len(question & set(content_words(context)))
    need = max(1, len(question) / 4)
    return {
        "relevant": bool(question) and found >= 0.5 * len(question),
        "reason": f"{found} of {len(question)} question terms found in the context",
        "passages": [n for n, block in _blocks(context) if len(question & set(content_words(block))) >= need],
    }


def rewrite_query(prompt):
    """{"query"}: the question's distinct content words."""
    words = dict.fromkeys(content_words(_line_value(prompt, "Question")))
    return {"query": " ".join(words)}


_TURN_QUESTION = re.compile(r"^\s*Turn \d+ question:\s*(.+?)\s*$", re.M)
_REFERENCES = {w: "{}" for w in "it they them this that these those he she him her".split()}
_REFERENCES.update({"its": "{}'s", "their": "{}'s", "his": "{}'s"})
_REFERENCE = re.compile(r"\b(" + "|".join(sorted(_REFERENCES, key=len, reverse=True)) + r")\b", re.I)
_WHAT_ABOUT = re.compile(r"^\s*(?:and\s+)?(?:what|how)\s+about\s+(.+?)[?.!]*\s*$", re.I)
_NAMED = re.compile(r"\b(?:the|a|an)\s+(?:[A-Z][\w-]*)(?:\s+[A-Z][\w-]*)*")


def main_subject(question):
    """The main subject of a question: its first determiner with the capitalised words after it ("the Transformer"
    of "Who introduced the Transformer?"), else its first run of capitalised words after the first word ("BERT"
    of "Who introduced BERT?"), else "the" and the word after it, else its content words."""
    named = _NAMED.search(question)
    if named:
        return named.group(0)
    words = question.rstrip("?.! ").split()
    for i, word in enumerate(words[1:], start=1):
        if word[:1].isupper():
            run = [word]
            for after in words[i + 1 :]:
                if not after[:1].isupper():
                    break
                run.append(after)
            return " ".join(run)
    the = re.search(r"\bthe\s+\w+", question, re.I)
    return the.group(0) if the else " ".join(content_words(question))


def standalone_question(prompt):
    """{"standalone"}: the question ("Question:") with its first pronoun replaced by the main subject of the latest
    earlier question ("Turn N question:" lines): "When was it published?" after "Who introduced the Transformer?"
    is "When was the Transformer published?". "What about X?" is the earlier question with its subject replaced by
    X; a question with no reference to replace is returned as it is."""
    question = _line_value(prompt, "Question")
    earlier = _TURN_QUESTION.findall(prompt)
    if not earlier:
        return {"standalone": question}
    previous = earlier[-1]
    subject = main_subject(previous)
    about = _WHAT_ABOUT.match(question)
    if about and subject and subject in previous:
        return {"standalone": previous.replace(subject, about.group(1), 1)}
    reference = _REFERENCE.search(question)
    if not reference or not subject:
        return {"standalone": question}
    replacement = _REFERENCES[reference.group(1).lower()].format(subject)
    return {"standalone": question[: reference.start()] + replacement + question[reference.end() :]}


def judge_claim(prompt):
    """{"verdict", "quote", "reason"}: contradicted when a claimed number clashes with a close sentence."""
    before, claim = _split_last_claim(prompt)
    context = _section(before, "Context", ("Task",)) or ""
    claimed = set(content_words(claim or ""))
    best = max(sentences(context), key=lambda s: len(claimed & set(content_words(s))), default="")
    best_words = set(content_words(best))
    missing = sorted(w for w in claimed - set(content_words(context)) if is_number(w))
    if missing and len(claimed & best_words) >= 2 and any(map(is_number, best_words)):
        reason = f"the context gives a different figure than {', '.join(missing)}"
        return {"verdict": "contradicted", "quote": best, "reason": reason}
    return {"verdict": "unsupported", "quote": "", "reason": "the context does not state the claim"}


def judge_rewrite(prompt):
    """{"score" 1-5, "reasoning"} of the question_rewrite criterion ("Standalone question:" in its input): 5 when the
    standalone question keeps every content word of the question and names the main subject of the latest earlier
    question, 3 when it keeps the question's words but names nothing of the earlier turns, 2 when it drops one of the
    question's words. An input without a standalone question is scored as judge_score scores one."""
    question = _line_value(prompt, "Question")
    standalone = _line_value(prompt, "Standalone question")
    if not standalone:
        return judge_score(prompt)
    earlier = _TURN_QUESTION.findall(prompt)
    kept = set(content_words(question)) <= set(content_words(standalone))
    subject = main_subject(earlier[-1]) if earlier else ""
    resolved = bool(subject) and set(content_words(subject)) <= set(content_words(standalone))
    if not kept:
        score, why = 2, "the standalone question drops words of the question"
    elif resolved:
        score, why = 5, f"the standalone question keeps the question and names {subject!r} from the earlier turns"
    else:
        score, why = 3, "the standalone question keeps the question but names nothing the earlier turns refer to"
    return {"score": score, "reasoning": why, "reason": why}


def judge_score(prompt):
    """{"score" 1-5, "reasoning"}: share of reference terms found in the answer (3 without a reference)."""
    reference = set(content_words(_section(prompt, "Reference", LABELS) or ""))
    answer_text = _section(prompt, "Answer", LABELS)
    if not reference or answer_text is None:
        score, why = 3, "no reference answer to compare against"
    else:
        found = len(reference & set(content_words(answer_text)))
        score = 1 + round(4 * found / len(reference))
        why = f"{found} of {len(reference)} reference terms appear in the answer"
    return {"score": score, "reasoning": why, "reason": why}


def noisy_score(scores, seed, prompt):
    """One of `scores`, picked by a hash of the request's seed and its prompt: the same request gets the same score,
    another seed (a judge's repeat) or another item an independent, uniform pick."""
    digest = hashlib.sha256(f"{seed}\n{prompt}".encode()).digest()
    return list(scores)[int.from_bytes(digest[:8], "big") % len(scores)]


def answer_questions(prompt):
    """{"questions", "noncommittal"}: one question per answer sentence; an abstention is noncommittal."""
    text = _CITATION.sub("", _section(prompt, "Answer") or "")
    if text.startswith("The knowledge base does not cover"):
        return {"questions": [], "noncommittal": True}
    questions = [f"What is known about {_squash(s).rstrip('.!?')}?" for s in sentences(text)][:3]
    return {"questions": questions, "noncommittal": False}


def judge_addresses(prompt):
    """{"addresses", "gap"}: at least half the question's terms occur in the answer; the gap names the others."""
    question = list(dict.fromkeys(content_words(_line_value(prompt, "Question"))))
    answer_words = set(content_words(_section(prompt, "Answer") or ""))
    missing = [w for w in question if w not in answer_words]
    addresses = bool(question) and len(missing) <= len(question) / 2
    return {"addresses": addresses, "gap": "" if addresses else "it does not mention " + ", ".join(missing)}


SHORT_WORDS = 12  # an answer of at most this many words is short, to the judge's short-answer bias
_DISAGREEMENT = re.compile(r"Answer:\n(.*?)\nEvaluator's score: ([\d.]+)\nPeople's score: (\d)", re.S)


def is_short(answer: str) -> bool:
    return len(answer.split()) <= SHORT_WORDS


def short_biased(reply: str, prompt: str, system: str) -> str:
    """A judge that rates a short answer one point higher than its content earns (the bias judge_short_bias turns
    on), unless the rubric it was sent says what people think of short answers (an aligned clarification)."""
    answer = _section(prompt, "Answer", LABELS)
    value = json.loads(reply)
    if answer is None or not is_short(answer) or "short answers" in (system or "").lower():
        return reply
    return json.dumps({**value, "score": min(5, int(value["score"]) + 1)})


def clarify_rubric(prompt):
    """{"reasoning", "clarification"}: whichever of short and long answers the evaluator over-scores more, against
    people, across the disagreements shown, stated as a rule."""
    over = {True: [], False: []}
    for answer, judged, people in _DISAGREEMENT.findall(prompt):
        over[is_short(answer)].append(float(judged) - int(people))
    mean = {short: sum(v) / len(v) if v else float("-inf") for short, v in over.items()}
    kind = "short" if mean[True] >= mean[False] else "long"
    why = f"the evaluator scored {kind} answers above people most often ({len(over[kind == 'short'])} of them)"
    rule = f"People give {kind} answers no extra credit for their length: score {kind} answers by content alone."
    return {"reasoning": why, "clarification": rule}
