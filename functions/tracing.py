"""X-Ray subsegments for the handlers, without paying for the X-Ray SDK at import.

Constructing Powertools' `Tracer` imports `aws_xray_sdk` (≈ 200–400 ms on a 2-core machine, the
largest single item of the worker's cold start; `disabled=True` does not avoid it). Lambda's
active tracing (`Tracing: Active` in template.yaml) already records every invocation's segment
without any SDK in the function, so the SDK is only worth loading for the finer subsegments
(`answer` per burst, cold-start annotation).

`LazyTracer` therefore decides on the first *invocation*, never at import:

- the SDK tracer is built when `WAYPOINT_XRAY_SDK` is true **and** Powertools' own rule says
  tracing is on (in a Lambda runtime, not SAM local or Chalice, `POWERTOOLS_TRACE_DISABLED`
  not true);
- otherwise the decorated functions run undecorated, and the invocation is still traced by
  Lambda's active tracing.

The decision is made once per process (a Lambda environment's variables do not change).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

SDK_SWITCH = "WAYPOINT_XRAY_SDK"
_TRUE = {"1", "true", "yes", "on"}

F = TypeVar("F", bound=Callable[..., Any])


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def sdk_tracing_wanted() -> bool:
    """Whether the X-Ray SDK subsegments are wanted in this process (see the module docstring)."""
    if not _truthy(SDK_SWITCH) or _truthy("POWERTOOLS_TRACE_DISABLED"):
        return False
    in_lambda = bool(os.environ.get("LAMBDA_TASK_ROOT"))
    emulated = bool(os.environ.get("AWS_SAM_LOCAL") or os.environ.get("AWS_CHALICE_CLI_MODE"))
    return in_lambda and not emulated


class LazyTracer:
    """Powertools `Tracer` decorators that build the tracer on first use, and only if wanted."""

    def __init__(self, service: str) -> None:
        self.service = service
        self._decided = False
        self._tracer: Tracer | None = None

    @property
    def tracer(self) -> Tracer | None:
        """The SDK tracer if tracing is wanted (built now on first access), else None."""
        if not self._decided:
            self._decided = True
            if sdk_tracing_wanted():
                from aws_lambda_powertools import Tracer

                self._tracer = Tracer(service=self.service)
        return self._tracer

    def capture_lambda_handler(self, handler: F) -> F:
        """Like `Tracer.capture_lambda_handler`, decided on the first invocation."""
        wrapped: dict[str, Callable[..., Any]] = {}

        @functools.wraps(handler)
        def run(event: Any, context: Any) -> Any:
            tracer = self.tracer
            if tracer is None:
                return handler(event, context)
            if "fn" not in wrapped:
                wrapped["fn"] = tracer.capture_lambda_handler(handler)
            return wrapped["fn"](event, context)

        return cast(F, run)

    def capture_method(self, method: F) -> F:
        """Like `Tracer.capture_method` (sync or async), decided on the first call."""
        wrapped: dict[str, Callable[..., Any]] = {}

        def traced() -> Callable[..., Any] | None:
            tracer = self.tracer
            if tracer is None:
                return None
            if "fn" not in wrapped:
                wrapped["fn"] = tracer.capture_method(method)
            return wrapped["fn"]

        if inspect.iscoroutinefunction(method):

            @functools.wraps(method)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                fn = traced()
                return await (fn or method)(*args, **kwargs)

            return cast(F, run_async)

        @functools.wraps(method)
        def run(*args: Any, **kwargs: Any) -> Any:
            fn = traced()
            return (fn or method)(*args, **kwargs)

        return cast(F, run)


__all__ = ["SDK_SWITCH", "LazyTracer", "sdk_tracing_wanted"]
