"""A protocol-faithful fake Ollama server for offline tests (standard library only).

    with FakeOllama() as fake:
        client = ollama.Client(host=fake.url)

Answers come from a deterministic rule brain (see `rule_reply` and `embed_vector`)
unless a reply was scripted with `enqueue`; `inject` adds transport/content faults.

Latency model (chat and generate only; embeddings are instant): a request waits for one of `slots`
parallel slots, spends `seconds_per_prompt_token` x its prompt's word count in the prompt phase, then
`seconds_per_token` per reply word. A streamed reply goes out as one chunk per word at that rate, each
flushed as it is due; `chunk_log` records when each chunk was sent (the fake's clock: time.perf_counter
unless `clock` is given), and each chat/generate entry of `requests` gains its prompt_tokens, eval_tokens and
received/started/done times (started: when it got its slot).

Prompt cache (`prompt_cache=True`), as Ollama's llama.cpp runner keeps one: each slot remembers the prompt it
processed last for each model (Ollama runs each loaded model in a runner process of its own, with its own slots and
KV cache, so a call to one model does not evict another's; the slots here are shared by all models as compute is, on
one machine), a request takes the free slot whose memory for its model shares the longest common prefix with its
prompt, and only the words after that prefix are charged prompt time. The record's
`cached_tokens` says how many were reused, and `prompt_eval_count` counts only those processed, as Ollama's does.

Tests that need order, not speed, use events instead of the clock:
- `in_flight`/`max_in_flight` count chat/generate requests being answered at once (from the start of their
  generation to their last line), `generating`/`max_generating` those inside a slot; `wait_until(condition)`
  blocks until condition(fake) holds, woken by each change of the fake's state (a request received, a slot
  taken, a chunk sent, a reply done), never by polling.
- `hold(...)` stops matching replies at a chunk until the test releases them (or `until(fake)` holds), so a test
  can have a request mid-reply for as long as it needs; `VirtualClock` makes the latency model's waits
  instant and exact (`FakeOllama(clock=vc, sleep=vc.sleep)`) for one request at a time.
"""

import hashlib
import json
import math
import re
import socket
import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = frozenset({"500", "timeout", "drop", "malformed_json", "truncated_json", "not_found"})
CONTENT_FAULTS = frozenset({"malformed_json", "truncated_json"})
GENERATION_PATHS = ("/api/chat", "/api/generate")
MALFORMED_JSON = '{"claims": ["unterminated'
NO_ANSWER = "The knowledge base does not cover this question."
MODIFIED_AT = "2025-01-01T00:00:00Z"
LABELS = ("Question", "Context", "Reference", "Answer", "Claim", "Document")

STOPWORDS = frozenset(
    """
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so
some such than that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you your
yours yourself yourselves
""".split()
)

_TOKEN = re.compile(r"[a-z0-9]*[a-z][a-z0-9]*|\d+(?:,\d{3})*(?:\.\d+)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")
_CITATION = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
_BLOCK_HEAD = re.compile(r"^\s*\[(\d+)\]\s*source:.*$", re.M)
_LABEL_LINE = re.compile(rf"^\s*(?:{'|'.join(LABELS)}):", re.M)
_EMBED_PREFIX = re.compile(r"^\s*(?:search_query|search_document):\s*")
_CLAIM_JOINT = re.compile(r",\s+and\s+|;\s+")

ANSWER_STYLES = ("quote", "paraphrase")
# "bag": the bag-of-words vectors, unrelated texts near 0; "dense": the same bag and one component every text
# shares, of equal weight, so every cosine is (bag + 1) / 2 and unrelated texts sit near 0.5, as with
# nomic-embed-text (tests/test_similarity_scale.py)
EMBED_SCALES = ("bag", "dense")
PARAPHRASE_SENTENCES = 3  # a paraphrased answer's sentences, each joining two context sentences
ATTRIBUTION = "According to the sources, "
# function words swapped to reword a sentence: all stopwords, so content-word overlap is unchanged
_REWORDINGS = {"the": "this", "this": "the", "is": "was", "was": "is", "are": "were", "were": "are", "a": "the"}
_FABRICATED_NAMES = ("Smith", "Okafor", "Lindqvist", "Tanaka", "Moreau", "Kowalski")

_LLM_PROFILE = {
    "family": "llama",
    "parameter_size": "3.2B",
    "quantization_level": "Q4_K_M",
    "size": 2019393189,
    "context_length": 131072,
    "embedding_length": 3072,
    "capabilities": ["completion", "tools"],
    "template": "{{ .Prompt }}",
    "parameters": 'stop "<|eot_id|>"',
}
_EMBED_PROFILE = {
    "family": "nomic-bert",
    "parameter_size": "137M",
    "quantization_level": "F16",
    "size": 274302450,
    "context_length": 2048,
    "embedding_length": 768,
    "capabilities": ["embedding"],
    "template": "{{ .Prompt }}",
    "parameters": "num_ctx 8192",
}


# ---------------------------------------------------------------- text helpers


def normalise_name(name):
    """Ollama model name with an explicit tag: "llama3.2" -> "llama3.2:latest"."""
    name = name.strip().lower()
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


def is_number(word):
    """True for a numeric content word such as "28.4" or "1000"."""
    return bool(_NUMBER.fullmatch(word))


