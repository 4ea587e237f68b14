"""Values given ahead of their step are kept — only when the customer said them — and the steps
they satisfy are passed; the tool they feed is still grounded and confirmed (docs/semantics.md)."""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.compose import ComposedReply
from engine.context import TurnContext
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection, verify_advancement
from engine.matching.journey_graph import NodeView, build_node_views
from engine.matching.journey_walk import VerifiedStep
from engine.matching.journeys import select_journey_step
from engine.matching.values_ahead import pass_satisfied_steps
from engine.model import AgentSnapshot, CollectedField, Guideline, Journey, NodeKind
from engine.sessions.session import (
    CollectedValue,
    Event,
    EventKind,
    EventSource,
    InboundMessage,
    SessionState,
)
from engine.testing import ScriptedLLM
from engine.toolkit import ToolResult
from engine.toolkit import tool as as_tool
from tests.engine.pipeline_kit import (
    Harness,
    advance,
    chain_journey,
    compose_echo,
    last_customer_message,
    match_when,
    outputs_under_hash_seeds,
    per_journey,
    step_number,
    tool_harness,
)
from tests.engine.test_journey_graph import (
    assert_obeys_graph,
    chat,
    entry,
    fork,
    journeys_and_answers,
    make_journey,
    tool,
)
from tests.engine.test_journey_selection import (
    T0,
    context,
    step_answer,
    transfer_journey,
    turn_llm,
)

JOURNEY = transfer_journey()
N = {node: step_number(JOURNEY, node) for node in ("from_account", "amount", "check", "confirm")}


def selection(**answer: Any) -> ScriptedLLM:
    return ScriptedLLM().on(JourneyNodeSelection, step_answer(**answer) if answer else {})


async def select(scripted: ScriptedLLM, ctx: TurnContext, previous: list[str]):  # type: ignore[no-untyped-def]
    return await select_journey_step(
        turn_llm(scripted), ctx, JOURNEY, previous, executed_tools=set()
    )


def _answer(*steps: str, collected: dict[str, str], next_step: str | None = "") -> ScriptedLLM:
    return ScriptedLLM().on(
        JourneyNodeSelection, step_answer(*steps, collected=collected, next_step=next_step)
    )


async def test_a_value_given_ahead_fills_its_step_and_the_step_is_passed() -> None:
    scripted = _answer(N["from_account"], collected={"account": "savings", "amount": "250"})

    result = await select(scripted, context("send 250 euros from savings"), [])

    assert result.collected == {"account": "savings", "amount": Decimal("250")}
    assert result.ahead == {"amount": "amount"}
    # from_account answered now, amount answered ahead: the journey stops on the tool step.
    assert result.step.path == ("from_account", "amount", "check")
    assert result.step.node_id == "check"
    assert "passed amount: its values were given ahead" in result.step.repairs


async def test_a_value_the_model_invents_for_a_later_step_fills_nothing() -> None:
    # Adversarial: the customer never gave an amount; the model claims one for the later step.
    scripted = _answer(N["from_account"], collected={"account": "savings", "amount": "900"})

    result = await select(scripted, context("send money from savings"), [])

    assert result.collected == {"account": "savings"}
    assert result.ahead == {}
    assert (
        "ignored amount=Decimal('900') for a step ahead: not in the customer's words this turn"
        in result.notes
    )
    assert result.step.node_id == "amount"  # the amount step asks


