"""Every line the engine writes itself reaches the customer in the session's language, through real
engine turns: the confirmation line and its buttons, the statement that replaces a false claim,
the fallback and no-match replies, unsupported media, handoff and ended-journey notices — and an
agent's own wording of any of them (`messages`, and the older single-language fields).

The agent serves `[en, zh-Hans, es]`. A Chinese message sets the session's language by itself
(the detector reads scripts); Spanish sessions are set to `es` directly until the detection
library lands (a Spanish message detected as nothing leaves the session's language as it is).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engine.agent_config import (
    HANDOFF_UNAVAILABLE_TAG,
    AgentConfig,
    CompositionMode,
    HandoffConfig,
)
from engine.authoring import load_agent
from engine.compose import ComposedReply
from engine.errors import LLMError
from engine.handoff import approved_notice, record_ticket
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import Guideline
from engine.sessions.session import Attachment, Handoff, SessionMode, SessionState
from engine.testing import ScriptedLLM
from engine.toolkit import InProcessDispatcher, ToolRegistry, ToolResult, spec_of, tool
from engine.tools.calls import ToolCallPlan
from tests.engine.pipeline_kit import Harness, compose_echo, make_agent, match_when

PAID: list[str] = []


@tool(description="Pay a bill", consequential=True, confirm="always")
def pay_bill(bill_id: str) -> ToolResult:
    PAID.append(bill_id)
    return ToolResult(data={"paid": bill_id})


PAY = Guideline(id="pay", condition="wants to pay a bill", action="Pay it", tools=("pay_bill",))
SERVED = ("en", "zh-Hans", "es")
PLAN = {"calls": [{"tool": "pay_bill", "arguments": [{"name": "bill_id", "value": "B-77"}]}]}


def harness(compose: Any = compose_echo, **config: Any) -> Harness:
    PAID.clear()
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"pay a bill": True}))
    llm.on(ToolCallPlan, PLAN)
    llm.on(ComposedReply, compose)
    agent = make_agent(
        guidelines=[PAY],
        tools=[spec_of(pay_bill)],
        config=AgentConfig(**{"languages": SERVED, **config}),
    )
    return Harness(agent, llm, tools=InProcessDispatcher(ToolRegistry([pay_bill])), index=False)


async def start(h: Harness, language: str | None = None) -> None:
    """The session, in `language` already (as an earlier message would have set it)."""
    await h.agents.publish(h.agent)
    await h.sessions.create(
        SessionState(id="s1", agent_id=h.agent.id, customer_id="c1", language=language)
    )


# -- the confirmation line and its buttons ----------------------------------------------------------


async def test_the_confirmation_line_and_its_buttons_are_in_chinese_for_a_chinese_message() -> None:
    h = harness()
    await start(h)

    asked = await h.say("我想支付账单 B-77")

    assert asked.state.language == "zh-Hans"
    assert asked.reply.text.endswith(
        "\n\n请确认：Pay a bill（bill_id：B-77）。回复“是”继续办理，回复“否”取消。"
    )
    assert [(o["id"], o["label"]) for o in asked.reply.data["options"]] == [
        ("confirm", "是，继续办理"),
        ("cancel", "否，取消"),
    ]
    assert asked.reply.data["language"] == "zh-Hans"
    assert PAID == []

    done = await h.say("", choice="confirm")  # the button: the same id in every language

    assert PAID == ["B-77"]
    assert done.state.pending_confirmation is None


async def test_the_confirmation_line_and_its_buttons_are_in_spanish_for_a_spanish_session() -> None:
    h = harness()
    await start(h, "es")

    asked = await h.say("quiero pagar la factura B-77")

    assert asked.state.language == "es"
    assert asked.reply.text.endswith(
        "\n\nConfírmame, por favor: Pay a bill (bill_id: B-77). "
        "Responde «sí» para continuar o «no» para cancelar."
    )
    assert [o["label"] for o in asked.reply.data["options"]] == ["Sí, adelante", "No"]

    declined = await h.say("", choice="cancel")

    assert PAID == []
    assert declined.state.pending_confirmation is None


async def test_an_english_session_keeps_the_english_line_word_for_word() -> None:
    h = harness()
    await start(h)

    asked = await h.say("pay bill B-77")

    assert asked.state.language == "en"
    assert asked.reply.text.endswith(
        "\n\nPlease confirm — Pay a bill (bill_id B-77). Reply yes to go ahead or no to cancel."
    )
    assert [o["label"] for o in asked.reply.data["options"]] == ["Yes, go ahead", "No"]


async def test_the_agents_own_wording_of_the_confirmation_is_used_in_its_language() -> None:
    h = harness(
        messages={
            "es": {
                "confirmation": "¿Seguimos? {{summary}}. Pulsa un botón.",
                "confirm_yes": "Sí, pagar",
            }
        }
    )
    await start(h, "es")

    asked = await h.say("quiero pagar la factura B-77")

    assert asked.reply.text.endswith("\n\n¿Seguimos? Pay a bill (bill_id: B-77). Pulsa un botón.")
    assert [o["label"] for o in asked.reply.data["options"]] == ["Sí, pagar", "No"]


# -- what did not happen --------------------------------------------------------------------------


def claims_it_is_done(prompt: str) -> dict[str, Any]:
    """A model that says the bill is paid while it waits for the customer's yes."""
    return {"message": "Done — I paid the bill B-77 for you.", "applied": []}