def content_words(text):
    """Lowercased content words (stopwords and short non-numbers dropped, plural "s" stripped)."""
    words = []
    for token in _TOKEN.findall(text.lower()):
        number = token.replace(",", "")
        if is_number(number):
            words.append(number)
        elif token not in STOPWORDS and len(token) >= 3:
            words.append(token[:-1] if len(token) > 3 and token.endswith("s") else token)
    return words


def sentences(text):
    """Sentences and lines of `text`, each an exact (stripped) substring of it."""
    return [s.strip() for s in _SENTENCE_BREAK.split(text) if s.strip()]


def _squash(text):
    """Collapse runs of whitespace to single spaces."""
    return " ".join(text.split())


def _line_value(text, label):
    """Text after "label:" on the first line starting with it, or ""."""
    for line in text.splitlines():
        if line.strip().startswith(label + ":"):
            return line.strip()[len(label) + 1 :].strip()
    return ""


def _section(text, label, stops=()):
    """Text from the first "label:" line to the next line starting with a stop label; None if absent."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith(label + ":"):
            body = [line.strip()[len(label) + 1 :]]
            for rest in lines[i + 1 :]:
                if any(rest.startswith(stop + ":") for stop in stops):
                    break
                body.append(rest)
            return "\n".join(body).strip()
    return None


def _split_last_claim(text):
    """(text before the last "Claim:" line, the claim) or (text, None)."""
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Claim:"):
            return "\n".join(lines[:i]), lines[i][len("Claim:") :].strip()
    return text, None


def _context(prompt):
    """The passages under "Context:", up to a "Question:" line when the question follows them."""
    return _section(prompt, "Context", ("Question",)) or ""


def _blocks(context):
    """[(n, text)] for the "[n] source: ..." blocks of a context; one block 1 if unnumbered."""
    heads = list(_BLOCK_HEAD.finditer(context))
    if not heads:
        return [(1, context)]
    ends = [h.start() for h in heads[1:]] + [len(context)]
    return [(int(h.group(1)), context[h.end() : end]) for h, end in zip(heads, ends, strict=False)]


# ---------------------------------------------------------------- rule brain


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
    question's words."""
    question = _line_value(prompt, "Question")
    standalone = _line_value(prompt, "Standalone question")
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
    """{"score" 1-5, "reasoning"}: share of reference terms found in the answer (3 without a reference); the
    question_rewrite criterion's input is scored by judge_rewrite."""
    if _line_value(prompt, "Standalone question"):
        return judge_rewrite(prompt)
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


# ---------------------------------------------------------------- synth: test questions written from passages
# A weak question writer: it builds a question from the key terms of the passage's most informative sentence, and on
# some prompts (chosen by the prompt's hash, one in SYNTH_MISTAKES for each mistake) makes a mistake that synth's
# gates must catch by their own logic: it copies the sentence as the question, names its source, adds a sentence the
# passage does not support to the reference, writes an "unanswerable" question the passage answers, or gives a
# "false" premise that is the passage's own statement.

SYNTH_MISTAKES = 10
COPY, LEADING_SOURCE, NAMES_SOURCE, UNSUPPORTED_REFERENCE = 0, 1, 2, 3
_TERM = re.compile(r"[A-Za-z][A-Za-z0-9-]*")


def synth_mistake(prompt):
    """0 to SYNTH_MISTAKES - 1, from the prompt's hash: the mistake (COPY, ...) made on it, if any."""
    return int(hashlib.md5(prompt.encode()).hexdigest(), 16) % SYNTH_MISTAKES


def informative_sentence(block, number=False, term=None):
    """The block's sentence with the most distinct content words (headings and lines under 6 words left out); with
    `number`, one holding a number if any does; with `term`, one naming it if any does."""
    found = [s for s in map(_squash, sentences(block)) if not s.startswith("#") and len(s.split()) >= 6]
    if term:
        found = [s for s in found if term.lower() in s.lower()] or found
    if number:
        found = [s for s in found if _NUMBER.search(s)] or found
    return max(found, key=lambda s: len(set(content_words(s))), default="")


def key_terms(sentence, k=4):
    """Up to `k` of the sentence's words that name things (capitalised ones first, then the longest), in its order."""
    words = list(dict.fromkeys(w for w in _TERM.findall(sentence) if w.lower() not in STOPWORDS and len(w) > 3))
    chosen = set(sorted(words, key=lambda w: (not w[0].isupper(), -len(w)))[:k])
    return " ".join(w for w in words if w in chosen)


def changed_number(number):
    """Another figure than `number`: a year moved on by 3, an integer doubled and one added, a decimal doubled."""
    value = float(number.replace(",", ""))
    if "." not in number:
        return str(int(value) + 3 if 1900 <= value <= 2100 else int(value) * 2 + 1)
    return f"{value * 2:g}"


def false_premise(sentence):
    """(the sentence with its first number changed, or with a name put in for its second capitalised word; the
    changed part)."""
    found = re.search(r"(?<![\w.])\d[\d,]*(?:\.\d+)?", sentence)
    if found:
        new = changed_number(found.group())
        return sentence[: found.start()] + new + sentence[found.end() :], new
    names = [m for m in re.finditer(r"\b[A-Z][a-z]+\b", sentence) if m.start() > 0]
    if names:
        name = _FABRICATED_NAMES[2]
        return sentence[: names[0].start()] + name + sentence[names[0].end() :], name
    return sentence.replace(" is ", " is not ", 1), "not"


