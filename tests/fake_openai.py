"""A small OpenAI-compatible stand-in server for offline tests (standard library only).

    with FakeOpenAI(models=("llama3.2",)) as fake:
        base_url = fake.base_url          # http://127.0.0.1:PORT/v1

Speaks `GET /v1/models` and `POST /v1/chat/completions`, with `usage` token counts (words of the messages /
of the reply); a streamed completion goes out as server-sent events, one chunk per word, `usage` in a last
chunk when `stream_options.include_usage` asks for it. Replies are scripted with `enqueue` (a fenced or prose-wrapped
JSON reply is just a string); unscripted calls answer "ok". `inject` adds faults ("500", "drop");
every request is kept in `requests`.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = frozenset({"500", "drop"})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _serve(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        reply = self.server.fake.handle(self.command, self.path.split("?")[0], raw, self.headers.get("Authorization"))
        if reply is None:
            self.close_connection = True
            return
        status, payload = reply
        if isinstance(payload, list):  # server-sent events, the connection closed after the last one
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in payload:
                self.wfile.write(b"data: " + (event if isinstance(event, bytes) else json.dumps(event).encode()))
                self.wfile.write(b"\n\n")
                self.wfile.flush()
            self.close_connection = True
            return
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _serve

    def log_message(self, *args):
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


def _error(status, message, kind):
    return status, {"error": {"message": message, "type": kind, "param": None, "code": status}}


class FakeOpenAI:
    def __init__(self, models=("llama3.2", "bespoke-minicheck")):
        self.models = list(models)
        self.requests = []
        self._scripted = []
        self._faults = []
        self._lock = threading.Lock()
        self._server = self._thread = None
        self.base_url = None

    def __enter__(self):
        self._server = _Server(self)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def enqueue(self, text, times=1):
        """Script the reply text of the next chat completion(s)."""
        with self._lock:
            self._scripted.extend([text] * times)

    def inject(self, fault, times=1):
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        with self._lock:
            self._faults.extend([fault] * times)

    def chat_requests(self):
        return [r["body"] for r in self.requests if r["path"] == "/v1/chat/completions"]

    def handle(self, method, path, raw, authorization):
        body = json.loads(raw) if raw else None
        with self._lock:
            self.requests.append({"method": method, "path": path, "body": body, "authorization": authorization})
            fault = self._faults.pop(0) if self._faults and path == "/v1/chat/completions" else None
        if fault == "drop":
            return None
        if fault == "500":
            return _error(500, "internal server error", "InternalServerError")
        if (method, path) == ("GET", "/v1/models"):
            return 200, {
                "object": "list",
                "data": [{"id": m, "object": "model", "created": 1735689600, "owned_by": "fake"} for m in self.models],
            }
        if (method, path) == ("POST", "/v1/chat/completions"):
            return self._complete(body)
        return _error(404, f"no route {method} {path}", "NotFound")

    def _complete(self, body):
        if body.get("model") not in self.models:
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        with self._lock:
            text = self._scripted.pop(0) if self._scripted else "ok"
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in body.get("messages", []))
        completion_tokens = len(text.split())
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if body.get("stream"):
            return 200, _stream(body, text, usage)
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _stream(body, text, usage):
    """The chunks of a streamed completion: one per word, a finishing one, usage if asked for, [DONE]."""

    def chunk(delta, finish=None):
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {
            "id": "chatcmpl-stream",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body["model"],
            "choices": [choice],
        }

    words = [w + " " for w in text.split(" ")]
    words[-1] = words[-1][:-1]
    events = [chunk({"role": "assistant", "content": w}) for w in words if w] + [chunk({}, "stop")]
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append(
            {
                "id": "chatcmpl-stream",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [],
                "usage": usage,
            }
        )
    return events + [b"[DONE]"]