@pytest.mark.parametrize(
    ("language", "message", "statement"),
    [
        (
            None,
            "我想支付账单 B-77",
            "目前尚未办理任何操作：执行“Pay a bill”之前，需要先得到您的确认。",
        ),
        (
            "es",
            "quiero pagar la factura B-77",
            "Todavía no se ha hecho nada: necesito tu confirmación antes de continuar con "
            "«Pay a bill».",
        ),
    ],
)
async def test_a_false_claim_is_replaced_by_the_engines_statement_in_the_customers_language(
    language: str | None, message: str, statement: str
) -> None:
    h = harness(compose=claims_it_is_done)
    await start(h, language)

    out = await h.say(message)

    first, confirmation = out.reply.text.split("\n\n")
    assert first == statement
    assert confirmation.startswith(("请确认：", "Confírmame"))
    assert "paid" not in out.reply.text


# -- replies the engine sends instead of the model's ------------------------------------------------


async def test_the_fallback_reply_is_in_the_customers_language_and_keeps_the_buttons() -> None:
    h = harness(compose=LLMError("the model is down"))
    await start(h)

    out = await h.say("我想支付账单 B-77")

    assert out.reply.text.startswith("抱歉，刚才没能处理完您的请求。您的消息已保存，请稍后再试。")
    assert out.reply.data["fallback"] is True
    assert [o["label"] for o in out.reply.data["options"]] == ["是，继续办理", "否，取消"]


async def test_the_no_match_reply_is_in_the_customers_language() -> None:
    h = harness(composition_mode=CompositionMode.CANNED_STRICT)  # and no template at all
    h.llm.on(ToolCallPlan, {"calls": []})
    await start(h, "es")

    out = await h.say("hola")

    assert (
        out.reply.text
        == "Lo siento, con eso no puedo ayudarte por aquí. ¿Podrías decirlo de otra manera?"
    )


async def test_unsupported_media_is_answered_in_the_sessions_language() -> None:
    h = harness()
    await start(h, "zh-Hans")

    voice = Attachment(kind="voice", platform_id="wa-media-2", mime="audio/ogg")
    out = await h.say("", attachments=(voice,))

    assert out.reply.text == "抱歉，我在这里无法打开这类附件。能否请您直接用文字告诉我您的需求？"
    assert out.reply.data["language"] == "zh-Hans"


async def test_a_changed_single_language_field_is_the_default_languages_line_only() -> None:
    h = harness(unsupported_media_response="Sorry, text only please.")
    voice = Attachment(kind="voice", platform_id="wa-media-2", mime="audio/ogg")
    await start(h, "es")

    spanish = await h.say("", attachments=(voice,))

    assert spanish.reply.text.startswith("Lo siento, no puedo abrir ese tipo de archivos")
    assert h.agent.config.lines().line("unsupported_media", "en") == "Sorry, text only please."


