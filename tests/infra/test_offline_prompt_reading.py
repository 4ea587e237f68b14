"""The offline model reads the rewritten decision prompts (issue #23): packed matching groups, a
condition holding a numbered list, tool results shown with their arguments, the new journey flags.
"""

from __future__ import annotations

from engine.matching.guidelines import (
    Batch,
    BatchKind,
    GuidelineMatchBatch,
    build_match_prompt,
    plan_batches,
)
from engine.sessions.session import SessionState
from infra.offline.matching import parse_match_prompt
from infra.offline.prompt import parse_conversation, parse_tool_results
from tests.infra.test_offline_llm import (
    GREETING,
    LOST_CARD,
    STOCK,
    TRANSFER,
    answer,
    context,
    outcome,
    plain_agent,
    rule,
)

NUMBERED = rule(
    "fees",
    "The customer asks about one of these:\n1. account fees\n2. card limits\n\n3. overdrafts",
    "Answer from the tariff sheet",
)


async def test_a_condition_with_a_numbered_list_no_longer_loses_the_batch() -> None:
    agent = plain_agent(NUMBERED, LOST_CARD)
    prompt = build_match_prompt(
        context(agent, ("customer", "what are the account fees?")),
        Batch(BatchKind.ACTIONABLE, (NUMBERED, LOST_CARD)),
    )
    batch = await answer(prompt, GuidelineMatchBatch)
    assert [v.id for v in batch.verdicts] == ["g1", "g2"]
    by_id = {v.id: v for v in batch.verdicts}
    assert not by_id["g2"].applies  # nothing about a lost card


def test_a_multi_line_condition_in_a_prompt_continues_the_guideline_it_belongs_to() -> None:
    """Even laid out over several lines (an older builder, a hand-written prompt), the list
    belongs to its guideline instead of failing the whole batch."""
    agent = plain_agent(TRANSFER)
    prompt = build_match_prompt(
        context(agent, ("customer", "hi")), Batch(BatchKind.ACTIONABLE, (TRANSFER,))
    ).replace(
        "- [g1] when: The customer wants to transfer money",
        "- [g1] when: The customer wants to:\n1. transfer money\n2. pay a bill",
    )
    parsed = parse_match_prompt(prompt)
    assert (
        parsed.guidelines[0].condition == "The customer wants to: 1. transfer money 2. pay a bill"
    )


async def test_a_packed_prompt_is_read_group_by_group() -> None:
    agent = plain_agent(TRANSFER, STOCK, GREETING)
    session = SessionState(id="s", agent_id="a", customer_id="c", applied_guideline_ids=("hello",))
    (packed,) = plan_batches((TRANSFER, STOCK, GREETING), session, [], budget_chars=10_000)
    assert packed.kind is BatchKind.PACKED
    prompt = build_match_prompt(
        context(agent, ("customer", "I'd like to send $500 to my sister")), packed
    )
    parsed = parse_match_prompt(prompt)
    assert parsed.kind == "packed"
    assert [(g.handle, g.kind) for g in parsed.guidelines] == [
        ("g1", "observational"),
        ("g2", "observational"),
        ("g3", "previously_applied"),
    ]
    verdicts = {v.id: v for v in (await answer(prompt, GuidelineMatchBatch)).verdicts}
    assert verdicts["g1"].applies and not verdicts["g2"].applies and not verdicts["g3"].applies


def test_tool_results_are_read_with_the_arguments_that_produced_them() -> None:
    results = parse_tool_results('- get_user_age(user="ann"): 16\n- get_user_age(user="bob"): 30')
    assert [(r.tool, r.arguments, r.data) for r in results] == [
        ("get_user_age", 'user="ann"', 16),
        ("get_user_age", 'user="bob"', 30),
    ]
    messages = parse_conversation(
        'Customer: how old?\nTool get_user_age(user="ann"): {"age": 16}\nTool ping: ok'
    )
    assert [(m.role, m.tool, m.arguments, m.text) for m in messages] == [
        ("customer", "", "", "how old?"),
        ("tool", "get_user_age", 'user="ann"', '{"age": 16}'),
        ("tool", "ping", "", "ok"),
    ]


def test_this_turns_results_render_and_read_back_with_arguments() -> None:
    agent = plain_agent(TRANSFER)
    with_args = outcome("get_balance", {"balance": 120})
    with_args = type(with_args)(
        call_id=with_args.call_id,
        tool=with_args.tool,
        data=with_args.data,
        arguments={"account": "savings"},
    )
    prompt = build_match_prompt(
        context(agent, ("customer", "balance?"), results=(with_args,)),
        Batch(BatchKind.ACTIONABLE, (TRANSFER,)),
    )
    parsed = parse_match_prompt(prompt)
    (result,) = parsed.context.tool_results
    assert (result.tool, result.arguments, result.data) == (
        "get_balance",
        'account="savings"',
        {"balance": 120},
    )
