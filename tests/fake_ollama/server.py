"""The fake Ollama server: the HTTP protocol, the latency model, faults, scripted replies and the events tests wait
on. What it replies is decided in rules.py (see the package's doc, fake_ollama/__init__.py).
"""

import hashlib
import json
import re
import socket
import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .brain import ANSWER_STYLES, noisy_score, short_biased
from .embeddings import EMBED_SCALES, scaled_vector
from .prompts import first, registered, request_messages, rule_input
from .rules import JUDGE_PROMPTS, RULES, Asked, classify, refusal
from .text import _line_value

FAULTS = frozenset({"500", "timeout", "drop", "malformed_json", "truncated_json", "not_found"})
CONTENT_FAULTS = frozenset({"malformed_json", "truncated_json"})
GENERATION_PATHS = ("/api/chat", "/api/generate")
MALFORMED_JSON = '{"claims": ["unterminated'
MODIFIED_AT = "2025-01-01T00:00:00Z"

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


def normalise_name(name):
    """Ollama model name with an explicit tag: "llama3.2" -> "llama3.2:latest"."""
    name = name.strip().lower()
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


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


class _Refused(Exception):
    """A chat or generate request the fake has no reply for (rules.refusal says why)."""


class _Call:
    """One received request."""

    def __init__(self, path, body, model, t0):
        self.path, self.body, self.model = path, body, model
        self.fault = None
        self.prompt = None  # what it was built from (rules.classify)
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
        judge_short_bias=False,
    ):
        """clock() -> seconds and sleep(seconds) drive the latency model (default: time.perf_counter and a wait
        that stop() cuts short); pass a VirtualClock and its sleep to make its waits instant and exact.
        judge_noise: scores (e.g. (3, 4)) among which the judge's rubric score is picked at random instead of by the
        rule brain, reproducibly: the pick depends only on the request's options.seed and its prompt (noisy_score);
        None (default): the deterministic rule brain. Settable on a running fake.
        judge_short_bias: the judge's rubric scores a short answer one point higher, unless its system text says
        what people think of short answers (what judge alignment's clarification does); settable on a running fake."""
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
        self.judge_short_bias = judge_short_bias
        # the reply rule for each registered prompt's name (and rules.VERIFIER_MODEL, RAGAS, PLAIN); a test may
        # replace one on its own fake, e.g. fake.rules["llm_verifier"] = rules.yes_no
        self.rules = dict(RULES)
        self.set_latency(seconds_per_token, slots, seconds_per_prompt_token)

    # -- lifecycle

    def start(self):
        """Read the prompt registry (once per process: importing the pipeline's prompts takes seconds, which a
        first request must not wait for), bind a free port and serve in a background thread."""
        registered()
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
        call.prompt_words = [w for m in messages for w in (m.get("content") or "").split()]
        prompt_count = len(call.prompt_words)
        return self._complete(call, messages, prompt_count, lambda c: {"message": {"role": "assistant", "content": c}})

    def _generate(self, call):
        error = self._check_model(call, "generate")
        if error:
            return error
        prompt = call.body.get("prompt") or ""
        if not prompt:
            return self._loaded_reply(call, {"response": ""})
        system = call.body.get("system") or ""
        call.prompt_words = system.split() + prompt.split()
        prompt_count = len(call.prompt_words)
        messages = request_messages(call.body)
        return self._complete(call, messages, prompt_count, lambda c: {"response": c})

    def _loaded_reply(self, call, content):
        """Ollama's answer to an empty prompt: the model is loaded, nothing generated."""
        return _json({**self._head(call, content), "done": True, "done_reason": "load"})

    def _reply_text(self, call, messages):
        """Fault content, else the next scripted reply, else the rule for what the request was built from (rules.py);
        _Refused when there is none."""
        if call.fault == "malformed_json":
            return MALFORMED_JSON
        scripted = None if call.fault == "truncated_json" else self._take_scripted(call)
        if scripted is not None:
            return scripted
        why = refusal(call.prompt, messages, self.rules)
        if why:
            raise _Refused(why)
        fmt, prompt = call.body.get("format"), rule_input(messages)
        schema = fmt if isinstance(fmt, dict) else {}
        asked = Asked(prompt, schema, self.answer_style, self.answer_sentences, self._fabricates)
        text = self.rules[call.prompt](asked)
        if self.judge_noise and call.prompt in JUDGE_PROMPTS and isinstance(fmt, dict):
            seed = (call.body.get("options") or {}).get("seed")
            text = json.dumps({**json.loads(text), "score": noisy_score(self.judge_noise, seed, prompt)})
        if self.judge_short_bias and call.prompt in JUDGE_PROMPTS and isinstance(fmt, dict):
            text = short_biased(text, prompt, first(messages, "system"))
        return text[: len(text) // 2] if call.fault == "truncated_json" else text

    def _fabricates(self, prompt) -> bool:
        """Whether this paraphrased answer adds unsupported sentences: the first answer to a question does, unless
        unfaithful_first is off (then it is faithful, as the later ones are)."""
        return self._first_answer(prompt) and self.unfaithful_first

    def _first_answer(self, prompt):
        """In the paraphrase style: True the first time an answer to this question line is asked for."""
        if self.answer_style != "paraphrase":
            return False
        question = _line_value(prompt, "Question")
        with self._lock:
            first = question not in self._answered
            self._answered.add(question)
        return first

    def _complete(self, call, messages, prompt_count, wrap):
        """Generate and answer: streamed one paced chunk per token unless stream=false; a request the fake cannot
        answer is refused (400) with the reason, before it takes a slot."""
        call.prompt = classify(messages, call.body.get("format"), call.model in self.verifier_models)
        with self._changed:
            call.record["prompt"] = call.prompt
        try:
            reply = self._reply_text(call, messages)
        except _Refused as refused:
            with self._changed:
                call.record["refused"] = str(refused)
                self._changed.notify_all()
            return _json({"error": str(refused)}, 400)
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
        return scaled_vector(text, self.embed_dim, self.embed_scale)
