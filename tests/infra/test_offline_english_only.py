"""The offline model reads English only: when the customer writes another language it says so,
in that language, and decides nothing — no guideline, no journey step, no value, no tool call —
whatever numbers and names the message holds (issue #32). The same customer writing English is
served as before."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from engine.language.tags import SHIPPED
from engine.ports import Generation
from examples.banking import bank
from infra.offline import OfflineLLM
from infra.offline.english_only import ENGLISH_ONLY
from tests.hostile.world import example, run_with

T = TypeVar("T", bound=BaseModel)
A = "alice"

# Every line a customer might send in the transfer, in a language the offline model cannot read
# (scripts detection tells apart: Chinese both ways, Japanese).
TRANSFER = {
    "zh-Hans": ["我要转账", "seldo", "monkey", "支票账户", "账号是1234324", "转五百块"],
    "zh-Hant": ["我要轉帳", "seldo", "monkey", "支票帳戶", "帳號是1234324", "轉五百塊"],
    "ja": ["送金したいです", "seldo", "monkey", "当座預金です", "口座番号は1234324", "五百円です"],
}


class Recording(OfflineLLM):
    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        self.prompts.append(prompt)
        return await super().generate(prompt, schema, model=model)


def _agent() -> Any:
    ex = example("banking")
    config = ex.agent.config.model_copy(update={"languages": ("en", *TRANSFER)})
    return replace(ex, agent=ex.agent.model_copy(update={"config": config}))


def test_every_shipped_language_has_the_line_in_it() -> None:
    assert set(ENGLISH_ONLY) == set(SHIPPED)
    assert all("English" not in line for tag, line in ENGLISH_ONLY.items() if tag != "en")


@pytest.mark.parametrize("language", sorted(TRANSFER))
async def test_a_customer_writing_another_language_is_told_and_nothing_is_done(
    language: str,
) -> None:
    run = await run_with(_agent(), Recording(), [(A, line) for line in TRANSFER[language]])

    for turn in run.turns:
        out = turn.output
        assert out.reply is not None and out.reply.text == ENGLISH_ONLY[language]
        assert out.state.language == language
        assert turn.ran == [] and out.state.pending_confirmation is None
        assert out.trace.matched_guideline_ids == []
        assert out.state.journey_paths == {}
    assert bank.BANK.transfers == []


async def test_mid_journey_a_message_in_another_language_moves_nothing_and_english_goes_on() -> (
    None
):
    english = [(A, "Transfer money"), (A, "seldo"), (A, "monkey"), (A, "Checking"),
               (A, "To account ID 1234324")]  # fmt: skip
    script = [*english, (A, "转五百块，账号是7654321"), (A, "The amount is 500")]

    run = await run_with(_agent(), Recording(), script, answer=lambda _pending: "yes")

    chinese = run.turns[5].output
    assert chinese.reply is not None and chinese.reply.text == ENGLISH_ONLY["zh-Hans"]
    assert run.turns[5].ran == [] and chinese.state.pending_confirmation is None
    assert chinese.state.collected_values().get("amount") is None
    assert run.turns[6].output.state.language == "en"
    assert [(t["to"], t["amount"]) for t in bank.BANK.transfers] == [("1234324", "500.00")]
