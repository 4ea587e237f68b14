"""A declared secret echoed in a later turn than the one it was typed in is masked — in the reply,
the store and the trace — by a keyed digest the session keeps of each secret value (never the
value): a model that once read the password cannot show it later, in another case or inside
punctuation. Ids, senders and event ids are never masked; a leaked store cannot confirm a guess
without the deployment's key."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from engine.compose import ComposedReply
from engine.ports import Generation
from engine.privacy.digests import (
    DEVELOPMENT_KEY,
    KEPT_DIGESTS,
    digest_of,
    echoes_in,
    remembered,
    session_key,
)
from engine.privacy.secrets import MASK
from engine.sessions.session import InboundMessage
from infra.offline import OfflineLLM
from tests.engine.agent_versions import changed_bank, without_journey
from tests.engine.pipeline_kit import Harness, advance, compose_echo, step_number, tool_harness
from tests.engine.test_secrets import PASSWORD, auth_journey, auth_llm, everything_stored, login
from tests.engine.test_secrets_across_versions import at_ask_password_then, stored
from tests.engine.test_versioning import SEED, Conversation

DEPLOYMENT_KEY = b"a deployment's own key, 32 bytes or more, from SSM"


def later_compose(*messages: str) -> Any:
    """A composer that answers the listed messages in order, then echoes the instructions."""
    queue = list(messages)

    def answer(prompt: str) -> dict[str, Any]:
        if queue:
            return {"message": queue.pop(0), "applied": []}
        return compose_echo(prompt)

    return answer


async def logged_in(compose: Any, *, sender: str | None = None, **deps: Any) -> Harness:
    """A harness whose customer has logged in (username, then the password) over two turns;
    `sender`: the channel names the writer so, and its event ids carry the same word."""
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user"), n("pass"), collected={"username": "seldo"}),
        advance(n("pass"), n("login"), collected={"password": PASSWORD}),
        advance(n("login")),
        compose=compose,
    )
    h = tool_harness(llm, login, journeys=[auth], **deps)
    await h.start()
    for text in ("I need to log in as seldo", PASSWORD):
        await h.engine.handle("s1", [said(h, text, sender)])
    return h


def said(h: Harness, text: str, sender: str | None = None) -> InboundMessage:
    """The harness's next customer message (from `sender`, with an event id naming it)."""
    if sender is None:
        return h.message(text)
    return h.message(text, id_prefix=f"evt:{sender}:", metadata={"customer_id": sender})


async def all_stored(h: Harness) -> str:
    """The stored session, every stored event and every stored trace."""
    events = await h.sessions.events("s1", after=-1, limit=10_000)
    turns = sorted({e.turn_id for e in events if e.turn_id})
    dumped = json.dumps([e.model_dump(mode="json") for e in events])
    return await everything_stored(h, turns) + dumped


async def test_a_password_echoed_two_turns_later_is_masked_in_the_reply_and_the_store() -> None:
    """Two turns after the password was typed, the model quotes it shouted, in quotes and
    brackets: the reply, the stored event and the trace (the model's answer) hold it masked —
    with the punctuation touching it, which may be the value's own — and the words around it
    stay."""
    shouted = PASSWORD.upper()
    h = await logged_in(
        later_compose(
            "What is your username?",
            "Thanks, you are logged in.",
            "Anything else?",
            f'Note: your password ("{shouted}"), is weak. Say "{PASSWORD.lower()}!" to change it',
        )
    )
    await h.say("thanks")

    echoed = await h.say("what now?")

    assert echoed.reply is not None
    assert echoed.reply.text == f"Note: your password {MASK} is weak. Say {MASK} to change it"
    assert PASSWORD.casefold() not in (await all_stored(h)).casefold()
    assert PASSWORD.casefold() not in echoed.trace.model_dump_json().casefold()


