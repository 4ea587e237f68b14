"""The customer's words in their own language: decimal marks, numbers in words, dates and
relative dates, currency words — read with well-kept libraries (Babel's CLDR data, text2num,
cn2an, dateparser), each imported the first time a turn needs it, never at a handler's cold
start.

English is read by `engine.values.numbers` and `engine.values.dates` themselves; this module adds what other languages write.
Every reading of a word or a relative date is *worked out* (inexact): the customer is shown it
before a consequential call, whatever the language.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Any

from engine.language.tags import base

# The decimal mark of the shipped languages, as CLDR writes it (checked against Babel by
# tests/engine/test_locale_values.py); others are asked of Babel when first met.
_DECIMAL_MARKS = {"en": ".", "zh-Hans": ".", "zh-Hant": ".", "ja": ".", "es": ",", "pt": ",",
                  "fr": ",", "de": ","}  # fmt: skip


def decimal_mark(language: str) -> str:
    """The decimal mark people write in `language` ("," in Spanish, "." in English)."""
    known = _DECIMAL_MARKS.get(base(language))
    return known if known is not None else _babel_decimal_mark(language)


@cache
def _babel_decimal_mark(language: str) -> str:
    try:
        from babel.numbers import get_decimal_symbol

        return str(get_decimal_symbol(language.replace("-", "_")))
    except Exception:  # an unknown locale reads as the English convention
        return "."


# The languages that group thousands with a space ("1 000,50"; CLDR: a no-break or narrow space).
_SPACED_GROUPS = frozenset({"fr"})


def groups_with_spaces(language: str) -> bool:
    """Whether people writing `language` group thousands with a space ("1 000")."""
    return base(language) in _SPACED_GROUPS


# -- numbers written in words ----------------------------------------------------------------------

# Languages text2num reads (Latin-script number words).
_TEXT2NUM = {"es": "es", "fr": "fr", "de": "de", "pt": "pt", "it": "it", "nl": "nl"}
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
_MAX_WORDS = 8
# The number one written as an article ("un café", "eine Frage"): a number only when nothing
# else is, so it never makes another value ambiguous.
_ONE = frozenset({"un", "une", "uno", "una", "um", "uma", "ein", "eine", "einen", "einem", "een"})


def number_words(text: str, language: str) -> list[tuple[int, int, Decimal, bool]]:
    """Numbers written in words in `language`: (start, end, value, strong) — "quinientos",
    "dos mil quinientos", "cinq cents", "fünfhundert", "五百", "两千", "2万", "一千五百"."""
    lang = base(language)
    if lang in ("zh-Hans", "zh-Hant", "ja"):
        return _cjk_numbers(text)
    if lang in _TEXT2NUM:
        return _text2num_numbers(text, _TEXT2NUM[lang])
    return []


def _text2num_numbers(text: str, lang: str) -> list[tuple[int, int, Decimal, bool]]:
    from text_to_num import text2num

    words = list(_WORD.finditer(text))
    found: list[tuple[int, int, Decimal, bool]] = []
    i = 0
    while i < len(words):
        for j in range(min(len(words), i + _MAX_WORDS) - 1, i - 1, -1):
            phrase = text[words[i].start() : words[j].end()]
            try:
                value = text2num(phrase, lang)
            except (ValueError, IndexError, KeyError, TypeError):
                continue
            strong = not (i == j and phrase.casefold() in _ONE)
            found.append((words[i].start(), words[j].end(), Decimal(value), strong))
            i = j
            break
        i += 1
    return found


_CJK_NUMERAL = re.compile(
    r"[0-9.零〇一二两兩三四五六七八九十百千万萬亿億壹贰貳叁參肆伍陆陸柒捌玖拾佰仟]+"
)
_CJK_DIGIT_WORD = set("零〇一二两兩三四五六七八九十百千万萬亿億壹贰貳叁參肆伍陆陸柒捌玖拾佰仟")


def _cjk_numbers(text: str) -> list[tuple[int, int, Decimal, bool]]:
    import cn2an

    found: list[tuple[int, int, Decimal, bool]] = []
    for m in _CJK_NUMERAL.finditer(text):
        run = m.group()
        if not set(run) & _CJK_DIGIT_WORD:
            continue  # plain digits are read as runs (engine.values.runs)
        try:
            value = Decimal(str(cn2an.cn2an(run.replace("兩", "两"), "smart")))
        except (ValueError, InvalidOperation, KeyError, TypeError, AttributeError):
            continue
        # "一" alone is more often "a" (一下, 一个) than the number one
        found.append((m.start(), m.end(), value, value != 1))
    return found


# -- currencies written in words -------------------------------------------------------------------

# Words after an amount that name its currency, in the shipped languages.
CURRENCY_WORDS = {
    "元": "CNY", "块": "CNY", "塊": "CNY", "圆": "CNY", "圓": "CNY", "人民币": "CNY",
    "人民幣": "CNY", "円": "JPY", "日元": "JPY", "日圓": "JPY", "美元": "USD", "美金": "USD",
    "欧元": "EUR", "歐元": "EUR", "ユーロ": "EUR", "ドル": "USD", "新台币": "TWD", "新台幣": "TWD",
    "dólares": "$", "dólar": "$", "dolares": "$", "euro": "EUR", "euros": "EUR",
    "reais": "BRL", "real": "BRL", "dollar": "$", "dollars": "$",
}  # fmt: skip


# -- dates ---------------------------------------------------------------------------------------

_DATEPARSER_LANGUAGE = {"zh-Hans": "zh", "zh-Hant": "zh", "ja": "ja", "es": "es", "pt": "pt",
                        "fr": "fr", "de": "de", "it": "it", "nl": "nl"}  # fmt: skip
_YEAR = re.compile(r"\d{4}")


def locale_dates(
    text: str, language: str, today: date | None
) -> list[tuple[int, int, date, bool, str]]:
    """Dates said in `language`: (start, end, date, exact, what was worked out) — "12 de
    diciembre de 2026", "2026年12月12日", "mañana", "明天", "下周五", "金曜日". Exact only when the
    whole date, year included, is written out."""
    lang = base(language)
    found = _cjk_weekdays(text, today) if lang in ("zh-Hans", "zh-Hant", "ja") else []
    code = _DATEPARSER_LANGUAGE.get(lang)
    if code is None or today is None:
        return found
    for start, end, value in _search_dates(text, code, today):
        if any(s <= start < e for s, e, *_ in found):
            continue  # the weekday reading of this phrase is more precise
        phrase = text[start:end]
        exact = bool(_YEAR.search(phrase)) and not _RELATIVE_HINT.search(phrase)
        how = "" if exact else f"{phrase!r} counted from {today}"
        found.append((start, end, value, exact, how))
    return found


# Words that make a phrase relative, whatever dateparser made of it.
_RELATIVE_HINT = re.compile(
    r"(mañana|hoy|ayer|próxim|amanhã|hoje|ontem|próxim|demain|aujourd|hier|prochain|morgen|"
    r"heute|gestern|nächst|明天|今天|昨天|后天|後天|下|明日|今日|昨日|来週|今週|来|次)",
    re.IGNORECASE,
)


def _search_dates(text: str, code: str, today: date) -> list[tuple[int, int, date]]:
    try:
        from dateparser.search import search_dates
    except ImportError:  # pragma: no cover - a declared dependency
        return []
    settings: dict[str, Any] = {
        "RELATIVE_BASE": datetime(today.year, today.month, today.day, 12, 0),
        "PREFER_DATES_FROM": "future",
        "RETURN_AS_TIMEZONE_AWARE": False,
    }
    try:
        results = search_dates(text, languages=[code], settings=settings) or []
    except Exception:  # dateparser's own failures never fail a turn: no date read
        return []
    found = []
    cursor = 0
    for phrase, when in results:
        if re.fullmatch(r"\d+([.,]\d+)?", phrase.strip()):
            continue  # a bare number is no date
        start = text.find(phrase, cursor)
        if start < 0:
            continue
        cursor = start + len(phrase)
        found.append((start, cursor, when.date()))
    return found


_ZH_WEEKDAY = re.compile(
    r"(下个|下個|这个|這個|下|这|這|本)?(?:周|週|星期|礼拜|禮拜)([一二三四五六日天])"
)
_JA_WEEKDAY = re.compile(r"(来週|今週|次の)?(?:の)?([月火水木金土日])曜日?")
_ZH_DAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_JA_DAYS = {"月": 0, "火": 1, "水": 2, "木": 3, "金": 4, "土": 5, "日": 6}


def _cjk_weekdays(text: str, today: date | None) -> list[tuple[int, int, date, bool, str]]:
    """Weekdays in Chinese and Japanese ("下周五", "星期三", "金曜日", "来週の月曜日"): this
    week's and the next week's day are both readings, as "next Friday" is in English."""
    if today is None:
        return []
    found = []
    for pattern, days in ((_ZH_WEEKDAY, _ZH_DAYS), (_JA_WEEKDAY, _JA_DAYS)):
        for m in pattern.finditer(text):
            if pattern is _JA_WEEKDAY and "曜" not in m.group():
                continue
            ahead = (days[m.group(2)] - today.weekday()) % 7
            choices = {ahead, ahead + 7} if ahead == 0 or m.group(1) else {ahead}
            how = f"{m.group()!r} counted from {today}"
            for n in sorted(choices):
                found.append((m.start(), m.end(), today + timedelta(days=n), False, how))
    return found
