"""A protocol-faithful fake Ollama server for offline tests.

    with FakeOllama() as fake:
        client = ollama.Client(host=fake.url)

It sees only what a real Ollama receives. A chat or generate request is answered by the rule for the registered
prompt it was built from: the prompt is recognised by its text as the pipeline's prompt registry holds it
(prompts.py), and its name picks a deterministic rule (rules.py, over the rule brain in brain.py and synth.py). A
verifier model answers Yes or No, Ragas's prompts get Ragas's JSON, and plain user messages get an answer from their
context; any other request is refused with the reason. `enqueue` scripts replies, `inject` adds transport/content
faults.

Latency model (chat and generate only; embeddings are instant): a request waits for one of `slots`
parallel slots, spends `seconds_per_prompt_token` x its prompt's word count in the prompt phase, then
`seconds_per_token` per reply word. A streamed reply goes out as one chunk per word at that rate, each
flushed as it is due; `chunk_log` records when each chunk was sent (the fake's clock: time.perf_counter
unless `clock` is given), and each chat/generate entry of `requests` gains its prompt_tokens, eval_tokens and
received/started/done times (started: when it got its slot), and the name of what it was built from ("prompt").

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

Modules: server.py (HTTP, latency, faults, events: FakeOllama), prompts.py (which registered prompt built a
request), rules.py (a name's reply rule), brain.py and synth.py (the rules' text work), ragas.py (Ragas's prompts),
embeddings.py (vectors), text.py (reading prompt text). docs/testing.md shows how to script it.
"""

from .brain import (
    ANSWER_STYLES,
    NO_ANSWER,
    answer,
    extract_claims,
    noisy_score,
    paraphrase,
    split_claim,
    verify,
)
from .embeddings import EMBED_SCALES, embed_vector
from .prompts import built_from, prompt_name, rule_input
from .ragas import ragas_reply
from .rules import PLAIN, RAGAS, RULES, VERIFIER_MODEL
from .server import (
    CONTENT_FAULTS,
    FAULTS,
    GENERATION_PATHS,
    MALFORMED_JSON,
    FakeOllama,
    Hold,
    SlotPool,
    VirtualClock,
    _pieces,
    normalise_name,
)
from .text import _CITATION, _blocks, content_words, sentences

__all__ = [
    "ANSWER_STYLES",
    "CONTENT_FAULTS",
    "EMBED_SCALES",
    "FAULTS",
    "GENERATION_PATHS",
    "MALFORMED_JSON",
    "NO_ANSWER",
    "PLAIN",
    "RAGAS",
    "RULES",
    "VERIFIER_MODEL",
    "_CITATION",
    "FakeOllama",
    "Hold",
    "SlotPool",
    "VirtualClock",
    "_blocks",
    "_pieces",
    "answer",
    "built_from",
    "content_words",
    "embed_vector",
    "extract_claims",
    "noisy_score",
    "normalise_name",
    "paraphrase",
    "prompt_name",
    "ragas_reply",
    "rule_input",
    "sentences",
    "split_claim",
    "verify",
]