def synth_candidate(prompt):
    """{"question", "reference", "missing", "false_premise"} for a synth prompt ("Kind:", "Shared:", then the
    passages under "Context:")."""
    kind = _line_value(prompt, "Kind")
    shared = _line_value(prompt, "Shared") or None
    blocks = [text for _, text in _blocks(_context(prompt))]
    mistake = synth_mistake(prompt)
    first = informative_sentence(blocks[0], number=kind in ("numeric", "false_premise"), term=shared)
    terms = key_terms(first)
    if kind == "negative":
        if mistake in (COPY, LEADING_SOURCE, NAMES_SOURCE):  # a question its own passage answers
            return {"question": f"What is known about {terms}?", "missing": "when it was introduced"}
        topic = key_terms(first, 2)
        question = f"Which company sells a commercial licence for {topic}, and at what price?"
        return {"question": question, "missing": "no vendor or price is named"}
    if kind == "false_premise":
        if mistake == UNSUPPORTED_REFERENCE:  # the "false" premise is the passage's own statement
            number = _NUMBER.search(first)
            return {
                "question": f"Why is the figure for {terms} {number.group() if number else 'so'}?",
                "false_premise": first,
                "reference": first,
            }
        premise, changed = false_premise(first)
        return {"question": f"Why is the figure for {terms} {changed}?", "false_premise": premise, "reference": first}
    if kind in ("multi_hop", "comparison") and len(blocks) > 1:
        second = informative_sentence(blocks[1], term=shared)
        other = key_terms(second, 3)
        terms = key_terms(first, 3)
        if kind == "multi_hop":
            question = f"How does {shared or 'it'} link {terms} with {other}?"
        else:
            question = f"How does {terms} compare with {other}?"
        reference = f"{first} {second}"
    elif kind == "numeric":
        question, reference = f"What figure is given for {terms}?", first
    else:
        question, reference = f"What is known about {terms}?", first
    if mistake == COPY:
        question = first.rstrip(".!?") + "?"
    elif mistake == LEADING_SOURCE:
        question = "According to the passage, " + question[:1].lower() + question[1:]
    elif mistake == NAMES_SOURCE:
        question = f"What does the passage say about {terms}?"
    elif mistake == UNSUPPORTED_REFERENCE:
        reference += " " + _CITATION.sub("", fabricated(_context(prompt), 1, 1)[0])
    return {"question": question, "reference": reference}


_STRUCTURED_RULES = (
    ("claims", extract_claims),
    ("relevant", judge_relevance),
    ("query", rewrite_query),
    ("standalone", standalone_question),
    ("verdict", judge_claim),
    ("score", judge_score),
    ("questions", answer_questions),
    ("addresses", judge_addresses),
    ("question", synth_candidate),
)