async def test_a_value_said_in_an_earlier_turn_is_not_a_value_ahead() -> None:
    # "900" is in the conversation, but not in this turn's message: an earlier figure (a rent,
    # a previous transfer) never fills a later step.
    earlier = [
        Event(id="e0", offset=0, kind=EventKind.MESSAGE, source=EventSource.CUSTOMER,
              created_at=T0, text="my rent is 900"),
        Event(id="e1", offset=1, kind=EventKind.MESSAGE, source=EventSource.AGENT,
              created_at=T0, text="Noted."),
    ]  # fmt: skip
    now = Event(
        id="e2", offset=2, kind=EventKind.MESSAGE, source=EventSource.CUSTOMER,
        created_at=T0, text="send money from savings",
    )  # fmt: skip
    agent = AgentSnapshot(id="bank", name="Concierge", journeys=(JOURNEY,))
    session = SessionState(id="s1", agent_id="bank", customer_id="c1", events=tuple(earlier))
    ctx = TurnContext(agent, session, [*earlier, now])
    scripted = _answer(N["from_account"], collected={"account": "savings", "amount": "900"})

    result = await select(scripted, ctx, [])

    assert "amount" not in result.collected
    assert result.step.node_id == "amount"


async def test_a_yes_or_no_is_never_taken_ahead() -> None:
    scripted = _answer(N["from_account"], collected={"account": "savings", "confirmed": "yes"})

    result = await select(scripted, context("yes, from savings"), [])

    assert "confirmed" not in result.collected


async def test_a_value_given_ahead_in_an_earlier_turn_satisfies_its_step_when_reached() -> None:
    ahead = CollectedValue(
        journey_id="transfer", node_id="amount", name="amount", value=Decimal("250"),
        turn_id="t0", ahead=True,
    )  # fmt: skip
    ctx = context("savings")
    ctx = TurnContext(
        ctx.agent, ctx.session.model_copy(update={"collected": (ahead,)}), ctx.history
    )
    scripted = _answer(N["from_account"], N["amount"], collected={"account": "savings"})

    result = await select(scripted, ctx, ["from_account"])

    assert result.step.path == ("from_account", "amount", "check")


async def test_a_value_ahead_answers_its_step_once_a_loop_back_asks_again() -> None:
    # too_low → amount: the amount given ahead was for the first visit; the loop asks again.
    ahead = CollectedValue(
        journey_id="transfer", node_id="amount", name="amount", value=Decimal("250"),
        turn_id="t0", ahead=True,
    )  # fmt: skip
    ctx = context("ok, a smaller amount then")
    ctx = TurnContext(
        ctx.agent, ctx.session.model_copy(update={"collected": (ahead,)}), ctx.history
    )
    n_low = step_number(JOURNEY, "too_low")
    previous = ["from_account", "amount", "check", "covered", "too_low"]
    scripted = _answer(n_low, N["amount"], collected={})

    result = await select(scripted, ctx, previous)

    assert result.step.node_id == "amount"


async def test_backtracking_to_a_step_is_never_passed() -> None:
    ahead = CollectedValue(
        journey_id="transfer", node_id="amount", name="amount", value=Decimal("250"),
        turn_id="t0", ahead=True,
    )  # fmt: skip
    ctx = context("wait, I want to change the amount")
    ctx = TurnContext(
        ctx.agent, ctx.session.model_copy(update={"collected": (ahead,)}), ctx.history
    )
    scripted = ScriptedLLM().on(
        JourneyNodeSelection, step_answer(N["amount"], back=N["amount"], collected={})
    )

    result = await select(scripted, ctx, ["from_account", "amount", "check", "covered", "confirm"])

    assert result.step.outcome == "backtrack" and result.step.node_id == "amount"


# -- property: passing satisfied steps over random journey graphs ------------------------------


