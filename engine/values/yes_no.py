"""Yes and no, read in code in every language Waypoint ships: a confirmation, a retry offer or a
yes/no field is answered only by a clear yes or a clear no — anything else answers nothing.

A message is a yes when, punctuation and courtesy words aside ("please", "por favor", "谢谢"), it
is only yes words of one language ("yes", "sí, claro", "好的", "はい、お願いします"); a no when it
starts with a no word ("no", "no, mejor no", "不要", "いいえ"). The lists are the languages' own
everyday words, kept here as data: no library reads a bare yes.
"""

from __future__ import annotations

import re
from functools import cache

from engine.language.tags import base
from engine.values.runs import normalize

# language → (yes words, no words, courtesy words); a phrase is matched whole.
_WORDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "en": (
        ("yes", "yep", "yeah", "yup", "sure", "ok", "okay", "confirm", "confirmed", "i confirm",
         "correct", "go ahead", "proceed", "do it", "that's right", "that's correct", "thats right"),
        ("no", "nope", "cancel", "stop", "don't", "dont", "do not", "wait", "hold on"),
        ("please", "thanks", "thank you"),
    ),
    "es": (
        ("sí", "si", "claro", "vale", "de acuerdo", "confirmo", "confirmado", "adelante", "dale",
         "correcto", "hazlo", "perfecto", "ok", "okey", "continuar", "continúa"),
        ("no", "cancela", "cancelar", "mejor no", "para", "espera", "no lo hagas"),
        ("por favor", "gracias", "muchas gracias"),
    ),
    "pt": (
        ("sim", "pode", "pode sim", "claro", "confirmo", "confirmado", "isso", "isso mesmo",
         "certo", "correto", "beleza", "ok", "pode fazer", "manda", "seguir", "pode seguir"),
        ("não", "nao", "cancela", "cancelar", "espera", "melhor não", "melhor nao"),
        ("por favor", "obrigado", "obrigada"),
    ),
    "fr": (
        ("oui", "d'accord", "daccord", "ok", "je confirme", "confirmé", "confirme", "vas-y",
         "allez-y", "c'est bon", "parfait", "exact", "ouais", "continuer"),
        ("non", "annule", "annuler", "arrête", "attends", "pas maintenant"),
        ("s'il vous plaît", "s'il te plaît", "svp", "merci"),
    ),
    "de": (
        ("ja", "genau", "klar", "ok", "okay", "bestätige", "bestätigt", "passt", "richtig",
         "los", "mach das", "gerne", "jawohl", "einverstanden", "fortfahren", "weiter"),
        ("nein", "abbrechen", "stopp", "stop", "lieber nicht", "warte", "nicht"),
        ("bitte", "danke", "vielen dank"),
    ),
    "zh": (
        ("好的", "好", "是的", "是", "确认", "確認", "可以", "行", "对", "對", "没问题", "沒問題",
         "同意", "嗯", "好啊", "继续", "繼續", "继续办理", "繼續辦理"),
        ("不要", "不", "否", "取消", "不用", "算了", "不行", "别", "別", "不是"),
        ("请", "請", "谢谢", "謝謝"),
    ),
    "ja": (
        ("はい", "ええ", "うん", "お願いします", "確認しました", "確認", "大丈夫です", "大丈夫",
         "いいです", "オーケー", "了解", "承知しました", "それで"),
        ("いいえ", "いや", "やめて", "キャンセル", "結構です", "やめます", "だめ", "ダメ"),
        ("お願いします", "ありがとう", "ありがとうございます"),
    ),
}  # fmt: skip
_UNSPACED = frozenset({"zh", "ja"})
_PUNCTUATION = re.compile(r"[\s.!¡?¿,;:、。！？，；：…~〜👍🙏]+")


@cache
def _forms() -> dict[str, tuple[str, str]]:
    """language → (its yes form, its no form), as regular expressions."""
    forms = {}
    for language, (yes, no, courtesy) in _WORDS.items():
        word = _alternation(yes)
        polite = _alternation(courtesy)
        # yes words of one language, with its courtesy words around them, in any order
        yes_form = rf"(?:(?:{polite})\s*)*(?:{word})(?:\s*(?:{word}|{polite}))*"
        # a no word starts the message: a whole word where words are spaced ("no, thanks"; not
        # "nothing"), anywhere a run of characters in Chinese and Japanese ("不要了")
        ends = "" if language in _UNSPACED else r"(?:\b|$)"
        forms[language] = (yes_form, rf"(?:{_alternation(no)}){ends}.*")
    return forms


@cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    forms = _forms().values()
    yes_pattern = re.compile("|".join(f"(?:{yes})" for yes, _ in forms))
    no_pattern = re.compile("|".join(f"(?:{no})" for _, no in forms))
    return yes_pattern, no_pattern


@cache
def _answer_pattern(language: str) -> re.Pattern[str] | None:
    form = _forms().get(language)
    return None if form is None else re.compile(f"(?:{form[0]})|(?:{form[1]})")


def _alternation(words: tuple[str, ...]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


def _spaced(text: str | None) -> str:
    folded = normalize(text or "").strip().casefold().replace("’", "'")
    return _PUNCTUATION.sub(" ", folded).strip()


def answers_in(text: str | None, language: str) -> bool:
    """Whether `text` is a yes or a no in `language`'s own words ("ja, genau" in German, "sim"
    in Portuguese): a language detector reads such short answers unreliably ("ja, genau" looks
    English to it), the session's language does not change on them."""
    spaced = _spaced(text)
    key = "zh" if base(language).startswith("zh") else base(language)
    pattern = _answer_pattern(key)
    return bool(spaced) and pattern is not None and pattern.fullmatch(spaced) is not None


def read_yes_no(text: str | None) -> bool | None:
    """True for a clear yes, False for a clear no, None for anything else."""
    spaced = _spaced(text)
    if not spaced:
        return None
    yes, no = _patterns()
    if yes.fullmatch(spaced):
        return True
    if no.fullmatch(spaced):
        return False
    return None
