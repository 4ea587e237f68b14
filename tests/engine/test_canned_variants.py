"""A canned response per language: `template` in the agent's default language, `variants` in the
others; the model chooses among the templates in the agent's own language (as it reads its
conditions), the session's language chooses which text is sent, and a served language a response
has no variant for is a `waypoint validate` warning, never a failure."""

from __future__ import annotations

from typing import Any

from engine.agent_config import AgentConfig, CompositionMode
from engine.authoring import Agent, load_agent
from engine.compose import CannedChoice, ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import CannedResponse, Guideline
from engine.sessions.session import SessionState
from engine.testing import ScriptedLLM
from engine.tools.calls import ToolCallPlan
from engine.validation.agent import problems, warnings
from tests.engine.pipeline_kit import Harness, compose_echo, make_agent, match_when

GREET = Guideline(id="greet", condition="the customer greets", action="Greet them")
HELLO = CannedResponse(
    id="hello",
    template="Hello {{name}}! How can I help?",
    variants={
        "zh-Hans": "{{name}}，您好！有什么可以帮您？",
        "es": "¡Hola, {{name}}! ¿En qué puedo ayudarte?",
    },
)


def harness(
    *responses: CannedResponse, languages: tuple[str, ...] = ("en", "zh-Hans", "es")
) -> Harness:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"greets": True}))
    llm.on(ToolCallPlan, {"calls": []})
    llm.on(CannedChoice, {"template": "t1", "applied": ["i1"]})
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(
        guidelines=[GREET],
        config=AgentConfig(composition_mode=CompositionMode.CANNED_STRICT, languages=languages),
    )
    data = {**agent.model_dump(), "canned_responses": responses}
    agent = type(agent).model_validate(data).with_content_version()
    return Harness(agent, llm, index=False)


async def start(h: Harness, language: str | None) -> None:
    await h.agents.publish(h.agent)
    await h.sessions.create(
        SessionState(
            id="s1",
            agent_id=h.agent.id,
            customer_id="c1",
            language=language,
            variables={"name": "Ana"},
        )
    )


async def test_a_canned_response_is_sent_in_the_sessions_language() -> None:
    h = harness(HELLO)
    await start(h, None)

    chinese = await h.say("你好")

    assert chinese.reply.text == "Ana，您好！有什么可以帮您？"
    prompt = h.llm.calls_for(CannedChoice)[-1].prompt
    # the model chooses by meaning in the language the agent is written in
    assert "[t1] Hello Ana! How can I help?" in prompt and "您好" not in prompt


async def test_a_variant_that_cannot_be_filled_sends_the_template() -> None:
    """A variant that names a field the turn does not have (validate warns about it) never goes
    out with a hole in it: the template it translates is sent."""
    odd = CannedResponse(
        id="hello",
        template="Hello {{name}}!",
        variants={"es": "¡Hola, {{name}}! Tu pedido {{order_id}} está en camino."},
    )
    h = harness(odd)
    await start(h, "es")

    assert (await h.say("hola")).reply.text == "Hello Ana!"


async def test_a_spanish_session_gets_the_spanish_variant_and_an_english_one_the_template() -> None:
    h = harness(HELLO)
    await start(h, "es")
    assert (await h.say("hola")).reply.text == "¡Hola, Ana! ¿En qué puedo ayudarte?"

    h = harness(HELLO)
    await start(h, None)
    assert (await h.say("hello")).reply.text == "Hello Ana! How can I help?"


async def test_a_response_without_a_variant_for_the_language_sends_its_template() -> None:
    english_only = CannedResponse(id="hello", template="Hello {{name}}!")
    h = harness(english_only)
    await start(h, "es")

    out = await h.say("hola")

    assert out.reply.text == "Hello Ana!"
    assert warnings(h.agent) == [
        "canned response 'hello' has no variant for zh-Hans, es; a session in those languages "
        "gets its template (en): add variants: {zh-Hans: …}"
    ]
    assert problems(h.agent) == []


def test_variants_are_written_in_yaml_and_through_the_builder() -> None:
    document: dict[str, Any] = {
        "agent": {"id": "shop", "name": "Shop", "languages": ["en", "es"]},
        "canned_responses": [
            {"id": "bye", "template": "Goodbye!", "variants": {"ES": "¡Adiós!"}},
        ],
    }
    loaded = load_agent(document)
    assert loaded.canned_responses[0].variants == {"es": "¡Adiós!"}  # the tag, normalized
    assert warnings(loaded) == []

    agent = Agent("shop", "Shop", languages=["en", "es"])
    agent.create_canned_response("Goodbye!", id="bye", variants={"es": "¡Adiós!"})
    assert agent.build().canned_responses == loaded.canned_responses


def test_a_variant_never_sent_or_with_other_fields_is_a_warning() -> None:
    agent = Agent("shop", "Shop", languages=["en", "es"])
    agent.create_canned_response(
        "Your balance is {{balance}}.",
        id="bal",
        variants={"es": "Tu saldo es {{saldo}}.", "en": "Balance: {{balance}}", "fr": "Solde"},
    )

    assert warnings(agent.build()) == [
        "canned response 'bal': the es variant uses {{saldo}}, which the template does not; "
        "check the field names",
        "canned response 'bal': its template is the en text (the default language); the variant "
        "for en is never sent",
        "canned response 'bal': the agent does not serve fr (config.languages: en, es); the "
        "variant for it is never sent",
    ]


async def test_the_handoff_notice_template_is_sent_in_the_sessions_language() -> None:
    notice = CannedResponse(
        id="notice",
        template="A person will answer you here.",
        tags=("handoff",),
        variants={
            "es": "Una persona te responderá por aquí.",
            "zh-Hans": "工作人员会在这里回复您。",
        },
    )
    h = harness(notice)
    await start(h, "es")

    out = await h.say("¿puedo hablar con una persona?")

    assert out.reply.text == "Una persona te responderá por aquí."