@st.composite
def graphs_with_fields(draw: Any) -> tuple[Journey, str, set[str]]:
    """A random journey graph whose chat steps each collect one field; a start step; the fields
    given this turn."""
    size = draw(st.integers(min_value=2, max_value=8))
    ids = [f"n{i}" for i in range(size)]
    nodes = [entry(ids[0])]
    for i, nid in enumerate(ids[1:], start=1):
        kind = draw(st.sampled_from(["chat", "chat", "tool", "fork"]))
        if kind == "chat":
            nodes.append(chat(nid, f"ask {nid}", collects=[CollectedField(name=f"f_{nid}")]))
        elif kind == "tool":
            nodes.append(tool(nid, f"t{i}"))
        else:
            nodes.append(fork(nid))
    # Mostly a single way out of each step (the case where satisfied steps are passed).
    targets = st.sampled_from([*ids[1:], *ids[1:], None])
    pairs = [
        (nid, draw(targets)) for nid in ids for _ in range(draw(st.sampled_from([1, 1, 1, 2])))
    ]
    journey = make_journey(*nodes, edges=[f"{a} -> {b or 'END'}" for a, b in pairs])
    views = build_node_views(journey)
    real = [v.id for v in views.values() if not v.transit]
    assume(real)
    start = draw(st.sampled_from(real))
    names = [f"f_{n}" for n in ids]
    given_now = draw(st.one_of(st.just(set(names)), st.sets(st.sampled_from(names))))
    return journey, start, given_now


@settings(max_examples=200, deadline=None)
@given(graphs_with_fields())
def test_passing_satisfied_steps_follows_single_exits_and_never_passes_a_tool_or_the_end(
    case: tuple[Journey, str, set[str]],
) -> None:
    journey, start, given_now = case
    views = build_node_views(journey)
    step = VerifiedStep((start,), start, "advance")

    passed = pass_satisfied_steps(views, step, given_now, {})

    assert passed.node_id is not None and passed.path[-1] == passed.node_id  # never ends
    assert not views[passed.node_id].transit  # never stops on a fork
    assert passed.path[0] == start
    for a, b in itertools.pairwise(passed.path):
        assert b in views[a].successors  # only real transitions
    for nid in passed.path[:-1]:
        view = views[nid]
        if view.transit:
            continue
        assert view.kind is NodeKind.CHAT  # a tool step is never passed
        assert all(f.name in given_now for f in view.collects)  # only satisfied steps
        assert len(view.exits) == 1  # only along its single way out
    # Where it stops is not itself satisfied with a single way on, unless that way runs into a
    # choice or the end, or comes back to a step of this walk (a value answers its step once).
    here = views[passed.node_id]
    if here.kind is NodeKind.CHAT and all(f.name in given_now for f in here.collects):
        assert len(here.exits) != 1 or _choice_or_back(views, here.exits[0], passed.path)


def _choice_or_back(views: dict[str, NodeView], nid: str | None, walked: tuple) -> bool:  # type: ignore[type-arg]
    seen: list[str] = []
    while nid is not None and views[nid].transit:
        if len(views[nid].exits) != 1 or nid in seen:
            return True
        seen.append(nid)
        nid = views[nid].exits[0]
    return nid is None or nid in walked


# -- through the pipeline: the banking transfer -------------------------------------------------

SENT: list[dict[str, Any]] = []
ACCOUNT_ID = r"\d{7,10}"  # an account id's shape: no other number of the customer's is one


@as_tool(
    description="Send money to an account",
    consequential=True,
    patterns={"to_account_id": ACCOUNT_ID},
)
def send_money(to_account_id: str, amount: Decimal) -> ToolResult:
    SENT.append({"to": to_account_id, "amount": Decimal(str(amount))})
    return ToolResult(data={"sent": f"{amount}"})


def money_transfer(*requires: str) -> tuple[Journey, Guideline]:
    """Destination, amount, then `send_money` — after the journeys it `requires`."""
    steps = [
        ("ask_destination", "Ask for the account ID to transfer to",
         {"collects": (CollectedField(name="to_account_id", pattern=ACCOUNT_ID),)}),
        ("ask_amount", "Ask how much to transfer",
         {"collects": (CollectedField(name="amount", type="decimal", gt=0),)}),
        ("send", "tool:send_money", {"action": "Say the transfer is done"}),
    ]  # fmt: skip
    return chain_journey(
        "transfer", "Money transfer", "The customer wants to transfer money", steps,
        requires=list(requires),
    )  # fmt: skip


