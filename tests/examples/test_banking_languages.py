"""The banking concierge's seed conversation in every language Waypoint ships (issue #32): the
customer writes only their own language — the request, the account, the destination, the amount
in words, their yes — and a correct model (`Translating`: the offline model reading each line
the way a model that understands the language would) walks them through. The transfer is exactly
what they meant; the same conversation with a value they did not say moves nothing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from engine.conversations.spec import Expectation
from engine.language.lines import line
from engine.ports import Generation
from examples.banking import bank
from infra.conversation_tests import Models, load_file, run_conversation
from infra.embeddings import HashingEmbedder
from infra.offline import OfflineLLM
from infra.offline.glossed import Glossed
from tests.hostile.misreport import Misreport
from tests.hostile.world import Run, example, run_with

T = TypeVar("T", bound=BaseModel)
A = "alice"

# language → (the customer's lines, what each means in English, how they say yes)
SEED: dict[str, tuple[list[str], list[str], str]] = {
    "zh-Hans": (["我要转账", "seldo", "monkey", "支票账户", "账号是1234324", "五百"],
                ["Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324",
                 "five hundred"], "好的"),
    "zh-Hant": (["我要轉帳", "seldo", "monkey", "支票帳戶", "帳號是1234324", "五百"],
                ["Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324",
                 "five hundred"], "好的"),
    "es": (["Quiero transferir dinero", "seldo", "monkey", "La cuenta corriente",
            "A la cuenta 1234324", "quinientos"],
           ["Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324",
            "five hundred"], "sí, claro"),
    "pt-BR": (["Quero transferir dinheiro", "seldo", "monkey", "A conta corrente",
               "Para a conta 1234324", "quinhentos"],
              ["Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324",
               "five hundred"], "sim"),
    "fr": (["Je voudrais faire un virement", "seldo", "monkey", "Le compte courant",
            "Vers le compte 1234324", "cinq cents"],
           ["Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324",
            "five hundred"], "oui"),
    "de": (["Ich möchte Geld überweisen", "seldo", "monkey", "Das Girokonto",
            "An das Konto 1234324", "fünfhundert"],
           ["Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324",
            "five hundred"], "ja, genau"),
    "ja": (["送金したいです", "seldo", "monkey", "当座預金", "口座番号は1234324", "五百"],
           ["Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324",
            "five hundred"], "はい"),
}  # fmt: skip
YES_IN_ENGLISH = "yes"


class Translating(Glossed):
    """A model that understands the customer's language: the offline model reading each prompt
    with the customer's lines glossed in English (the script's own translations). The values it
    reports are in English; the engine reads them against the customer's own words."""

    def __init__(self, table: dict[str, str]) -> None:
        super().__init__(OfflineLLM(), table, "English")
        self.prompts: list[str] = []

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        self.prompts.append(prompt)
        return await super().generate(prompt, schema, model=model)


def _agent() -> Any:
    ex = example("banking")
    config = ex.agent.config.model_copy(update={"languages": ("en", *SEED)})
    return replace(ex, agent=ex.agent.model_copy(update={"config": config}))


def _script(language: str) -> tuple[list[tuple[str, str]], dict[str, str]]:
    lines, english, yes = SEED[language]
    table = dict(zip(lines, english, strict=True))
    table[yes] = YES_IN_ENGLISH
    return [(A, line) for line in lines], table


def _answers(yes: str) -> Any:
    def answer(_pending: Any) -> str:
        return yes

    return answer


async def _converse(language: str, model: Any = None) -> Run:
    script, table = _script(language)
    llm = model if model is not None else Translating(table)
    return await run_with(_agent(), llm, script, answer=_answers(SEED[language][2]))


@pytest.mark.parametrize("language", sorted(SEED))
async def test_a_customer_completes_the_transfer_in_their_own_language(language: str) -> None:
    run = await _converse(language)

    assert [(t["from"], t["to"], t["amount"]) for t in bank.BANK.transfers] == [
        ("1234567890", "1234324", "500.00")
    ]
    last = run.turns[-1]
    assert last.text == SEED[language][2]  # they confirmed in their own words
    assert run.turns[-1].output.state.language == language
    asked = run.turns[-2].output
    assert asked.state.pending_confirmation is not None
    # the engine's own lines in their language: the action and its exact values, the buttons
    shown = asked.reply.text or ""
    assert line("call_value", language, name="amount", value="500.00 USD") in shown
    assert line("confirmation", language, summary="§").split("§")[0] in shown
    labels = [o["label"] for o in asked.reply.data["options"]]
    assert labels == [line("confirm_yes", language), line("confirm_no", language)]
    assert run.turns[-1].output.reply is not None
    done = run.turns[-1].output.reply.text or ""
    assert "500.00 USD" in done and (language == "en" or "transferred" not in done)


class _Invents(Translating):
    """The same understanding model, except that it reports an amount the customer never said."""

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        answer = await super().generate(prompt, schema, model=model)
        misreport = Misreport({})
        bent = misreport._selection(prompt, answer.value, {"amount": "900"})  # type: ignore[arg-type]
        if schema.__name__ == "JourneyNodeSelection":
            return Generation(schema.model_validate(bent.model_dump()), answer.usage, "x", 0.0)
        return answer


@pytest.mark.parametrize("language", ["zh-Hans", "es"])
async def test_the_same_conversation_with_an_amount_they_did_not_say_moves_nothing(
    language: str,
) -> None:
    _, table = _script(language)
    await _converse(language, _Invents(table))

    assert bank.BANK.transfers == []


CONVERSATIONS = Path(__file__).parents[2] / "examples" / "banking" / "tests"


def _offline() -> Models:
    return Models(OfflineLLM(), HashingEmbedder(), real=False)


@pytest.mark.parametrize("language", ["zh-Hans", "es"])
def test_the_shipped_conversation_tests_in_chinese_and_spanish_pass_offline(language: str) -> None:
    (test,) = load_file(CONVERSATIONS / f"seed_transfer.{language}.conv.yaml")

    run_conversation(test, _offline()).raise_for_failure()

    assert [(t["to"], t["amount"]) for t in bank.BANK.transfers] == [("1234324", "500.00")]


def test_a_gloss_changes_what_the_model_reads_never_what_the_customer_said() -> None:
    """A wrong gloss is a model misreading the customer: "五百" glossed as nine hundred makes the
    offline model report 900, which the customer never wrote — the engine refuses it."""
    (test,) = load_file(CONVERSATIONS / "seed_transfer.zh-Hans.conv.yaml")
    turns = [
        t.model_copy(update={"means": "nine hundred"}) if t.customer == "五百" else t
        for t in test.turns
    ]

    result = run_conversation(test.model_copy(update={"turns": turns}), _offline())

    assert result.failure is not None
    assert bank.BANK.transfers == []


def test_without_glosses_the_offline_model_moves_nothing() -> None:
    (test,) = load_file(CONVERSATIONS / "seed_transfer.zh-Hans.conv.yaml")
    turns = [t.model_copy(update={"means": None, "expect": Expectation()}) for t in test.turns]

    run_conversation(test.model_copy(update={"turns": turns}), _offline())

    assert bank.BANK.transfers == []