async def test_the_customer_repeating_their_password_later_has_it_masked_where_they_typed_it() -> (
    None
):
    """The customer types the password again in a turn where nothing asks for it: the reply
    prompt never sees it, and the stored message holds it masked."""
    h = await logged_in(compose_echo)

    out = await h.say(f"is {PASSWORD.lower()} a good password?")

    assert out.new_events[0].text == f"is {MASK} a good password?"
    assert PASSWORD.casefold() not in h.llm.calls_for(ComposedReply)[-1].prompt.casefold()
    assert PASSWORD.casefold() not in (await all_stored(h)).casefold()


class RememberingModel:
    """A hostile model with a memory: the offline model's answers, but every reply it writes
    quotes, shouted and in quotes, each customer line it was ever shown (the password too: it
    read it in the turn it was typed)."""

    def __init__(self) -> None:
        self.inner = OfflineLLM()
        self.heard: list[str] = []
        self.prompts: list[str] = []

    async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
        self.prompts.append(prompt)
        for line in re.findall(r"^Customer: (.*)$", prompt, re.M):
            if MASK not in line and line not in self.heard:
                self.heard.append(line)
        answer = await self.inner.generate(prompt, schema, model=model)
        if schema is not ComposedReply:
            return answer
        quoted = " ".join(f"«{line.upper()}»," for line in self.heard)
        message = f"{answer.value.message} You said: {quoted}"
        value = answer.value.model_copy(update={"message": message})
        return Generation(value, answer.usage, answer.model, answer.latency_ms)


async def test_a_model_that_remembers_the_password_cannot_show_it_in_any_later_turn() -> None:
    """The banking concierge's seed conversation against a model that quotes everything it
    was shown: every later reply names the username (that is no secret) and never the
    password; nothing stored holds it."""
    llm = RememberingModel()
    chat = await Conversation(llm).start()

    outs = [await chat.say(text) for text in SEED]

    quoting = [
        o.reply.text for o in outs[SEED.index("monkey") + 1 :] if "You said:" in o.reply.text
    ]
    assert len(quoting) >= 2  # the last reply is the transfer's approved template
    assert all("«SELDO»," in text for text in quoting)  # other words are not masked
    assert all(f" {MASK} " in text.split("You said:")[1] for text in quoting)
    for out in outs:
        assert "monkey" not in out.reply.text.casefold(), out.reply.text
        assert "monkey" not in out.trace.model_dump_json().casefold()
    assert "monkey" not in (await stored(chat)).casefold()


async def test_a_password_masked_whole_across_a_version_change_is_remembered_for_echoes() -> None:
    """The answer to a step a publish ended is masked whole (nothing collected it): its digest
    is kept all the same, so the model that read it cannot echo it later."""
    llm = RememberingModel()
    chat = await Conversation(llm).start()
    await at_ask_password_then(chat, changed_bank(without_journey("authenticate")))

    answer = await chat.say("monkey")
    later = await chat.say("What is the price of Apple stock?")

    assert answer.new_events[0].text == MASK
    assert f" {MASK} " in later.reply.text.split("You said:")[1]
    assert "monkey" not in later.reply.text.casefold()
    assert "monkey" not in (await stored(chat)).casefold()


async def test_a_word_answered_to_the_password_question_is_not_masked_in_later_turns() -> None:
    """The customer answers the password question with "what?": the answer is masked whole (the
    model read no secret in it; it may hold one), but it is no known secret — later turns'
    "what" stays."""
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user"), n("pass"), collected={"username": "seldo"}),
        advance(n("pass")),
        compose=later_compose("Your password?", "It is the word you log in with.", "What now?"),
    )
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    await h.say("I need to log in as seldo")

    asked = await h.say("what?")
    later = await h.say("I see")

    assert asked.new_events[0].text == MASK
    assert later.reply is not None and later.reply.text == "What now?"
    assert later.state.secret_digests is None