TRANSFER = money_transfer()


def transfer_harness(collected: dict[str, str]) -> tuple[Harness, ScriptedLLM]:
    SENT.clear()
    first = step_number(TRANSFER[0], "ask_destination")
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"transfer money": True}))
    llm.on(
        JourneyNodeSelection,
        per_journey({"Money transfer": [advance(first, collected=collected)]}),
    )
    llm.on(ComposedReply, compose_echo)
    return tool_harness(llm, send_money, journeys=[TRANSFER]), llm


async def test_transfer_250_to_7770001_fills_both_steps_and_sends_once() -> None:
    h, _ = transfer_harness({"to_account_id": "7770001", "amount": "250"})
    await h.start()

    out = await h.say("I want to transfer money: $250 to 7770001")

    assert [{"to": "7770001", "amount": Decimal("250")}] == SENT
    assert out.state.collected_values("transfer") == {
        "to_account_id": "7770001",
        "amount": Decimal("250"),
    }
    assert "Ask how much" not in out.reply.text


async def test_a_value_ahead_given_in_words_is_confirmed_before_the_transfer() -> None:
    h, _ = transfer_harness({"to_account_id": "7770001", "amount": "250"})
    await h.start()

    asked = await h.say("I want to transfer money, two hundred fifty dollars to 7770001")

    assert SENT == []
    assert asked.trace.tool_calls[-1].status == "awaiting_confirmation"
    assert "amount 250" in asked.reply.text

    await h.say("yes")

    assert [{"to": "7770001", "amount": Decimal("250")}] == SENT


@pytest.mark.parametrize(
    "burst",
    [
        # bob's destination first, alice's request last: the turn answers alice
        [("bob", "send it to 7770001"), ("alice", "I want to transfer money: $250")],
        # alice says everything, bob writes last: the turn answers bob
        [("alice", "I want to transfer money: $250 to 7770001"), ("bob", "transfer money too")],
    ],
    ids=["other-wrote-first", "other-wrote-last"],
)
async def test_values_ahead_from_another_senders_words_never_reach_this_senders_transfer(
    burst: list[tuple[str, str]],
) -> None:
    """One turn of a group holds two people's messages; the values the model reads ahead from
    one person's words fill the journey, but the transfer runs only on values the turn's sender
    gave: it is asked, never sent."""
    h, _ = transfer_harness({"to_account_id": "7770001", "amount": "250"})
    await h.start()
    messages = [
        InboundMessage(event_id=f"m{n}", text=text, metadata={"customer_id": sender})
        for n, (sender, text) in enumerate(burst)
    ]

    out = await h.engine.handle("s1", messages)

    assert SENT == []
    record = next(c for c in out.trace.tool_calls if c.tool == "send_money")
    assert record.status == "ungrounded"


async def test_an_invented_amount_ahead_never_reaches_the_transfer() -> None:
    # Adversarial model: it claims an amount the customer never said.
    h, _ = transfer_harness({"to_account_id": "7770001", "amount": "900"})
    await h.start()

    out = await h.say("I want to transfer money to 7770001")

    assert SENT == []
    assert out.state.journey_paths["transfer"][-1] == "ask_amount"
    assert "Ask how much to transfer" in out.reply.text
    assert "amount" not in out.state.collected_values("transfer")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(journeys_and_answers(), st.data())
