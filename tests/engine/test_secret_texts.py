"""Masking touches the texts people, models and tools wrote — never the engine's own records
(ids, references, model names, timestamps) — and masks a value as a secret only where it is a
secret value the customer actually gave (issue #33, the second security review)."""

from __future__ import annotations

from engine.agent_config import AgentConfig
from engine.privacy.secrets import MASK, TurnSecrets
from engine.privacy.text_fields import EVENT_DATA, masked_fields, texts_of
from engine.sessions.session import Attachment
from engine.toolkit import InProcessDispatcher, ToolRegistry, spec_of
from tests.engine.pipeline_kit import (
    Harness,
    advance,
    make_agent,
    step_number,
    tool_harness,
)
from tests.engine.test_secret_echoes import all_stored, later_compose
from tests.engine.test_secret_paths import PINS, change_pin, pin_journey, pin_llm
from tests.engine.test_secrets import (
    LOGINS,
    PASSWORD,
    auth_journey,
    auth_llm,
    everything_stored,
    login,
)

PIN = "2024"
MODEL = "gpt-4o-2024-08-06"  # a dated model name holds the same number
MEDIA_URL = "https://media.example.test/2024/06/card.jpg"


async def test_a_pin_equal_to_numbers_in_the_engines_records_masks_only_the_customers_text() -> (
    None
):
    """The customer's new PIN is 2024, the number in the media URL of the photo they sent and
    in the dated name of the model every trace records: the PIN is masked where they typed it,
    and neither the stored attachment nor any trace's model name is rewritten."""
    PINS.clear()
    journey, condition = pin_journey()
    n = lambda node: step_number(journey, node)  # noqa: E731
    llm = pin_llm(
        advance(n("holder"), n("ask"), collected={"name": "Ada Lovelace"}),
        advance(n("ask"), n("set"), collected={"pin": PIN}),
    )
    agent = make_agent(
        journeys=[(journey, condition)],
        tools=[spec_of(change_pin)],
        config=AgentConfig(default_model=MODEL),
    )
    h = Harness(agent, llm, tools=InProcessDispatcher(ToolRegistry([change_pin])), index=False)
    await h.start()
    photo = Attachment(kind="image", url=MEDIA_URL, platform_id=PIN)
    first = await h.say("I want a new card PIN, I am Ada Lovelace", attachments=[photo])

    second = await h.say(PIN)

    assert [int(PIN)] == PINS
    assert second.new_events[0].text == MASK
    stored = await h.sessions.events("s1", after=-1, limit=100)
    assert stored[0].data["attachments"] == [
        {"kind": "image", "url": MEDIA_URL, "platform_id": PIN}
    ]
    for turn in (first, second):
        trace = await h.sessions.trace("s1", turn.trace.turn_id)
        assert trace is not None and {c["model"] for c in trace["llm_calls"]} == {MODEL}


def test_an_events_texts_are_masked_and_the_engines_records_in_it_never() -> None:
    """Every text field of an event is masked — its text, a tool's arguments (a secret one by
    name), result, view and error, an option's label, a handoff's reason — and nothing else:
    not its channel event id, sender, call id, attachments, lifespan, option ids or times."""
    secrets = TurnSecrets({"pin"})
    secrets.remember(PIN)
    said = f"pin {PIN}"
    data = {
        "channel_event_id": f"evt-{PIN}",
        "sender": f"web:{PIN}",
        "call_id": f"turn_{PIN}:0",
        "tool": "change_pin",
        "attachments": [{"kind": "image", "url": MEDIA_URL, "platform_id": PIN}],
        "lifespan": PIN,
        "since": f"{PIN}-06-01T10:00:00+00:00",
        "arguments": {"pin": "1", "note": said},
        "llm_view": {"echo": said, "id": PIN},
        "view": {"type": "text", "text": said},
        "error": said,
        "options": [{"id": PIN, "label": said, "value": {"code": PIN}}],
        "why": said,
    }
    masked = masked_fields(secrets, data, EVENT_DATA)

    mask = f"pin {MASK}"
    assert masked == {
        **data,
        "arguments": {"pin": MASK, "note": mask},
        "llm_view": {"echo": mask, "id": MASK},  # a tool's result is its text, ids and all
        "view": {"type": "text", "text": mask},
        "error": mask,
        "options": [{"id": PIN, "label": mask, "value": {"code": MASK}}],
        "why": mask,
    }
    assert sorted(texts_of(data, EVENT_DATA)) == sorted(
        ["1", said, said, PIN, "text", said, said, said, PIN, said]
    )


async def test_a_new_username_typed_at_the_password_step_is_masked_there_but_no_secret() -> None:
    """At the password step the customer types a new username: the answer is masked whole, and
    the value taken from it is kept out of that turn's store, prompt and trace — but it is no
    known secret: typed again where the journey asks for the username, it is read, stored and
    used like any username (the customer is never locked out)."""
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user"), n("pass"), collected={"username": "seldo"}),
        {  # back to the username step
            **advance(n("user"), collected={"username": "seldo2"}),
            "requires_backtracking": True,
            "backtracking_target_step": n("user"),
        },
        advance(n("user"), n("pass"), collected={"username": "seldo2"}),
        advance(n("pass"), n("login"), collected={"password": PASSWORD}),
        compose=later_compose("Your password?", "Your username?", "Your password?", "Done."),
    )
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    await h.say("I need to log in as seldo")
    corrected = await h.say("seldo2")
    assert corrected.new_events[0].text == MASK
    assert "seldo2" not in await everything_stored(h, [corrected.trace.turn_id])

    again = await h.say("my username is seldo2")
    await h.say(PASSWORD)

    assert again.new_events[0].text == "my username is seldo2"
    assert again.state.secret_digests is None  # nothing of it remembered
    assert LOGINS == [("seldo2", PASSWORD)]


async def test_a_password_the_customer_never_typed_is_no_secret() -> None:
    """A hostile model reports "welcome" as the password the customer gave with the request: it
    is no value they typed, so it is neither kept nor remembered — the agent's later "welcome
    back" is not masked."""
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user"), n("pass"), collected={"username": "seldo", "password": "welcome"}),
        compose=later_compose("Your password?", "Welcome back, seldo."),
    )
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    first = await h.say("I need to log in as seldo")

    later = await h.say("thanks")

    assert first.state.secret_digests is None
    assert later.reply is not None and later.reply.text == "Welcome back, seldo."


async def test_a_password_typed_before_the_journey_is_masked_in_every_trace_since() -> None:
    """The password comes in a first message nothing reads it in; the next turn starts the
    login and the one after collects it from there. Both earlier turns' prompts quoted the
    first message: no stored trace of the session keeps it."""
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user")),
        advance(n("user"), n("pass"), collected={"username": "seldo", "password": PASSWORD}),
    )
    h = tool_harness(llm, login, journeys=[auth], index=False)
    await h.start()
    outs = [
        await h.say(f"hello, my password is {PASSWORD}"),
        await h.say("I need to log in"),
        await h.say("seldo"),
    ]

    assert [e.offset for e in outs[-1].masked_events] == [0]
    turns = [o.trace.turn_id for o in outs]
    assert PASSWORD not in await everything_stored(h, turns)
    assert PASSWORD not in await all_stored(h)