async def test_an_echo_is_masked_in_text_never_in_ids_senders_or_event_ids() -> None:
    """The customer's sender id and the channel's event ids happen to contain the password:
    the text is masked, the ids are not — neither in the turn it is typed in nor in the one a
    model echoes it in (a masked id would lose a reply) — and a delivery of the same message
    again is recognised as answered."""
    sender = f"web:{PASSWORD}"
    h = await logged_in(later_compose("Hi", "Logged in.", f"So {PASSWORD} it is."), sender=sender)
    message = said(h, "and now?", sender)

    out = await h.engine.handle("s1", [message])
    again = await h.engine.handle("s1", [message])

    assert out.reply is not None and out.reply.text == f"So {MASK} it is."
    messages = [e for e in out.state.events if e.data.get("channel_event_id")]
    assert [e.data["channel_event_id"] for e in messages] == [
        f"evt:{sender}:{n}" for n in (1, 2, 3)
    ]
    assert {e.data["sender"] for e in messages} == {sender}
    assert messages[1].text == MASK  # the typed password: text is masked
    assert again.replayed and again.reply is not None and again.reply.id == out.reply.id


async def test_a_leaked_store_cannot_confirm_a_guess_without_the_deployment_key() -> None:
    """What the session keeps of the password is an HMAC under a per-session key derived from
    the deployment's key and the session's salt: with the key a guess is confirmed (that is
    how echoes are found); with only what is stored next to it — the salt, the session id, or
    no key at all — it is not, nor is any plain hash of the password in the store."""
    h = await logged_in(compose_echo, secret_key=DEPLOYMENT_KEY)
    state = await h.sessions.load("s1")
    assert state is not None and state.secret_digests is not None
    kept = state.secret_digests
    everything = await all_stored(h)

    assert digest_of(session_key(DEPLOYMENT_KEY, kept.salt), PASSWORD) in kept.digests
    for guess_key in (b"", kept.salt.encode(), state.id.encode(), DEVELOPMENT_KEY):
        assert digest_of(session_key(guess_key, kept.salt), PASSWORD) not in kept.digests
    for plain in (hashlib.sha256, hashlib.md5, hashlib.sha1):
        hexdigest = plain(PASSWORD.casefold().encode()).hexdigest()
        assert hexdigest[:16] not in everything and hexdigest[-16:] not in everything


async def test_an_engine_without_a_key_keeps_no_digest() -> None:
    """A deployment that did not configure its key keeps no digest at all (never one a leaked
    store could test guesses against); the turn the password is typed in still masks it."""
    h = await logged_in(compose_echo, secret_key=None)

    state = await h.sessions.load("s1")

    assert state is not None and state.secret_digests is None
    assert PASSWORD not in await all_stored(h)


def test_echoes_are_whole_words_of_at_least_three_characters_in_any_case() -> None:
    key = session_key(DEVELOPMENT_KEY, "salt")
    digests = frozenset(d for d in (digest_of(key, v) for v in ("monkey", "ab", "two words")) if d)

    assert digest_of(key, "ab") is None  # too short to be masked in free text
    assert echoes_in(key, digests, "Your MONKEY, (monkey) and «Monkey»!") == [
        "MONKEY,",
        "(monkey)",
        "«Monkey»!",
    ]
    assert echoes_in(key, digests, "monkeys, monkeyish, xmonkey, ab ab") == []
    assert echoes_in(key, digests, "it was TWO  Words, or two-words") == ["TWO  Words,"]


def test_a_session_keeps_a_bounded_number_of_digests_newest_last() -> None:
    key = session_key(DEVELOPMENT_KEY, "salt")
    kept: tuple[str, ...] = ()
    for n in range(KEPT_DIGESTS + 5):
        kept = remembered(kept, key, [f"code-{n:04d}"])

    assert len(kept) == KEPT_DIGESTS
    assert kept[-1] == digest_of(key, f"code-{KEPT_DIGESTS + 4:04d}")
    assert remembered(kept, key, ["code-0036"]) == kept  # already kept: unchanged
