"""What operators and their probes read: metrics, liveness, readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from verifier import __version__
from verifier.service.api import calls
from verifier.service.api.bodies import Health, NotReady, Ready
from verifier.service.api.deps import Read, Service
from verifier.service.api.errors import RETRY_AFTER_S, error, responses
from verifier.service.metrics import CONTENT_TYPE

router = APIRouter()


@router.get(
    "/metrics",
    tags=["operations"],
    summary="Prometheus metrics (read)",
    response_class=Response,
    responses={
        200: {
            "description": "The Prometheus text format.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **responses(401, 403),
    },
)
async def metrics(token: Read, service: Service) -> Response:
    text = await run_in_threadpool(service.metrics.render)
    return Response(text, media_type=CONTENT_TYPE)


@router.get("/healthz", response_model=Health, tags=["operations"], summary="Process alive")
async def healthz() -> Health:
    return Health(status="ok", version=__version__)


@router.get(
    "/readyz",
    response_model=Ready,
    tags=["operations"],
    summary="Database reachable, migrations at head, queue reachable",
    responses={503: {"model": NotReady}},
)
async def readyz(service: Service) -> Response:
    checks = await run_in_threadpool(calls.readiness, service)
    if all(v == "ok" for v in checks.values()):
        return JSONResponse(Ready(status="ready", checks=checks).model_dump())
    problems = "; ".join(f"{k}: {v}" for k, v in checks.items() if v != "ok")
    return error(503, "not_ready", problems, headers={"Retry-After": RETRY_AFTER_S}, checks=checks)
