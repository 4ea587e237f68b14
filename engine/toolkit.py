"""Writing tools: the `@tool` decorator, `ToolResult`, and the in-process dispatcher.

```python
@tool(description="Look up the balance of an account")
async def get_balance(context: ToolContext, account_id: str) -> ToolResult:
    return ToolResult(data={"balance": "1000.00"})
```
Parameters are typed from the signature (str/int/float/Decimal/bool/list/dict, `Literal[...]` or an
`Enum` for enums; a default makes a parameter optional). `Annotated[str, "description"]` documents
a parameter. The decorated function keeps working as a function and carries its `ToolSpec`.
"""

from __future__ import annotations

import asyncio
import enum
import importlib
import inspect
import json
import time
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, get_args, get_origin

from engine.errors import InvalidAgentDefinition, WaypointError
from engine.ports import ToolCall, ToolContext, ToolOutcome
from engine.tool_spec import ConfirmPolicy, ParameterType, ToolKind, ToolParameter, ToolSpec

MAX_RESULT_CHARS = 20_000  # a huge result is cut before it reaches the LLM


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns.

    data      — what the LLM sees;
    metadata  — for the application, never shown to the LLM;
    control   — engine directives, e.g. {"lifespan": "session"} or an interrupt;
    view      — what the channel renders (buttons, cards, an error tip); never shown to the LLM;
    fragments — response fragments composition may use like canned responses:
                [{"id": "...", "text": "Your balance is {{balance}}", "fields": {...}}].
    """

    data: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    control: dict[str, Any] = field(default_factory=dict)
    view: dict[str, Any] | None = None
    fragments: Sequence[dict[str, Any]] = ()
    error: str | None = None  # a business error; data may still be set (the LLM sees data first)


ToolFunction = Callable[..., Awaitable[ToolResult] | ToolResult]


@dataclass(frozen=True)
class RegisteredTool:
    spec: ToolSpec
    fn: ToolFunction


_SIMPLE_TYPES: dict[Any, ParameterType] = {
    str: "string",
    int: "integer",
    float: "number",
    Decimal: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def _parameter(name: str, annotation: Any, default: Any) -> ToolParameter:
    description = ""
    if get_origin(annotation) is typing.Annotated:
        annotation, *extras = get_args(annotation)
        description = next((e for e in extras if isinstance(e, str)), "")
    optional = default is not inspect.Parameter.empty
    if get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != len(get_args(annotation)):
            optional = True
        annotation = args[0] if len(args) == 1 else str
    enum_values: tuple[str, ...] = ()
    if get_origin(annotation) is Literal:
        enum_values = tuple(str(a) for a in get_args(annotation))
        ptype: ParameterType = "string"
    elif isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        enum_values = tuple(str(m.value) for m in annotation)
        ptype = "string"
    else:
        ptype = _SIMPLE_TYPES.get(get_origin(annotation) or annotation, "string")
    return ToolParameter(
        name=name,
        type=ptype,
        description=description,
        enum=enum_values,
        required=not optional,
        default=None if default is inspect.Parameter.empty else default,
    )


def tool(
    fn: ToolFunction | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    kind: ToolKind | str = ToolKind.GENERAL,
    consequential: bool = False,
    confirm: ConfirmPolicy | None = None,
    composed: Sequence[str] = (),
    fills: str | None = None,
    secret: Sequence[str] = (),
    timeout_seconds: float = 10.0,
) -> Any:
    """Decorate a function as a tool. Its first parameter may be the `ToolContext`.

    `consequential` marks a tool that changes something for the customer (money, orders);
    `confirm` overrides when the customer must agree to the exact call first (see `ToolSpec`);
    `composed` names parameters the model may phrase itself (a search query) — only on
    non-consequential tools; `fills` (a selector or interrupter) names the value the customer's
    pick is stored as — by default the tool's name without a `choose_`/`pick_`/`select_` prefix;
    `secret` names parameters whose values (a password) reach this tool and are masked
    everywhere else (see `engine.secrets`)."""

    def wrap(f: ToolFunction) -> ToolFunction:
        hints = typing.get_type_hints(f, include_extras=True)
        params = []
        for pname, p in inspect.signature(f).parameters.items():
            annotation = hints.get(pname, str)
            if annotation is ToolContext or pname == "context":
                continue
            param = _parameter(pname, annotation, p.default)
            if pname in composed:
                param = param.model_copy(update={"composed": True})
            if pname in secret:
                param = param.model_copy(update={"secret": True})
            params.append(param)
        unknown = sorted(set(secret) - {p.name for p in params})
        if unknown:
            # A typo here would leave a password unmasked: refuse it instead.
            raise InvalidAgentDefinition(
                [
                    f"tool {name or f.__name__!r}: secret names {', '.join(unknown)}, which "
                    f"is not a parameter (parameters: {', '.join(p.name for p in params)})"
                ]
            )
        doc = inspect.getdoc(f) or ""
        spec = ToolSpec(
            name=name or f.__name__,
            description=description or doc.split("\n\n")[0],
            parameters=tuple(params),
            kind=ToolKind(kind),
            consequential=consequential,
            confirm=confirm,
            fills=fills,
            timeout_seconds=timeout_seconds,
        )
        f.tool_spec = spec  # type: ignore[attr-defined]
        return f

    return wrap(fn) if fn is not None else wrap


def spec_of(fn: ToolFunction) -> ToolSpec:
    spec = getattr(fn, "tool_spec", None)
    if not isinstance(spec, ToolSpec):
        raise TypeError(f"{fn!r} is not a tool; decorate it with @tool")
    return spec


class ToolRegistry:
    """Tool implementations by name; the agent snapshot holds only their specs."""

    def __init__(self, tools: Sequence[ToolFunction] = ()) -> None:
        self._tools: dict[str, RegisteredTool] = {}
        for fn in tools:
            self.add(fn)

    def add(self, fn: ToolFunction) -> ToolSpec:
        spec = spec_of(fn)
        self._tools[spec.name] = RegisteredTool(spec, fn)
        return spec

    @property
    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    async def invoke(self, call: ToolCall, context: ToolContext) -> ToolOutcome:
        """Run one call; every failure becomes an error outcome (never an exception)."""
        registered = self._tools.get(call.tool)
        if registered is None:
            return ToolOutcome(call_id=call.id, tool=call.tool, error=f"unknown tool {call.tool!r}")
        started = time.perf_counter()
        ctx = ToolContextWithKey(**vars(context), idempotency_key=call.idempotency_key)
        try:
            result = await asyncio.wait_for(
                _call(registered.fn, ctx, call.arguments), timeout=registered.spec.timeout_seconds
            )
        except TimeoutError:
            result = ToolResult(error=f"timed out after {registered.spec.timeout_seconds:g}s")
        except Exception as exc:  # the seed's rule: a failing tool never crashes the turn
            result = ToolResult(error=f"{type(exc).__name__}: {exc}")
        return outcome_of(call, result, (time.perf_counter() - started) * 1000)


@dataclass(frozen=True)
class ToolContextWithKey(ToolContext):
    """The context a tool receives: it includes the call's idempotency key, so a retried task or a
    redelivered turn can be recognized and not repeated (money is never transferred twice)."""

    idempotency_key: str = ""


async def _call(fn: ToolFunction, context: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in arguments.items() if k in params}
    if "context" in params:
        kwargs["context"] = context
    if inspect.iscoroutinefunction(fn):
        result = await fn(**kwargs)
    else:
        # A plain function runs on a worker thread: a blocking tool must not hold the event loop,
        # or its timeout could never fire (the thread is abandoned when it does).
        result = await asyncio.to_thread(fn, **kwargs)
        if inspect.isawaitable(result):
            result = await result
    if not isinstance(result, ToolResult):
        result = ToolResult(data=result)
    return result


def json_safe(value: Any) -> Any:
    """`value` as plain JSON types; anything else becomes its string form."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def outcome_of(call: ToolCall, result: ToolResult, duration_ms: float) -> ToolOutcome:
    # Tool data is persisted with the turn and shown to the LLM: make it JSON (dates, Decimals and
    # objects become strings) and cut what is too large to be useful.
    data = json_safe(result.data)
    text = json.dumps(data, ensure_ascii=False)
    if data is not None and len(text) > MAX_RESULT_CHARS:
        data = {"truncated": text[:MAX_RESULT_CHARS]}
    return ToolOutcome(
        call_id=call.id,
        tool=call.tool,
        data=data,
        metadata=json_safe(dict(result.metadata)),
        control=json_safe(dict(result.control)),
        view=json_safe(result.view),
        fragments=tuple(json_safe(list(result.fragments))),
        error=result.error,
        duration_ms=round(duration_ms, 3),
    )


class InProcessDispatcher:
    """Runs calls concurrently in this process (local stack and tests)."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    async def dispatch(self, calls: Sequence[ToolCall], context: ToolContext) -> list[ToolOutcome]:
        return list(await asyncio.gather(*[self.registry.invoke(c, context) for c in calls]))


class ToolRegistryNotConfigured(WaypointError):
    """The tools cannot be found: the module is missing or exposes no registry."""


def registry_from_module(module_path: str, *, setting: str = "the tools module") -> ToolRegistry:
    """The `ToolRegistry` of a module exposing `registry: ToolRegistry` or `TOOLS: list` of
    @tool functions. `setting` names where the path came from, for the error message."""
    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        raise ToolRegistryNotConfigured(
            f"{setting}={module_path!r} cannot be imported: {exc}"
        ) from exc
    registry = getattr(module, "registry", None)
    if isinstance(registry, ToolRegistry):
        return registry
    tools = getattr(module, "TOOLS", None)
    if isinstance(tools, list | tuple):
        return ToolRegistry(tools)
    raise ToolRegistryNotConfigured(
        f"{module_path} exposes neither `registry: ToolRegistry` nor `TOOLS: list`"
    )
