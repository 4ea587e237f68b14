"""What a customer asks for in so many words, in every language Waypoint ships: to talk to a
person, or to try a failed action again. Read in code — a model never decides either — from
each language's everyday phrasings, kept here as data.
"""

from __future__ import annotations

import re
from functools import cache

from engine.values.runs import normalize

# Asking for a person ("I want a human agent"), beyond English (engine.handoff has English).
_PERSON = (
    # Chinese (simplified and traditional)
    r"人工|真人|客服人员|客服人員|转人工|轉人工|找人|活人|接线员|接線員|人工客服|真人客服",
    # Japanese
    r"オペレーター|担当者|人間と話|人と話|スタッフと話|有人",
    # Spanish
    r"(?:hablar|comunicarme|comunicar)\s+con\s+(?:una\s+|un\s+|alguna\s+|algún\s+)?"
    r"(?:persona|humano|agente|asesor|operador|representante)"
    r"|(?:persona|agente)\s+(?:real|humano|humana)|atención\s+humana",
    # Portuguese
    r"falar\s+com\s+(?:um\s+|uma\s+|algum\s+|alguma\s+)?(?:atendente|humano|pessoa|agente|"
    r"operador)|falar\s+com\s+alguém|atendente\s+humano|pessoa\s+de\s+verdade|"
    r"atendimento\s+humano",
    # French
    r"parler\s+(?:à|a|avec)\s+(?:un\s+|une\s+)?(?:conseiller|conseillère|humain|personne|"
    r"agent|opérateur)|parler\s+(?:à|a|avec)\s+quelqu'un|(?:vrai|vraie)\s+(?:personne|humain)",
    # German
    r"(?:mit\s+)?(?:einem|einer)\s+(?:echten\s+)?(?:menschen|mitarbeiter|mitarbeiterin|"
    r"person|berater|beraterin)\s+(?:sprechen|reden)|echten\s+menschen|kundenberater",
)

# Asking to try a failed action again ("try again"), beyond English (engine.stages.retry_offers).
_AGAIN = (
    r"再试|再試|重试|重試|再来一次|再來一次|再做一次",  # Chinese
    r"もう一度|もう一回|再試行|やり直",  # Japanese
    r"otra\s+vez|de\s+nuevo|inténtalo|intentar|reintenta|vuelve\s+a\s+intentar",  # Spanish
    r"de\s+novo|tente\s+novamente|tenta\s+de\s+novo|outra\s+vez|tentar\s+novamente",  # Portuguese
    r"réessa|reessa|recommence|encore\s+une\s+fois|de\s+nouveau",  # French
    r"nochmal|noch\s+einmal|erneut|wiederhol",  # German
)


@cache
def _compiled(parts: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE)


def _folded(text: str) -> str:
    return " ".join(normalize(text).casefold().split())


def asks_for_person_in_other_languages(text: str) -> bool:
    """Whether the customer asks for a person in one of the shipped languages other than
    English ("我要人工客服", "quiero hablar con una persona")."""
    return _compiled(_PERSON).search(_folded(text)) is not None


def asks_to_try_again_in_other_languages(text: str) -> bool:
    """Whether the customer asks to try again in one of the shipped languages other than
    English ("再试一次", "inténtalo de nuevo")."""
    return _compiled(_AGAIN).search(_folded(text)) is not None
