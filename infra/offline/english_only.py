"""The offline model in a conversation it cannot read: it says so, in the customer's language,
and decides nothing.

The offline model reads English only (`infra.offline`). When the customer writes another language
than the agent's own, every prompt the engine builds says so (`engine.context.language_note`:
"Language: the customer writes Spanish; …"). Word overlap with English conditions would then be
noise, and a number in a Chinese sentence could be taken for the wrong thing: so no guideline
applies, no journey moves or collects, no tool is called, and the reply says plainly that the
offline model understands only English and that a real model is needed. The engine's own lines
(a pending confirmation, a handoff notice) still go out in the customer's language, and a yes or
no in it is still read by the engine (`engine.values.yes_no`).
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from engine.compose import CannedChoice, ComposedReply
from engine.context import LANGUAGE_NOTE
from engine.language.tags import SHIPPED, language_name
from engine.matching.guidelines import (
    CustomerDependentBatch,
    CustomerDependentVerdict,
    DisambiguationVerdict,
    GuidelineMatchBatch,
    GuidelineVerdict,
)
from engine.matching.journey_answer import JourneyNodeSelection
from engine.tools.calls import ToolCallPlan
from infra.offline.journey_map import parse_journey_map
from infra.offline.matching import parse_match_prompt

_WRITES = re.compile(rf"\n\n{re.escape(LANGUAGE_NOTE)}the customer writes (?P<name>[^;\n]+);")
WHY = "the offline model reads English only"

# What the customer is told, in their language (the shipped ones; English for the others).
ENGLISH_ONLY = {
    "en": "Sorry, this assistant is running as an offline demo and understands only English. "
    "Please write in English.",
    "zh-Hans": "抱歉，本助手目前以离线演示模式运行，只能理解英文。请用英文输入。",
    "zh-Hant": "抱歉，本助理目前以離線示範模式運行，只能理解英文。請用英文輸入。",
    "es": "Lo siento, este asistente funciona como una demostración sin conexión y solo entiende "
    "inglés. Por favor, escribe en inglés.",
    "pt-BR": "Desculpe, este assistente está funcionando como uma demonstração offline e só "
    "entende inglês. Por favor, escreva em inglês.",
    "fr": "Désolé, cet assistant fonctionne en démonstration hors ligne et ne comprend que "
    "l’anglais. Merci d’écrire en anglais.",
    "de": "Entschuldigung, dieser Assistent läuft als Offline-Demo und versteht nur Englisch. "
    "Bitte schreiben Sie auf Englisch.",
    "ja": "申し訳ございません。このアシスタントはオフラインのデモとして動作しており、英語しか"
    "理解できません。英語でご入力ください。",
}
_BY_NAME = {language_name(tag): tag for tag in SHIPPED}


def foreign_language(prompt: str) -> str | None:
    """The language tag the customer writes when the prompt says it is not English (an unshipped
    language reads as "en": its line is the English one), else None."""
    found = _WRITES.search(prompt)
    if found is None or found["name"] == language_name("en"):
        return None
    return _BY_NAME.get(found["name"], "en")


def english_only(prompt: str, schema: type[BaseModel], language: str) -> BaseModel:
    """The answer that decides nothing, for each schema the engine asks."""
    said = ENGLISH_ONLY.get(language, ENGLISH_ONLY["en"])
    if schema is GuidelineMatchBatch:
        handles = [g.handle for g in parse_match_prompt(prompt).guidelines]
        return GuidelineMatchBatch(
            verdicts=[
                GuidelineVerdict(id=h, applies=False, score=0, rationale=WHY) for h in handles
            ]
        )
    if schema is CustomerDependentBatch:  # still waiting for the customer: nothing was read
        handles = [g.handle for g in parse_match_prompt(prompt).guidelines]
        return CustomerDependentBatch(
            verdicts=[
                CustomerDependentVerdict(
                    id=h, condition_holds=True, customer_completed=False, score=8, rationale=WHY
                )
                for h in handles
            ]
        )
    if schema is DisambiguationVerdict:
        return DisambiguationVerdict(head_applies=False, is_ambiguous=False, rationale=WHY)
    if schema is JourneyNodeSelection:
        here = parse_journey_map(prompt).current
        if here is None:  # not started: it does not start on words the model cannot read
            return JourneyNodeSelection(rationale=WHY, journey_applies=False, next_step=None)
        return JourneyNodeSelection(
            rationale=WHY, step_advancement=[here.number], next_step=here.number
        )
    if schema is ToolCallPlan:
        return ToolCallPlan(rationale=WHY, calls=[])
    if schema is ComposedReply:
        return ComposedReply(message=said)
    if schema is CannedChoice:
        return CannedChoice(template=None, message=said)
    raise TypeError(f"no English-only answer for {schema.__name__}")  # pragma: no cover