# -- handoff --------------------------------------------------------------------------------------


async def test_the_handoff_notice_is_in_the_customers_language() -> None:
    h = harness(handoff=HandoffConfig(request_phrases=("hablar con una persona",)))
    await start(h, "es")

    out = await h.say("quiero hablar con una persona")

    assert out.reply.text == (
        "Te paso con una persona de nuestro equipo. Te responderá por aquí mismo."
    )
    assert out.reply.data["language"] == "es"


async def test_the_agents_handoff_message_stays_its_default_languages_notice() -> None:
    h = harness(handoff=HandoffConfig(message="A colleague will take over here."))
    await start(h)

    english = await h.say("can I talk to a human?")

    assert english.reply.text == "A colleague will take over here."


# -- overrides from YAML --------------------------------------------------------------------------

AGENT_YAML: dict[str, Any] = {
    "agent": {
        "id": "shop",
        "name": "Shop",
        "languages": ["es", "en", "zh-Hans"],
        "messages": {"zh-Hans": {"no_match": "这个我帮不了您。"}},
        "config": {
            "no_match_response": "Eso no lo puedo hacer por aquí.",
            "messages": {"es": {"confirm_no": "No, gracias"}},
        },
    },
    "guidelines": [{"id": "hi", "condition": "the customer greets", "action": "greet back"}],
}


def test_lines_are_overridden_per_language_in_yaml_under_the_agent_or_its_config() -> None:
    agent = load_agent(AGENT_YAML)
    lines = agent.config.lines()

    assert lines.line("no_match", "zh-Hans") == "这个我帮不了您。"  # agent.messages
    assert lines.line("confirm_no", "es") == "No, gracias"  # agent.config.messages
    # no_match_response, changed, is the default language's (es) line, and only its
    assert lines.line("no_match", "es") == "Eso no lo puedo hacer por aquí."
    assert lines.line("no_match", "en") == "Sorry, I can't help with that here. Could you rephrase?"
    assert lines.line("confirm_yes", "es") == "Sí, adelante"  # the rest: the shipped catalog


PUBLISHED: dict[str, Any] = {
    "agent": {"id": "shop", "name": "Shop", "languages": ["es", "en"]},
    "guidelines": [{"id": "hi", "condition": "the customer greets", "action": "greet back"}],
    "canned_responses": [{"id": "hello", "template": "Hola"}],
}


def test_an_agent_without_messages_or_variants_keeps_the_version_it_was_published_under() -> None:
    # The version this document had before `messages` and `variants` existed.
    assert load_agent(PUBLISHED).version == "7404aa5f4ee73745"

    worded = {**PUBLISHED, "agent": {**PUBLISHED["agent"], "messages": {"es": {"no_match": "?"}}}}
    varied = {
        **PUBLISHED,
        "canned_responses": [{"id": "hello", "template": "Hola", "variants": {"en": "Hi"}}],
    }
    assert load_agent(worded).version != "7404aa5f4ee73745"
    assert load_agent(varied).version != "7404aa5f4ee73745"


def test_the_no_one_available_notice_of_an_overdue_handoff_is_in_the_sessions_language() -> None:
    # What the scheduled sweep (functions.handoff_sweep) records for a session in Chinese.
    agent = harness().agent
    since = datetime(2026, 1, 1, 9, tzinfo=UTC)
    session = SessionState(
        id="s",
        agent_id=agent.id,
        customer_id="c",
        language="zh-Hans",
        mode=SessionMode.HUMAN,
        handoff=Handoff(reason="asked", trigger="customer_request", since=since),
    )
    notice = approved_notice(agent, HANDOFF_UNAVAILABLE_TAG, "zh-Hans")
    change = record_ticket(
        session, "t", since + timedelta(hours=1), why="late", notice=notice, language="zh-Hans"
    )

    told = change.new_events[-1]
    assert told.text == "我们团队目前暂时无人在线。您的请求已记录，工作人员会尽快在这里回复您。"
    assert told.data == {"handoff_notice": True, "language": "zh-Hans"}
