"""How authors name a tool in the builder: its `ToolSpec` or its `@tool` function (registered
with the agent on first use), or the name of a tool registered elsewhere. Guidelines and tool
states take any of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.tools.spec import ToolSpec

ToolRef = ToolSpec | str | Callable[..., Any]
ToolRefs = ToolRef | Sequence[ToolRef]


def declared_spec(ref: object) -> ToolSpec | None:
    """The spec a tool reference declares: a `ToolSpec` itself, or the one `@tool` attached to a
    function (`engine.toolkit.tool`); None for a name or anything else."""
    if isinstance(ref, ToolSpec):
        return ref
    spec = getattr(ref, "tool_spec", None)
    return spec if callable(ref) and isinstance(spec, ToolSpec) else None
