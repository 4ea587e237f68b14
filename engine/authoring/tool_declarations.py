"""The `tools` section of an agent document against the Python `@tool` registry.

A tool is declared once, in Python: the document may name it (`tools: [transfer_money]`), omit
the section (every registered tool), or keep a full declaration — which must then say what the
`@tool` function says, or the difference is a problem naming the field. Without a registry (a
document posted to the management API), a full declaration stands on its own and a bare name is
a problem: nothing says what that tool's parameters are.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from engine.tools.spec import ToolParameter, ToolSpec

# Compared between a document's declaration and the registry's, in this order.
_SPEC_FIELDS = (
    "description",
    "kind",
    "consequential",
    "confirm",
    "fills",
    "timeout_seconds",
    "speculative",
)
_PARAMETER_FIELDS = (
    "type",
    "items",
    "description",
    "enum",
    "required",
    "default",
    "composed",
    "secret",
    "currency",
    "pattern",
    "source",
    "derived",
)


@dataclass
class ResolvedTools:
    """The specs the agent gets, the problems found, and the names that were declared but could
    not be resolved (references to them are not reported a second time)."""

    specs: list[ToolSpec] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unresolved: set[str] = field(default_factory=set)


def resolve_tools(
    declared: Sequence[ToolSpec | str],
    registry: Sequence[ToolSpec] | None,
    *,
    section_given: bool,
) -> ResolvedTools:
    """Turn the document's `tools` entries into specs, checked against `registry` when given."""
    resolved = ResolvedTools()
    if registry is None:
        for entry in declared:
            if isinstance(entry, ToolSpec):
                resolved.specs.append(entry)
                continue
            resolved.unresolved.add(entry)
            resolved.problems.append(
                f"tools[{entry}]: named only, so its parameters come from its @tool function; "
                "load the agent with its tools registry (waypoint validate --tools MODULE) or "
                "declare the tool in full"
            )
        return resolved
    registered = {spec.name: spec for spec in registry}
    if not section_given:
        resolved.specs.extend(registry)
        return resolved
    for entry in declared:
        name = entry if isinstance(entry, str) else entry.name
        spec = registered.get(name)
        if spec is None:
            close = difflib.get_close_matches(name, list(registered), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            resolved.problems.append(
                f"tools[{name}]: no @tool named '{name}' in the tools registry{hint} "
                f"(registered: {', '.join(sorted(registered)) or 'none'})"
            )
            resolved.unresolved.add(name)
            continue
        if isinstance(entry, ToolSpec):
            differences = list(declaration_differences(entry, spec))
            if differences:
                resolved.problems.append(
                    f"tools[{name}]: the declaration differs from its @tool function: "
                    + "; ".join(differences)
                    + f" — write just `{name}` to take the @tool declaration"
                )
        resolved.specs.append(spec)
    return resolved


def declaration_differences(declared: ToolSpec, registered: ToolSpec) -> Iterator[str]:
    """Each way a document's declaration of a tool differs from its `@tool` spec, readably."""
    for name in _SPEC_FIELDS:
        mine, theirs = getattr(declared, name), getattr(registered, name)
        if mine != theirs:
            yield f"{name} is {_shown(mine)} here but {_shown(theirs)} in @tool"
    ours = {p.name: p for p in declared.parameters}
    theirs_by_name = {p.name: p for p in registered.parameters}
    for name in sorted(ours.keys() - theirs_by_name.keys()):
        yield f"parameter '{name}' is not a parameter of the @tool function"
    for name in sorted(theirs_by_name.keys() - ours.keys()):
        yield f"parameter '{name}' of the @tool function is not declared"
    for name in sorted(ours.keys() & theirs_by_name.keys()):
        yield from _parameter_differences(ours[name], theirs_by_name[name])


def _parameter_differences(declared: ToolParameter, registered: ToolParameter) -> Iterator[str]:
    for name in _PARAMETER_FIELDS:
        mine, theirs = getattr(declared, name), getattr(registered, name)
        if mine != theirs:
            yield (
                f"parameter '{declared.name}' {name} is {_shown(mine)} here "
                f"but {_shown(theirs)} in @tool"
            )


def _shown(value: object) -> str:
    text = getattr(value, "value", value)  # enums read as their YAML spelling
    if isinstance(text, tuple):
        text = list(text)
    return repr(text)
