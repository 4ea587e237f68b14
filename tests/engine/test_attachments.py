"""Attachments on customer messages: stored with the message's event, given to tools in their
context, and a message of only files the agent cannot read is answered with the agent's
configurable `unsupported_media_response` (no LLM call, no silence, no turn on an empty text)."""

from __future__ import annotations

from typing import Any

from engine.agent_config import AgentConfig
from engine.compose import ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import Guideline
from engine.sessions.session import Attachment, EventKind, EventSource
from engine.testing import ScriptedLLM
from engine.toolkit import InProcessDispatcher, ToolRegistry, ToolResult, spec_of, tool
from engine.tools.calls import ToolCallPlan
from tests.engine.pipeline_kit import Harness, compose_echo, make_agent, match_when

RECEIPT = Attachment(kind="image", platform_id="wa-media-1", mime="image/jpeg")
VOICE = Attachment(kind="voice", platform_id="wa-media-2", mime="audio/ogg")
SEEN: list[list[dict[str, Any]]] = []


@tool(description="read a receipt the customer sent")
def read_receipt(context, note: str) -> ToolResult:
    SEEN.append(list(context.attachments))
    return ToolResult(data={"total": "12.50"})


def _customer_events(out: Any) -> list[Any]:
    return [
        e
        for e in out.state.events
        if e.kind is EventKind.MESSAGE and e.source is EventSource.CUSTOMER
    ]


async def test_a_voice_note_alone_gets_the_configured_reply_without_an_llm_call() -> None:
    llm = ScriptedLLM()
    config = AgentConfig(unsupported_media_response="Please type your question, I can't listen.")
    h = Harness(make_agent(config=config), llm, index=False)
    await h.start()

    out = await h.say("", attachments=(VOICE,))

    assert out.reply is not None and out.reply.text == "Please type your question, I can't listen."
    assert out.reply.data.get("unsupported_media") is True
    assert llm.calls == []
    [event] = _customer_events(out)
    assert event.data["attachments"] == [
        {"kind": "voice", "platform_id": "wa-media-2", "mime": "audio/ogg"}
    ]


async def test_a_location_alone_is_answered_by_a_turn_not_the_media_reply() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({}))
    llm.on(ComposedReply, compose_echo)
    h = Harness(
        make_agent(guidelines=[Guideline(id="g", condition="x", action="y")]), llm, index=False
    )
    await h.start()
    place = Attachment(kind="location", latitude=48.8584, longitude=2.2945)
    out = await h.say("Shared location: 48.858400, 2.294500", attachments=(place,))
    assert out.reply is not None and not out.reply.data.get("unsupported_media")


async def test_a_captioned_photo_runs_a_turn_and_the_tool_sees_the_attachment() -> None:
    SEEN.clear()
    rule = Guideline(id="r", condition="sends a receipt", action="Read it", tools=("read_receipt",))
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"sends a receipt": True}))
    llm.on(
        ToolCallPlan,
        {"calls": [{"tool": "read_receipt", "arguments": [{"name": "note", "value": "receipt"}]}]},
    )
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(guidelines=[rule], tools=[spec_of(read_receipt)])
    h = Harness(agent, llm, tools=InProcessDispatcher(ToolRegistry([read_receipt])), index=False)
    await h.start()

    out = await h.say("Here is my receipt", attachments=(RECEIPT,))

    assert SEEN == [[{"kind": "image", "platform_id": "wa-media-1", "mime": "image/jpeg"}]]
    [event] = _customer_events(out)
    assert event.text == "Here is my receipt"
    assert event.data["attachments"][0]["platform_id"] == "wa-media-1"
