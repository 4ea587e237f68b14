"""The tools behind the benchmarks' synthetic agents (`bench.scale_agents`,
`bench.worked_example`): instant, deterministic results, so a measured turn times the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.ports import ToolCall, ToolContext, ToolOutcome


class SyntheticTools:
    """`ToolDispatcher` for the synthetic agents' tools: instant, deterministic results."""

    async def dispatch(self, calls: Sequence[ToolCall], context: ToolContext) -> list[ToolOutcome]:
        return [ToolOutcome(call_id=c.id, tool=c.tool, data=_tool_data(c)) for c in calls]


def _tool_data(call: ToolCall) -> dict[str, Any]:
    args = call.arguments
    if call.tool.startswith("submit"):
        return {"accepted": True, "ticket": f"TK-{len(call.idempotency_key) * 37 % 10_000}"}
    if call.tool == "lookup_order":
        return {"order_number": args.get("order_number"), "status": "shipped", "items": 2}
    return {"record": next(iter(args.values()), None), "status": "active", "balance": "120.00"}