def empty_value(schema, defs):
    """A type-appropriate empty value for a JSON schema."""
    if "$ref" in schema:
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    if schema.get("enum"):
        return schema["enum"][0]
    options = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
    if options:
        return empty_value(next((o for o in options if o.get("type") != "null"), options[0]), defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return fit_schema({}, schema, defs)
    return {"string": "", "integer": 0, "number": 0.0, "boolean": False, "array": [], "null": None}.get(kind, "")


def fit_schema(values, schema, defs=None):
    """Keep only the schema's properties and add missing required ones as empty values."""
    defs = schema.get("$defs", {}) if defs is None else defs
    properties = schema.get("properties") or {}
    out = {k: v for k, v in values.items() if k in properties}
    for key in schema.get("required", []):
        if key not in out:
            out[key] = empty_value(properties.get(key, {}), defs)
    return out


def structured_reply(schema, prompt, split=False):
    """The rule object for a `format` schema, dispatched on its top-level property names; `split` is
    `extract_claims`'s."""
    properties = schema.get("properties") or {}
    rule = next((fn for key, fn in _STRUCTURED_RULES if key in properties), None)
    if rule is extract_claims:
        return fit_schema(extract_claims(prompt, split), schema)
    return fit_schema(rule(prompt) if rule else {}, schema)


def rule_input(messages):
    """The latest user message with a labelled line ("Question:", "Context:", ...), else the last one.

    Follow-ups such as "that was not valid JSON, reply again" thus keep the original task in view.
    """
    users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    labelled = [u for u in users if _LABEL_LINE.search(u)]
    return (labelled or users or [""])[-1]


_RAGAS_INPUT = "\nNow perform the same with the following input\ninput: "


def ragas_reply(prompt):
    """Ragas's Faithfulness prompts (PydanticPrompt: instruction, JSON schema, examples, then "input: {json}
    Output:"), answered in its schemas: {"statements"} for a question and answer = the answer's sentences of 3 or
    more words; {"statements": [{statement, reason, verdict}]} for a context and statements = verdict 1 when the
    statement's numbers and at least 80% of its other content words are in the context (as `verify`). None for
    any other prompt."""
    _, marker, rest = prompt.rpartition(_RAGAS_INPUT)
    if not marker:
        return None
    try:
        given, _ = json.JSONDecoder().raw_decode(rest)
    except ValueError:
        return None
    if not isinstance(given, dict):
        return None
    if {"question", "answer"} <= given.keys():
        said = [_squash(s) for s in sentences(str(given["answer"]))]
        return {"statements": [s for s in said if len(s.split()) >= 3] or said}
    if {"context", "statements"} <= given.keys():
        context = set(content_words(str(given["context"])))
        verdicts = []
        for statement in given["statements"]:
            words = set(content_words(str(statement)))
            numbers = {w for w in words if is_number(w)}
            others = words - numbers
            found = len(others & context)
            verdict = int(numbers <= context and found >= 0.8 * len(others))
            shown = len(numbers & context)
            reason = f"{found} of {len(others)} words and {shown} of {len(numbers)} numbers are in the context"
            verdicts.append({"statement": statement, "reason": reason, "verdict": verdict})
        return {"statements": verdicts}
    return None


def rule_reply(prompt, fmt, verifier, answer_sentences=2, style="quote", fabricate=False):
    """The rule brain's reply text for a chat/generate prompt; `style` "paraphrase" writes paraphrased
    answers (fabricating with `fabricate`) and splits joined sentences into claims."""
    if verifier:
        return verify(prompt)
    ragas = ragas_reply(prompt)
    if ragas is not None:
        return json.dumps(ragas)
    if fmt:
        return json.dumps(structured_reply(fmt if isinstance(fmt, dict) else {}, prompt, split=style == "paraphrase"))
    return paraphrase(prompt, fabricate) if style == "paraphrase" else answer(prompt, answer_sentences)


def embed_vector(text, dim):
    """Feature-hashed bag of content words, L2-normalised; empty text -> unit vector on dim 0."""
    vector = [0.0] * dim
    words = content_words(_EMBED_PREFIX.sub("", text))
    if not words:
        vector[0] = 1.0
        return vector
    for word in words:
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


# ---------------------------------------------------------------- HTTP plumbing


def _iso(ts):
    """RFC 3339 UTC timestamp with microseconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1e6):06d}Z"


def _json(obj, status=200):
    """A JSON reply tuple."""
    return status, "application/json; charset=utf-8", json.dumps(obj).encode()


def _pieces(text):
    """Word-sized stream chunks that concatenate back to `text`."""
    return [p for p in re.split(r"(?<=\s)(?=\S)", text) if p]


class _Call:
    """One received request."""

    def __init__(self, path, body, model, t0):
        self.path, self.body, self.model = path, body, model
        self.fault = None
        self.index = self.record = None  # position in FakeOllama.requests, and the entry there
        self.t0 = t0  # received, in ns of the fake's clock


class VirtualClock:
    """Time that passes only when the fake sleeps: sleep(s) moves it on by s at once and records s. Exact and
    instant for one request at a time (concurrent sleeps would add up: use hold and the counters for those)."""

    def __init__(self, start=1000.0):
        self.now = start
        self.slept = []
        self._lock = threading.Lock()

    def __call__(self):
        with self._lock:
            return self.now

    def sleep(self, seconds):
        with self._lock:
            self.slept.append(seconds)
            self.now += max(0.0, seconds)


class Hold:
    """Matching chat/generate replies stopped before one chunk until release() (see FakeOllama.hold)."""

    def __init__(self, fake, match, after_chunks, until, times, timeout_s):
        self._fake = fake
        self.match, self.after_chunks, self.until = match, after_chunks, until
        self.times, self.timeout_s = times, timeout_s
        self.caught = 0  # requests that reached it
        self.waiting = 0  # requests held now
        self.timed_out = 0  # requests that went on because timeout_s passed first
        self.released = False

    def release(self):
        with self._fake._changed:
            self.released = True
            self._fake._changed.notify_all()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


class _Handler(BaseHTTPRequestHandler):
    """Transport only: reads the body, asks FakeOllama, writes (or drops) the reply."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def _serve(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        reply = self.server.fake.handle(self.command, self.path.split("?")[0], raw)
        if reply is None:
            self.close_connection = True
            return
        status, ctype, payload = reply
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if not isinstance(payload, bytes):
            self._write_chunked(payload)
            return
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_HEAD = do_POST = do_DELETE = _serve

    def _write_chunked(self, lines):
        """Send (line, on_sent) pairs as they come, each flushed at once; on_sent(t) gets the send time."""
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for line, on_sent in lines:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
                if on_sent:
                    on_sent(self.server.fake._clock())
            self.wfile.write(b"0\r\n\r\n")
        finally:
            lines.close()  # a peer that hung up mid-stream frees its slot now

    def log_message(self, *args):
        pass


class _Server(ThreadingHTTPServer):
    """Threading server that can sever its open connections and ignores peers hanging up."""

    daemon_threads = True

    def __init__(self, fake):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake
        self.open_sockets = set()

    def process_request(self, request, client_address):
        self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        self.open_sockets.discard(request)
        super().shutdown_request(request)

    def sever_all(self):
        for sock in list(self.open_sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


# ---------------------------------------------------------------- the fake


class SlotPool:
    """`n` parallel slots. With the prompt cache on, each remembers its last prompt for each model (each model's
    runner keeps its own) and a request takes the free slot sharing the longest common prefix with its own, else
    the one used least recently (as llama.cpp's slot selection does)."""

    def __init__(self, n):
        self._free = list(range(n))
        self._memory = {}  # (slot, model) -> words
        self._used = dict.fromkeys(range(n), -1)  # slot -> when it was last released (a counter)
        self._uses = 0
        self._changed = threading.Condition()

    @contextmanager
    def taken(self, model, words, cache):
        """Wait for a slot; yields how many leading words its cache holds (0 without the cache)."""
        with self._changed:
            self._changed.wait_for(lambda: self._free)
            slot = max(self._free, key=lambda s: (self._shared(s, model, words) if cache else 0, -self._used[s]))
            self._free.remove(slot)
            cached = self._shared(slot, model, words) if cache else 0
        try:
            yield min(cached, max(0, len(words) - 1))  # the last word is always processed, as llama.cpp does
        finally:
            with self._changed:
                self._memory[slot, model] = list(words)
                self._uses += 1
                self._used[slot] = self._uses
                self._free.append(slot)
                self._changed.notify()

    def _shared(self, slot, model, words):
        remembered = self._memory.get((slot, model), [])
        n = 0
        for a, b in zip(remembered, words, strict=False):
            if a != b:
                break
            n += 1
        return n


class FakeOllama:
    """In-process Ollama look-alike on 127.0.0.1 with scripted replies, faults and latency."""

    def __init__(
        self,
        models=("llama3.2", "bespoke-minicheck", "nomic-embed-text"),
        embed_dim=768,
        seconds_per_token=0.0,
        slots=4,
        verifier_models=("bespoke-minicheck",),
        fault_delay_s=5.0,
        seconds_per_prompt_token=0.0,
        answer_sentences=2,
        answer_style="quote",
        clock=None,
        sleep=None,
        embed_scale="bag",
        prompt_cache=False,
        gpu=True,
        judge_noise=None,
        unfaithful_first=True,
    ):
        """clock() -> seconds and sleep(seconds) drive the latency model (default: time.perf_counter and a wait
        that stop() cuts short); pass a VirtualClock and its sleep to make its waits instant and exact.
        judge_noise: scores (e.g. (3, 4)) among which the judge's rubric score is picked at random instead of by the
        rule brain, reproducibly: the pick depends only on the request's options.seed and its prompt (noisy_score);
        None (default): the deterministic rule brain. Settable on a running fake."""
        if answer_style not in ANSWER_STYLES:
            raise ValueError(f"unknown answer_style {answer_style!r}; expected one of {ANSWER_STYLES}")
        if embed_scale not in EMBED_SCALES:
            raise ValueError(f"unknown embed_scale {embed_scale!r}; expected one of {EMBED_SCALES}")
        self.embed_dim = embed_dim
        self.embed_scale = embed_scale
        self.answer_sentences = answer_sentences  # how many context sentences a rule-brain answer quotes
        # "paraphrase": answers reword and join context sentences, and the first answer to each question
        # adds two unsupported sentences (a generator that gets it right when asked again)
        self.answer_style = answer_style
        self._answered = set()  # question lines answered so far in the paraphrase style
        # whether that first answer is unfaithful; False: it is paraphrased and faithful, as the later ones are.
        # Settable on a running fake (bench/answer_vs_seed.py sets it per question)
        self.unfaithful_first = unfaithful_first
        self.fault_delay_s = fault_delay_s
        self.verifier_models = {normalise_name(m) for m in verifier_models}
        self.requests = []
        self.chunk_log = []  # (request index, chunk index, send time on the fake's clock, chunk text)
        self.url = None
        self._clock = clock or time.perf_counter
        self._sleep = sleep or self._stopping_wait
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)  # notified on every change a test may wait for
        self._holds = []
        self.in_flight = self.max_in_flight = 0  # chat/generate requests being answered
        self.generating = self.max_generating = 0  # of those, the ones inside a slot
        self._models = {}
        self._loaded = set()
        self._scripted = []
        self._faults = []
        self._stopping = threading.Event()
        self._server = self._thread = None
        for name in models:
            self.add_model(name)
        self._seconds_per_prompt_token = 0.0
        self.prompt_cache = prompt_cache
        self.gpu = gpu  # /api/ps: loaded models in GPU memory (size_vram), else on the CPU (0), as Ollama reports
        self.judge_noise = judge_noise
        self.set_latency(seconds_per_token, slots, seconds_per_prompt_token)

    # -- lifecycle

    def start(self):
        """Bind a free port and serve in a background thread."""
        self._stopping.clear()
        self._server = _Server(self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop serving, wake sleeping and held requests and close every connection."""
        self._stopping.set()
        self._notify()
        self._server.shutdown()
        self._server.sever_all()
        self._server.server_close()
        self._thread.join()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- scripting

    def enqueue(self, reply, model=None, match=None, times=1):
        """Script `reply` (str, or dict/list as JSON) for the next chat/generate request(s) whose
        model matches and whose parsed JSON body satisfies `match(body)`; FIFO among matches."""
        text = reply if isinstance(reply, str) else json.dumps(reply)
        entry = (model and normalise_name(model), match, text)
        with self._lock:
            self._scripted.extend([entry] * times)

    def inject(self, fault, model=None, path=None, times=1):
        """Make the next matching request(s) fail with `fault` (one of FAULTS)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; expected one of {sorted(FAULTS)}")
        entry = (fault, model and normalise_name(model), path)
        with self._lock:
            self._faults.extend([entry] * times)

    def forget_answers(self):
        """Forget which questions were answered: the next paraphrased answer to each fabricates again."""
        with self._lock:
            self._answered.clear()

    def clear(self):
        """Forget scripted replies, pending faults, recorded requests and the in-flight maxima (not the answered
        questions, nor holds)."""
        with self._lock:
            self._scripted.clear()
            self._faults.clear()
            self.requests.clear()
            self.chunk_log.clear()
            self.max_in_flight, self.max_generating = self.in_flight, self.generating

    # -- events

    def hold(self, match=None, after_chunks=0, until=None, times=None, timeout_s=30.0):
        """Stop chat/generate replies (those whose JSON body satisfies `match(body)`, at most `times` of them)
        before chunk `after_chunks` of a streamed reply (0: before the first; a reply that is not streamed is
        held only at 0, before it is sent), inside their slot, until the returned Hold is released, or
        `until(fake)` holds (checked on every change of the fake's state and every 20 ms, so it may read a flag
        of the code under test), or `timeout_s` real seconds pass (counted in Hold.timed_out). Each of these
        releases it for good: later requests pass. Use it as a context manager to release it on the way out."""
        gate = Hold(self, match, after_chunks, until, times, timeout_s)
        with self._lock:
            self._holds.append(gate)
        return gate

    def wait_until(self, condition, timeout_s=30.0):
        """Block until condition(fake) holds (checked on every change of the fake's state); its last value."""
        with self._changed:
            return self._changed.wait_for(lambda: condition(self), timeout_s)

    def _notify(self):
        with self._changed:
            self._changed.notify_all()

    def _stopping_wait(self, seconds):
        self._stopping.wait(seconds)

    def _hold_point(self, call, chunk_no):
        """Wait at every open hold for this request at this chunk."""
        for gate in list(self._holds):
            with self._changed:
                if gate.released or gate.after_chunks != chunk_no:
                    continue
            if gate.match is not None and not gate.match(call.body):
                continue
            with self._changed:
                if gate.released or (gate.times is not None and gate.caught >= gate.times):
                    continue
                gate.caught += 1
                gate.waiting += 1
                self._changed.notify_all()
                deadline = time.monotonic() + gate.timeout_s
                while not self._gate_open(gate):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        gate.timed_out += 1
                        gate.released = True  # open for good: a failing test does not wait timeout_s per request
                        break
                    # `until` may read state outside the fake (a flag of the code under test): look again soon
                    self._changed.wait(min(left, 0.02) if gate.until is not None else left)
                gate.waiting -= 1
                self._changed.notify_all()

    def _gate_open(self, gate):
        """Under the lock: whether a held request may go on; `until` holding releases the hold for good."""
        if not gate.released and gate.until is not None and gate.until(self):
            gate.released = True
        return gate.released or self._stopping.is_set()

    def add_model(self, name):
        """Mark `name` as pulled (digest = sha256 of the normalised name)."""
        name = normalise_name(name)
        with self._lock:
            self._models.setdefault(name, hashlib.sha256(name.encode()).hexdigest())

    def remove_model(self, name):
        """Mark `name` as not pulled."""
        with self._lock:
            self._models.pop(normalise_name(name), None)

    def set_digest(self, name, digest):
        """Change the digest reported for a pulled model."""
        name = normalise_name(name)
        with self._lock:
            if name not in self._models:
                raise KeyError(name)
            self._models[name] = digest

    def set_latency(self, seconds_per_token, slots=None, seconds_per_prompt_token=None):
        """Simulated time per reply token and (if given) per prompt token; `slots` bounds concurrent
        generations. Tokens are whitespace-separated words."""
        with self._lock:
            self._seconds_per_token = seconds_per_token
            if seconds_per_prompt_token is not None:
                self._seconds_per_prompt_token = seconds_per_prompt_token
            if slots is not None:
                self._slots = SlotPool(slots)

    # -- request handling

    def handle(self, method, path, raw):
        """Reply tuple (status, content type, bytes or list of lines) for a request; None = drop."""
        body = self._parse(raw)
        name = (body.get("model") or body.get("name")) if isinstance(body, dict) else None
        received = self._clock()
        call = _Call(
            path, body, normalise_name(name) if isinstance(name, str) and name.strip() else None, int(received * 1e9)
        )
        call.record = {"path": path, "body": body, "model": call.model, "received": received}
        with self._changed:
            call.index = len(self.requests)
            self.requests.append(call.record)
            self._changed.notify_all()
        call.fault = self._take_fault(call)
        if call.fault == "drop":
            return None
        if call.fault == "500":
            return _json({"error": "internal server error"}, 500)
        if call.fault == "not_found":
            return self._not_found(name)
        if call.fault == "timeout":
            self._stopping.wait(self.fault_delay_s)
        return self._route(method, call)

    @staticmethod
    def _parse(raw):
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _take_fault(self, call):
        with self._lock:
            for i, (fault, model, path) in enumerate(self._faults):
                if fault in CONTENT_FAULTS and call.path not in GENERATION_PATHS:
                    continue
                if (model is None or model == call.model) and (path is None or path == call.path):
                    del self._faults[i]
                    return fault
        return None

    def _take_scripted(self, call):
        with self._lock:
            for i, (model, match, text) in enumerate(self._scripted):
                if (model is None or model == call.model) and (match is None or match(call.body)):
                    del self._scripted[i]
                    return text
        return None

    def _route(self, method, call):
        routes = {
            ("GET", "/"): self._root,
            ("HEAD", "/"): self._root,
            ("GET", "/api/version"): self._version,
            ("GET", "/api/tags"): self._tags,
            ("GET", "/api/ps"): self._ps,
            ("POST", "/api/show"): self._show,
            ("POST", "/api/chat"): self._chat,
            ("POST", "/api/generate"): self._generate,
            ("POST", "/api/embed"): self._embed,
            ("POST", "/api/embeddings"): self._embeddings,
        }
        route = routes.get((method, call.path))
        if route is None:
            return 404, "text/plain; charset=utf-8", b"404 page not found"
        if method == "POST" and not isinstance(call.body, dict):
            return _json({"error": "invalid request body"}, 400)
        return route(call)

    @staticmethod
    def _not_found(name):
        return _json({"error": f'model "{name or ""}" not found, try pulling it first'}, 404)

    def _check_model(self, call, verb=None):
        """An error reply if the model is missing, not pulled or (for a `verb`) cannot generate; else None."""
        name = call.body.get("model")
        if not name:
            return _json({"error": "model is required"}, 400)
        if call.model not in self._models:
            return self._not_found(name)
        if verb and "completion" not in self._profile(call.model)["capabilities"]:
            return _json({"error": f'"{name}" does not support {verb}'}, 400)
        with self._lock:
            self._loaded.add(call.model)
        return None

    def _profile(self, name):
        if "embed" in name:
            return {**_EMBED_PROFILE, "embedding_length": self.embed_dim + (self.embed_scale == "dense")}
        return _LLM_PROFILE

    def _details(self, name):
        p = self._profile(name)
        return {
            "parent_model": "",
            "format": "gguf",
            "family": p["family"],
            "families": [p["family"]],
            "parameter_size": p["parameter_size"],
            "quantization_level": p["quantization_level"],
        }

    def _model_entry(self, name, digest):
        return {
            "name": name,
            "model": name,
            "size": self._profile(name)["size"],
            "digest": digest,
            "details": self._details(name),
        }

    # -- metadata endpoints

    def _root(self, call):
        return 200, "text/plain; charset=utf-8", b"Ollama is running"

    def _version(self, call):
        return _json({"version": "0.12.0"})

    def _tags(self, call):
        with self._lock:
            models = sorted(self._models.items())
        return _json({"models": [{**self._model_entry(n, d), "modified_at": MODIFIED_AT} for n, d in models]})

    def _ps(self, call):
        expires = _iso(time.time() + 300)
        with self._lock:
            loaded = sorted((n, self._models[n]) for n in self._loaded if n in self._models)
        return _json(
            {
                "models": [
                    {
                        **self._model_entry(n, d),
                        "expires_at": expires,
                        "size_vram": self._profile(n)["size"] if self.gpu else 0,
                        "context_length": self._profile(n)["context_length"],
                    }
                    for n, d in loaded
                ]
            }
        )

    def _show(self, call):
        name = call.body.get("model") or call.body.get("name") or ""
        if call.model not in self._models:
            return _json({"error": f"model '{name}' not found"}, 404)
        p = self._profile(call.model)
        arch = p["family"]
        return _json(
            {
                "license": "",
                "modified_at": MODIFIED_AT,
                "template": p["template"],
                "parameters": p["parameters"],
                "modelfile": f'# Modelfile generated by "ollama show"\nFROM {call.model}\n'
                f'TEMPLATE """{p["template"]}"""\nPARAMETER {p["parameters"]}\n',
                "details": self._details(call.model),
                "capabilities": p["capabilities"],
                "model_info": {
                    "general.architecture": arch,
                    f"{arch}.context_length": p["context_length"],
                    f"{arch}.embedding_length": p["embedding_length"],
                },
            }
        )

    # -- generation endpoints

    def _chat(self, call):
        error = self._check_model(call, "chat")
        if error:
            return error
        messages = call.body.get("messages") or []
        if not messages:
            return self._loaded_reply(call, {"message": {"role": "assistant", "content": ""}})
        prompt = rule_input(messages)
        call.prompt_words = [w for m in messages for w in (m.get("content") or "").split()]
        prompt_count = len(call.prompt_words)
        return self._complete(call, prompt, prompt_count, lambda c: {"message": {"role": "assistant", "content": c}})

    def _generate(self, call):
        error = self._check_model(call, "generate")
        if error:
            return error
        prompt = call.body.get("prompt") or ""
        if not prompt:
            return self._loaded_reply(call, {"response": ""})
        call.prompt_words = (call.body.get("system") or "").split() + prompt.split()
        prompt_count = len(call.prompt_words)
        return self._complete(call, prompt, prompt_count, lambda c: {"response": c})

    def _loaded_reply(self, call, content):
        """Ollama's answer to an empty prompt: the model is loaded, nothing generated."""
        return _json({**self._head(call, content), "done": True, "done_reason": "load"})

    def _reply_text(self, call, prompt):
        """Fault content, else the next scripted reply, else the rule brain's."""
        if call.fault == "malformed_json":
            return MALFORMED_JSON
        scripted = None if call.fault == "truncated_json" else self._take_scripted(call)
        if scripted is not None:
            return scripted
        fmt, verifier = call.body.get("format"), call.model in self.verifier_models
        fabricate = not (fmt or verifier) and self._first_answer(prompt) and self.unfaithful_first
        text = rule_reply(prompt, fmt, verifier, self.answer_sentences, self.answer_style, fabricate)
        if self.judge_noise and isinstance(fmt, dict) and {"score", "reasoning"} <= set(fmt.get("properties") or {}):
            seed = (call.body.get("options") or {}).get("seed")
            text = json.dumps({**json.loads(text), "score": noisy_score(self.judge_noise, seed, prompt)})
        return text[: len(text) // 2] if call.fault == "truncated_json" else text

    def _first_answer(self, prompt):
        """In the paraphrase style: True the first time an answer to this question line is asked for."""
        if self.answer_style != "paraphrase":
            return False
        question = _line_value(prompt, "Question")
        with self._lock:
            first = question not in self._answered
            self._answered.add(question)
        return first

    def _complete(self, call, prompt, prompt_count, wrap):
        """Generate and answer: streamed one paced chunk per token unless stream=false."""
        reply = self._reply_text(call, prompt)
        lines = self._generation(call, reply, prompt_count, wrap, call.body.get("stream") is not False)
        if call.body.get("stream") is not False:
            return 200, "application/x-ndjson", lines
        final = next(lines)
        lines.close()  # its request is no longer in flight
        self._log_chunk(call, 0, reply, self._clock())  # sent at once: the whole reply is one chunk
        return _json(final)

    def _generation(self, call, reply, prompt_count, wrap, stream):
        """Inside a slot: the prompt phase, then the reply's tokens at the modelled rate. Streamed: yields
        (NDJSON line, on_sent) per chunk and the final line; not streamed: yields the one reply object."""
        with self._lock:
            per_token, per_prompt, slots = self._seconds_per_token, self._seconds_per_prompt_token, self._slots
        self._count(in_flight=1)
        try:
            paced = per_token > 0 or per_prompt > 0 or self.prompt_cache
            words = getattr(call, "prompt_words", [])
            with slots.taken(call.model, words, self.prompt_cache) if paced else nullcontext(0) as cached:
                self._count(generating=1)
                try:
                    started = self._now_ns()
                    call.record.update(started=started / 1e9, cached_tokens=cached)
                    processed = prompt_count - cached  # only what the slot's cache did not hold
                    if per_prompt * processed > 0:
                        self._sleep(per_prompt * processed)
                    decoding = self._now_ns()
                    if stream:
                        pieces = _pieces(reply)
                        for i, piece in enumerate(pieces):
                            self._hold_point(call, i)
                            self._pace(decoding, i + 1, per_token)
                            line = json.dumps({**self._head(call, wrap(piece)), "done": False}).encode() + b"\n"
                            yield line, lambda t, i=i, piece=piece: self._log_chunk(call, i, piece, t)
                        self._hold_point(call, len(pieces))
                    else:
                        self._hold_point(call, 0)
                        self._pace(decoding, len(reply.split()), per_token)
                    ended = self._now_ns()
                finally:
                    self._count(generating=-1)
            yield from self._finish(call, reply, prompt_count, wrap, stream, started, decoding, ended)
        finally:
            self._count(in_flight=-1)

    def _count(self, in_flight=0, generating=0):
        with self._changed:
            self.in_flight += in_flight
            self.generating += generating
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.max_generating = max(self.max_generating, self.generating)
            self._changed.notify_all()

    def _now_ns(self):
        return int(self._clock() * 1e9)

    def _finish(self, call, reply, prompt_count, wrap, stream, started, decoding, ended):
        """The reply's final line (streamed) or its one reply object, with Ollama's counts and durations."""
        total = max(1, ended - call.t0)
        final = {
            "done": True,
            "done_reason": "stop",
            "total_duration": total,
            "load_duration": max(0, started - call.t0),  # waiting for a slot
            "prompt_eval_count": prompt_count - call.record.get("cached_tokens", 0),  # processed, as Ollama counts
            "prompt_eval_duration": decoding - started,
            "eval_count": len(reply.split()),
            "eval_duration": ended - decoding,
        }
        with self._changed:
            call.record.update(prompt_tokens=prompt_count, eval_tokens=final["eval_count"], done=ended / 1e9)
            self._changed.notify_all()
        if stream:
            yield json.dumps({**self._head(call, wrap("")), **final}).encode() + b"\n", None
        else:
            yield {**self._head(call, wrap(reply)), **final}

    def _pace(self, since_ns, tokens, per_token):
        """Wait until `tokens` tokens' decode time has passed since `since_ns` (no drift across chunks)."""
        due = since_ns / 1e9 + tokens * per_token
        wait = due - self._clock()
        if wait > 0:
            self._sleep(wait)

    def _log_chunk(self, call, chunk_no, text, sent):
        with self._changed:
            self.chunk_log.append((call.index, chunk_no, sent, text))
            self._changed.notify_all()

    @staticmethod
    def _head(call, content):
        """The model/created_at/content part of a chat or generate response."""
        return {"model": call.body["model"], "created_at": _iso(time.time()), **content}

    # -- embedding endpoints

    def _embed(self, call):
        error = self._check_model(call)
        if error:
            return error
        given = call.body.get("input")
        texts = [given] if isinstance(given, str) else list(given or [])
        embeddings = [self._vector(t) for t in texts]
        total = max(1, self._now_ns() - call.t0)
        return _json(
            {
                "model": call.body["model"],
                "embeddings": embeddings,
                "total_duration": total,
                "load_duration": total // 2,
                "prompt_eval_count": sum(len(t.split()) for t in texts),
            }
        )

    def _embeddings(self, call):
        error = self._check_model(call)
        return error or _json({"embedding": self._vector(call.body.get("prompt") or "")})

    def _vector(self, text):
        """The text's embedding on this fake's scale (EMBED_SCALES): the bag of words, or with "dense" that bag
        and a shared last component, each of weight 1/sqrt(2)."""
        bag = embed_vector(text, self.embed_dim)
        if self.embed_scale == "bag":
            return bag
        half = math.sqrt(0.5)
        return [v * half for v in bag] + [half]
