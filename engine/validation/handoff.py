"""Load-time checks of the handoff authoring: each problem names the element to fix.

The built-in `hand_off_to_person` is usable in a guideline's `tools` and as a journey tool step
(`engine.stages.handoff`); these checks keep its uses unambiguous and its notices sendable.
"""

from __future__ import annotations

from collections.abc import Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.agent_config import HANDOFF_TEMPLATE_TAG, HANDOFF_TOOL, HANDOFF_UNAVAILABLE_TAG
from engine.model import AgentSnapshot


def handoff_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    """What is wrong with how `snapshot` hands off to a person."""
    if any(t.name == HANDOFF_TOOL for t in snapshot.tools):
        yield (
            f"tool '{HANDOFF_TOOL}' has the name of the built-in handoff action; rename your tool "
            "(the built-in needs no declaration)"
        )
    for g in snapshot.guidelines:
        if HANDOFF_TOOL in g.tools and not (g.action or "").strip():
            yield (
                f"guideline '{g.id}' hands off to a person but has no action; give the reason "
                "a person reads, e.g. action: hand off to a person — the customer wants a refund"
            )
    for journey in snapshot.journeys:
        for node in journey.nodes:
            if HANDOFF_TOOL in node.tools and len(node.tools) > 1:
                others = ", ".join(t for t in node.tools if t != HANDOFF_TOOL)
                yield (
                    f"journey '{journey.id}' step '{node.id}' combines {HANDOFF_TOOL} with other "
                    f"tools ({others}); a handoff step calls nothing, so give it a step of its own"
                )
    for response in snapshot.canned_responses:
        notice = {HANDOFF_TEMPLATE_TAG, HANDOFF_UNAVAILABLE_TAG} & set(response.tags)
        texts = (response.template, *response.variants.values())
        if notice and any("{{" in text or "{%" in text for text in texts):
            yield (
                f"canned response '{response.id}' is a handoff notice, which is sent as "
                "written; remove its template fields"
            )
    hours = snapshot.config.handoff.business_hours
    if hours is not None:
        try:
            ZoneInfo(hours.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            yield (
                f"config.handoff.business_hours.timezone '{hours.timezone}' is not a known time "
                "zone; use an IANA name such as Europe/Berlin"
            )
        if hours.opens >= hours.closes:
            yield (
                f"config.handoff.business_hours opens at {hours.opens} but closes at "
                f"{hours.closes}; opening must come first"
            )
        if not hours.days or any(d not in range(7) for d in hours.days):
            yield "config.handoff.business_hours.days are 0 (Monday) to 6 (Sunday), at least one"