def test_any_answer_then_passing_satisfied_steps_still_obeys_the_graph(
    case: tuple[Journey, list[str | None], JourneyNodeSelection, set[str]], data: st.DataObject
) -> None:
    """The walk rules of tests/engine/test_journey_graph.py (real edges, never past a tool step
    that did not run, never stopping on a fork, completion only after a performed step) hold
    after satisfied steps are passed; beyond the step the model named, only satisfied chat steps
    are passed."""
    journey, previous, selection, executed = case
    journey = journey.model_copy(
        update={
            "nodes": tuple(
                n.model_copy(update={"collects": (CollectedField(name=f"f_{n.id}"),)})
                if n.kind is NodeKind.CHAT and n.action is not None
                else n
                for n in journey.nodes
            )
        }
    )
    views = build_node_views(journey)
    names = [f"f_{n.id}" for n in journey.nodes]
    # Often everything was given (the interesting case: steps get passed), else a random part.
    given_now = data.draw(st.one_of(st.just(set(names)), st.sets(st.sampled_from(names))))
    ahead = data.draw(st.dictionaries(st.sampled_from([n.id for n in journey.nodes]),
                                      st.sets(st.sampled_from(names)), max_size=3))  # fmt: skip
    verified = verify_advancement(journey, views, previous, selection, executed)

    passed = pass_satisfied_steps(views, verified, given_now, ahead)

    assert_obeys_graph(journey, views, previous, passed, executed)
    assert passed.path[: len(verified.path)] == verified.path
    if passed is not verified:
        assert passed.outcome == "advance" and verified.outcome in ("advance", "stay")
        for nid in passed.path[len(verified.path) - 1 : -1]:
            view = views[str(nid)]
            if not view.transit:
                assert view.kind is NodeKind.CHAT and view.collects
                assert all(
                    f.name in given_now or f.name in ahead.get(view.id, ()) for f in view.collects
                )


# -- a journey suspended for its prerequisites keeps what its activating message gave ----------

LOGIN = chain_journey(
    "login",
    "Login",
    "The customer wants to log in",
    [("ask_username", "Ask for the username", {"collects": (CollectedField(name="username"),)})],
)
GATED = money_transfer("login")


def gated_harness(first_answer: dict[str, str], *, index: bool = True) -> Harness:
    SENT.clear()
    first = step_number(GATED[0], "ask_destination")
    user = step_number(LOGIN[0], "ask_username")
    llm = ScriptedLLM()
    llm.on(
        GuidelineMatchBatch,
        match_when({"transfer money": lambda m: "transfer" in m, "log in": False}),
    )
    llm.on(
        JourneyNodeSelection,
        per_journey(
            {
                # the speculative selection in the activating turn, then the resumed run
                "Money transfer": [advance(first, collected=first_answer), advance(first)],
                "Login": [{**advance(user, collected={"username": "seldo"}), "next_step": "NONE"}],
            }
        ),
    )
    llm.on(ComposedReply, compose_echo)
    return tool_harness(llm, send_money, journeys=[LOGIN, GATED], index=index)


async def test_values_given_before_a_prerequisite_are_kept_until_the_journey_resumes() -> None:
    h = gated_harness({"to_account_id": "7770001", "amount": "250"})
    await h.start()

    asked = await h.say("I want to transfer money: $250 to 7770001")

    assert asked.state.journey_paths.get("login") == ("ask_username",)
    assert asked.state.collected_values("transfer") == {
        "to_account_id": "7770001",
        "amount": Decimal("250"),
    }
    assert SENT == []

    done = await h.say("seldo")

    # Login completed; the transfer resumed and passed both answered steps to its tool step.
    assert "login" in done.state.completed_journeys
    assert [{"to": "7770001", "amount": Decimal("250")}] == SENT
    assert "Ask how much" not in done.reply.text and "Ask for the account" not in done.reply.text


async def test_values_before_a_prerequisite_are_kept_when_recall_did_not_predict_the_journey() -> (
    None
):
    """Without a vector index nothing is predicted, so round 1 has no selection for the transfer:
    the supplemental round selects it, and the values of its activating message are kept."""
    h = gated_harness({"to_account_id": "7770001", "amount": "250"}, index=False)
    await h.start()

    asked = await h.say("I want to transfer money: $250 to 7770001")

    assert asked.state.journey_paths.get("login") == ("ask_username",)
    assert asked.state.collected_values("transfer") == {
        "to_account_id": "7770001",
        "amount": Decimal("250"),
    }
    done = await h.say("seldo")
    assert [{"to": "7770001", "amount": Decimal("250")}] == SENT
    assert "Ask how much" not in done.reply.text


