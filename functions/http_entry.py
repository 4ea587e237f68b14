"""The Lambda entry point of an HTTP app: API Gateway HTTP API (payload v2) → ASGI via Mangum,
with the function's structured logger and the warm container's event loop bound first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from mangum import Mangum
from starlette.applications import Starlette

from infra.runtime import current_runtime

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def http_lambda_handler(app: Starlette, logger: Logger) -> LambdaHandler:
    asgi = Mangum(app, lifespan="off")

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        """Lambda entry point (API Gateway HTTP API, payload v2)."""
        current_runtime().bind_event_loop()
        response: dict[str, Any] = asgi(event, context)
        return response

    return handler
