"""The OTLP/HTTP trace receiver: POST /v1/traces, protobuf or JSON, answered 200 only once every span of the
request is in the store or, while the store is busy, in the journal (store/journal.py), so an exporter never
loses a span it saw acknowledged. Concurrent requests are written together, one transaction per group
(pipeline/collect/ingest.py). Bad requests get a bounded answer that says why and store nothing: 400 for a
body that is not an OTLP trace request, 413 over the size limit, 415 for another content type, 401 without the
bearer token when one is set, 503 when neither the store nor the journal can keep the spans (exporters retry)."""

from __future__ import annotations

import hmac
import zlib

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from pipeline.collect.ingest import GroupWriter
from pipeline.collect.otlp import JSON, PROTOBUF, BadRequest, decode, response
from store.errors import ResultNotKept
from store.traces import received_counts, traced_summary

TRACES_PATH = "/v1/traces"


class TooLarge(ValueError):
    pass


def create_app(db, max_body_bytes: int, token: str | None = None, lock_timeout_s: float = 1.0, status=None):
    """The receiver for one store. `status()`, when given, adds the online worker's state to GET /."""
    writer = GroupWriter(db, lock_timeout_s)

    async def traces(request: Request) -> Response:
        refused = _refused(request, token, max_body_bytes)
        if refused is not None:
            return refused
        content_type = _content_type(request)
        try:
            body = _inflate(
                await _read(request, max_body_bytes), request.headers.get("content-encoding"), max_body_bytes
            )
            spans = decode(body, content_type)
        except TooLarge as exc:
            return _error(413, str(exc))
        except BadRequest as exc:
            return _error(400, str(exc))
        except ClientDisconnect:
            return _error(400, "the client closed the connection before the body was read")
        if spans:
            try:
                await run_in_threadpool(writer.save, spans)
            except ResultNotKept as exc:
                return _error(503, f"the spans could not be kept: {exc}", retry_after=5)
        return Response(response(content_type), media_type=content_type)

    async def health(request: Request) -> Response:
        counts = await run_in_threadpool(_counts, db)
        grouped = {"requests": writer.requests, "transactions": writer.groups}  # this process's, since it started
        return JSONResponse({"receiver": "ok", **counts, "ingest": grouped, **(status() if status else {})})

    return Starlette(routes=[Route(TRACES_PATH, traces, methods=["POST"]), Route("/", health, methods=["GET"])])


def _counts(db) -> dict:
    try:
        return {**received_counts(db), "traced_runs": traced_summary(db)}
    except Exception as exc:  # noqa: BLE001 - the store is busy: the receiver still answers
        return {"store": f"unavailable now: {exc}"}


def _refused(request: Request, token: str | None, max_body_bytes: int) -> Response | None:
    """The answer to a request refused before its body is read, else None."""
    if token:
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return _error(401, "a bearer token is required: send the header Authorization: Bearer <token>")
    if _content_type(request) not in (PROTOBUF, JSON):
        shown = (request.headers.get("content-type") or "none")[:80]
        return _error(415, f"content type {shown!r} is not accepted: send {PROTOBUF} or {JSON} (OTLP/HTTP)")
    if request.headers.get("content-encoding", "identity").lower() not in ("identity", "gzip", "deflate"):
        return _error(415, "content encoding not accepted: send the body plain, gzip or deflate")
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_body_bytes:
        return _error(413, _too_large(max_body_bytes))
    return None


def _content_type(request: Request) -> str:
    return (request.headers.get("content-type") or "").split(";")[0].strip().lower()


async def _read(request: Request, limit: int) -> bytes:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise TooLarge(_too_large(limit))
    return bytes(body)


def _inflate(body: bytes, encoding: str | None, limit: int) -> bytes:
    """The body decompressed, never past the size limit (a small gzip body can inflate to gigabytes)."""
    encoding = (encoding or "identity").lower()
    if encoding == "identity":
        return body
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BadRequest(f"the body is not valid {encoding} ({exc})") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise TooLarge(_too_large(limit, "decompressed"))
    return out


def _too_large(limit: int, what: str = "") -> str:
    return (
        f"the {what + ' ' if what else ''}body is larger than {limit / 1e6:g} MB: send smaller batches "
        "(the exporter's max_export_batch_size) or raise collect_max_body_mb"
    )


def _error(code: int, message: str, retry_after: int | None = None) -> Response:
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    return PlainTextResponse(message, status_code=code, headers=headers)
