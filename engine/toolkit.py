"""Writing tools: the `@tool` decorator, `ToolResult`, and the in-process dispatcher.

```python
@tool(description="Look up the balance of an account")
async def get_balance(context: ToolContext, account_id: str) -> ToolResult:
    return ToolResult(data={"balance": "1000.00"})
```
Parameters are typed from the signature (`engine.values.types`: str, int, float, Decimal, bool,
`datetime.date`, `datetime.datetime`, `datetime.time`, `engine.values.Money`, `Literal[...]` or an
`Enum` for a choice, and a list of any of these; a default makes a parameter optional) — any other
type is refused when the tool is decorated. `Annotated[str, "description"]` documents a
parameter. The function receives exactly the types it declares. The decorated function keeps
working as a function and carries its `ToolSpec`.
"""

from __future__ import annotations

import asyncio
import collections.abc
import enum
import importlib
import inspect
import json
import time
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from datetime import time as clock_time
from decimal import Decimal
from typing import Any, Literal, get_args, get_origin

from engine.errors import InvalidAgentDefinition, ToolArgumentError, WaypointError
from engine.ports import ToolCall, ToolContext, ToolOutcome
from engine.tools.spec import ConfirmPolicy, ToolKind, ToolParameter, ToolSpec
from engine.values.money import Money
from engine.values.types import coerce

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

    def typed_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the function's own types (a call that crossed Step Functions holds
        JSON: "2026-12-12" becomes a `date`, "40.00 USD" a `Money`, a choice its `Enum`
        member). Raises ToolArgumentError naming an argument that does not read as its type."""
        hints = typing.get_type_hints(self.fn, include_extras=True)
        typed = dict(arguments)
        for param in self.spec.parameters:
            if param.name not in arguments or arguments[param.name] is None:
                continue
            try:
                value = coerce(param.shape, arguments[param.name])
                typed[param.name] = _converter(hints.get(param.name, str))(value)
            except (ValueError, KeyError, TypeError) as exc:
                raise ToolArgumentError(
                    f"argument {param.name!r} of {self.spec.name}: {exc}"
                ) from None
        return typed


_SIMPLE_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    Decimal: "number",
    bool: "boolean",
    datetime: "datetime",
    date: "date",
    clock_time: "time",
    Money: "money",
}
_LISTS = (list, tuple, Sequence, collections.abc.Sequence)


class UnsupportedParameterType(InvalidAgentDefinition):
    """A tool parameter whose Python type the engine cannot read a customer's value as."""


def _unsupported(tool: str, name: str, annotation: Any) -> UnsupportedParameterType:
    plain = type(annotation) is type
    shown = annotation.__name__ if plain else str(annotation).replace("typing.", "")
    return UnsupportedParameterType(
        [
            f"tool '{tool}': parameter '{name}' has type {shown}, which Waypoint cannot read a "
            f"customer's value as; supported: str, int, float, Decimal, bool, datetime.date, "
            "datetime.datetime, datetime.time, engine.values.Money, a Literal or an Enum, and "
            "a list of one of these"
        ]
    )