async def test_an_invented_value_before_a_prerequisite_is_not_kept() -> None:
    # Adversarial: the model claims an amount the activating message never gave.
    h = gated_harness({"to_account_id": "7770001", "amount": "900"})
    await h.start()

    asked = await h.say("I want to transfer money to 7770001")

    assert asked.state.collected_values("transfer") == {"to_account_id": "7770001"}
    done = await h.say("seldo")

    assert SENT == []
    assert done.state.journey_paths["transfer"][-1] == "ask_amount"
    assert "Ask how much to transfer" in done.reply.text


async def test_a_journey_another_sender_logged_in_for_never_acts_for_one_who_did_not() -> None:
    """In a group session, alice logs in and her transfer (which requires the login) is under
    way; bob, who never logged in, answers its steps with values of his own: the login counts
    for alice alone, so the transfer's tool never runs on bob's turn."""
    SENT.clear()
    first = step_number(GATED[0], "ask_destination")
    user = step_number(LOGIN[0], "ask_username")
    bobs = {"to_account_id": "7770001", "amount": "250"}

    def transfer_step(prompt: str) -> dict[str, Any]:
        said_by_bob = "7770001" in last_customer_message(prompt)
        return advance(first, collected=bobs if said_by_bob else None)

    llm = ScriptedLLM()
    llm.on(
        GuidelineMatchBatch,
        match_when({"transfer money": lambda m: "transfer" in m, "log in": False}),
    )
    llm.on(
        JourneyNodeSelection,
        per_journey(
            {
                "Money transfer": [transfer_step],
                "Login": [{**advance(user, collected={"username": "seldo"}), "next_step": "NONE"}],
            }
        ),
    )
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, send_money, journeys=[LOGIN, GATED])
    await h.start()
    await h.say("I want to transfer money", metadata={"customer_id": "alice"})
    logged_in = await h.say("seldo", metadata={"customer_id": "alice"})
    assert logged_in.state.completed_by["login"] == ("alice",)
    assert logged_in.state.journey_paths["transfer"] == ("ask_destination",)

    out = await h.say("$250 to 7770001", metadata={"customer_id": "bob"})

    assert SENT == []
    record = next(c for c in out.trace.tool_calls if c.tool == "send_money")
    assert record.status == "prerequisite_not_met"
    assert "needs Login first" in llm.calls_for(ComposedReply)[-1].prompt

    await h.say("$250 to 7770001", metadata={"customer_id": "alice"})

    assert [{"to": "7770001", "amount": Decimal("250")}] == SENT  # alice's login is hers


ACCOUNT = chain_journey(
    "account",
    "Account choice",
    "The customer wants to choose an account",
    [
        ("ask_account", "Ask which account to use",
         {"collects": (CollectedField(name="account_name"),)}),
        ("show_account", "Tell the customer which account will be used"),
    ],
    requires=["login"],
)  # fmt: skip
GATED_TWICE = money_transfer("login", "account")


