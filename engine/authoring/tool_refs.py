"""How authors name a tool in the builder: its `ToolSpec` (registered with the agent on first
use) or the name of a tool registered elsewhere. Guidelines and tool states take either."""

from __future__ import annotations

from collections.abc import Sequence

from engine.model import ToolSpec

ToolRef = ToolSpec | str
ToolRefs = ToolRef | Sequence[ToolRef]
