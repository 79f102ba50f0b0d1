"""The floor under `bench collect`'s ingest: the same HTTP stack as `collect` (uvicorn, Starlette) serving a
bare POST /v1/traces that reads the body and answers 200 with nothing else, and GET / for the bench's start
check. What the bench's clients reach against it is the most the receiver could reach on this machine.

    python -m bench.collect_floor PORT
"""

from __future__ import annotations

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


async def traces(request: Request) -> Response:
    await request.body()
    return Response(b"", media_type="application/x-protobuf")


async def health(request: Request) -> Response:
    return JSONResponse({"receiver": "ok", "ingest": {"requests": 0, "transactions": 0}})


app = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"]), Route("/", health, methods=["GET"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