async def test_a_later_prerequisite_keeps_what_the_first_message_gave_for_it() -> None:
    SENT.clear()
    n_dest = step_number(GATED_TWICE[0], "ask_destination")
    n_acc = step_number(ACCOUNT[0], "ask_account")
    n_show = step_number(ACCOUNT[0], "show_account")
    n_user = step_number(LOGIN[0], "ask_username")
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"transfer money": lambda m: "transfer" in m}))
    llm.on(
        JourneyNodeSelection,
        per_journey(
            {
                "Money transfer": [
                    advance(n_dest, collected={"to_account_id": "7770001", "amount": "250"}),
                    advance(n_dest),
                ],
                "Account choice": [
                    advance(n_acc, collected={"account_name": "savings"}),  # speculative
                    advance(n_acc),  # resumed: the account was given ahead
                    {**advance(n_show), "next_step": "NONE"},
                ],
                "Login": [
                    {**advance(n_user, collected={"username": "seldo"}), "next_step": "NONE"}
                ],
            }
        ),
    )
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, send_money, journeys=[LOGIN, ACCOUNT, GATED_TWICE])
    await h.start()

    first = await h.say("I want to transfer money: $250 from savings to 7770001")
    assert first.state.journey_paths.get("login") == ("ask_username",)
    assert first.state.collected_values("account") == {"account_name": "savings"}

    second = await h.say("seldo")

    # The account question is passed: the journey stands on the step after it.
    assert second.state.journey_paths["account"] == ("ask_account", "show_account")
    assert "Ask which account" not in second.reply.text

    await h.say("ok")

    assert [{"to": "7770001", "amount": Decimal("250")}] == SENT


async def test_a_secret_given_ahead_in_an_earlier_turn_does_not_answer_its_step() -> None:
    # Stored masked, a secret is no longer a value: its step asks for it again.
    journey = make_journey(
        entry(),
        chat("user", "Ask for the username", collects=[CollectedField(name="username")]),
        chat("pass", "Ask for the password", collects=[CollectedField(name="pin", secret=True)]),
        tool("login", "log_in"),
        edges=["root -> user", "user -> pass", "pass -> login", "login -> END"],
        jid="auth",
        title="Login",
    )
    views = build_node_views(journey)
    masked = CollectedValue(
        journey_id="auth", node_id="pass", name="pin", value="***", turn_id="t0",
        ahead=True, secret=True,
    )  # fmt: skip
    ctx = context("seldo")
    agent = AgentSnapshot(id="bank", name="Concierge", journeys=(journey,))
    ctx = TurnContext(agent, ctx.session.model_copy(update={"collected": (masked,)}), ctx.history)
    n = {v.id: str(v.index) for v in views.values()}
    scripted = ScriptedLLM().on(
        JourneyNodeSelection, step_answer(n["user"], n["pass"], collected={"username": "seldo"})
    )

    result = await select_journey_step(
        turn_llm(scripted), ctx, journey, ["user"], executed_tools=set()
    )

    assert result.step.node_id == "pass"


def test_values_ahead_are_decided_alike_under_different_hash_seeds() -> None:
    """Two Lambda containers must keep the same values and pass the same steps."""
    import json

    script = """
import json
from engine.values.grounding import CustomerMessage
from engine.matching.collected_values import CollectedItem
from engine.matching.journey_graph import build_node_views
from engine.matching.journey_walk import VerifiedStep
from engine.matching.values_ahead import Words, collect_values, pass_satisfied_steps
from tests.engine.test_journey_selection import transfer_journey
journey = transfer_journey()
views = build_node_views(journey)
step = VerifiedStep(("from_account",), "from_account", "advance")
items = [CollectedItem(name=n, value=v) for n, v in
         [("account", "savings"), ("amount", "250"), ("confirmed", "yes"), ("colour", "red")]]
said = [CustomerMessage(0, "250 from savings")]
got = collect_values(journey, views, step, items, Words(now=said, ahead=said))
passed = pass_satisfied_steps(views, step, got.grounded, {})
print(json.dumps([sorted(got.values), got.ahead, sorted(got.grounded), list(got.notes),
                  list(passed.path), list(passed.repairs)]))
"""
    outputs = outputs_under_hash_seeds(script, ("0", "3", "999"))
    assert len(outputs) == 1, outputs
    values, ahead, _, _, path, _ = json.loads(outputs.pop())
    assert values == ["account", "amount"] and ahead == {"amount": "amount"}
    assert path == ["from_account", "amount", "check"]