def _scalar(annotation: Any) -> tuple[str, tuple[str, ...]] | None:
    """(type, enum choices) of a scalar annotation, or None when it is not one we read."""
    if get_origin(annotation) is Literal:
        return "string", tuple(str(a) for a in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "string", tuple(str(m.value) for m in annotation)
    ptype = _SIMPLE_TYPES.get(annotation)
    return (ptype, ()) if ptype is not None else None


def _parameter(tool: str, name: str, annotation: Any, default: Any) -> ToolParameter:
    description = ""
    if get_origin(annotation) is typing.Annotated:
        annotation, *extras = get_args(annotation)
        description = next((e for e in extras if isinstance(e, str)), "")
    declared = annotation
    optional = default is not inspect.Parameter.empty
    if get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != len(get_args(annotation)):
            optional = True
        if len(args) != 1:
            raise _unsupported(tool, name, declared)
        annotation = args[0]
    items: str | None = None
    scalar = _scalar(annotation)
    if scalar is None and get_origin(annotation) in _LISTS:
        inner = [a for a in get_args(annotation) if a is not Ellipsis]
        item = _scalar(inner[0]) if len(inner) == 1 else None
        if item is None:
            raise _unsupported(tool, name, declared)
        items, scalar = item[0], ("array", item[1])
    if scalar is None:
        raise _unsupported(tool, name, declared)
    ptype, enum_values = scalar
    return ToolParameter(
        name=name,
        type=ptype,
        items=items,
        description=description,
        enum=enum_values,
        required=not optional,
        default=None if default is inspect.Parameter.empty else default,
    )


def _converter(annotation: Any) -> Callable[[Any], Any]:
    """What turns an engine-typed value (Decimal, str of a choice, list) into the exact Python
    type the function declares: a float for `float`, an Enum member for an `Enum`."""
    if get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else annotation
    if annotation is float:
        return float
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        members = {str(m.value): m for m in annotation}
        return lambda v: members[str(v)]
    if get_origin(annotation) in _LISTS:
        inner = [a for a in get_args(annotation) if a is not Ellipsis]
        each = _converter(inner[0]) if inner else (lambda v: v)
        build = tuple if get_origin(annotation) is tuple else list
        return lambda v: build(each(x) for x in v)
    return lambda v: v


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
    currency: str | None = None,
    sources: Mapping[str, str] | None = None,
    derived: Sequence[str] = (),
    patterns: Mapping[str, str] | None = None,
    speculative: bool = False,
) -> Any:
    """Decorate a function as a tool. Its first parameter may be the `ToolContext`.

    `consequential` marks a tool that changes something for the customer (money, orders);
    `confirm` overrides when the customer must agree to the exact call first (see `ToolSpec`);
    `composed` names parameters the model may phrase itself (a search query) — only on
    non-consequential tools; `fills` (a selector or interrupter) names the value the customer's
    pick is stored as — by default the tool's name without a `choose_`/`pick_`/`select_` prefix;
    `secret` names parameters whose values (a password) reach this tool and are masked
    everywhere else (see `engine.privacy.secrets`). Where values come from (`engine.values.provenance`):
    `currency` is the currency of a `Money` amount the customer gives without one; `sources`
    maps a parameter to the tool result it comes from (`{"account_id":
    "lookup_account_id.account_id"}`); `derived` names parameters the model may work out from
    the customer's words (confirmed on a consequential tool); `patterns` gives a text
    parameter's shape as a regular expression (`{"to_account_id": r"\\d{7,10}"}`).
    `speculative` declares that the tool only reads (no side effect, safe to call with
    arguments the turn may not use): with `speculation: on` a predicted call to it runs ahead
    (`engine.stages.tools_ahead`).

    A parameter of a type the engine cannot read (a dict, an object, a union) is refused here,
    naming the tool, the parameter and the supported types."""

    def wrap(f: ToolFunction) -> ToolFunction:
        tool_name = name or f.__name__
        hints = typing.get_type_hints(f, include_extras=True)
        params = []
        for pname, p in inspect.signature(f).parameters.items():
            annotation = hints.get(pname, str)
            if annotation is ToolContext or pname == "context":
                continue
            param = _parameter(tool_name, pname, annotation, p.default)
            update: dict[str, Any] = {
                "composed": pname in composed,
                "secret": pname in secret,
                "derived": pname in derived,
                "source": (sources or {}).get(pname),
                "pattern": (patterns or {}).get(pname),
            }
            if currency is not None and param.kind == "money":
                update["currency"] = currency
            param = ToolParameter.model_validate({**param.model_dump(), **update})
            params.append(param)
        named = {"secret": secret, "derived": derived}
        named |= {"sources": list(sources or {}), "patterns": list(patterns or {})}
        for option, names in named.items():
            unknown = sorted(set(names) - {p.name for p in params})
            if unknown:
                # A typo here would leave a password unmasked or a value unchecked: refuse it.
                raise InvalidAgentDefinition(
                    [
                        f"tool {tool_name!r}: {option} names {', '.join(unknown)}, which "
                        f"is not a parameter (parameters: {', '.join(p.name for p in params)})"
                    ]
                )
        doc = inspect.getdoc(f) or ""
        spec = ToolSpec(
            name=tool_name,
            description=description or doc.split("\n\n")[0],
            parameters=tuple(params),
            kind=ToolKind(kind),
            consequential=consequential,
            confirm=confirm,
            fills=fills,
            timeout_seconds=timeout_seconds,
            speculative=speculative,
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
            arguments = registered.typed_arguments(call.arguments)
            result = await asyncio.wait_for(
                _call(registered.fn, ctx, arguments), timeout=registered.spec.timeout_seconds
            )
        except TimeoutError:
            result = ToolResult(error=f"timed out after {registered.spec.timeout_seconds:g}s")
        except ToolArgumentError as exc:  # never reaches the tool as text
            result = ToolResult(error=str(exc))
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
