"""Each customer message's language (engine.language.detection) and the session's language that
follows it (engine.language.session), alone and through a real turn."""

from __future__ import annotations

from typing import Any

import pytest

from engine.agent_config import AgentConfig
from engine.compose import ComposedReply
from engine.language.detection import detect
from engine.language.session import in_session_words, session_language
from engine.language.tags import SHIPPED
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import Guideline
from engine.sessions.session import EventKind, EventSource
from engine.testing import ScriptedLLM
from tests.engine.pipeline_kit import (
    Harness,
    compose_echo,
    make_agent,
    match_when,
    outputs_under_hash_seeds,
)

TYPICAL = {
    "en": ["transfer money", "what's my balance?", "thanks, that's all", "where is my order?"],
    "es": ["quiero transferir dinero", "ok gracias", "¿cuál es mi saldo?", "necesito ayuda"],
    "pt": ["sim, pode", "quero transferir dinheiro", "meu cartão foi recusado", "obrigado"],
    "fr": ["oui", "merci", "je veux faire un virement", "où est ma commande ?"],
    "de": ["danke", "ich möchte Geld überweisen", "wo ist meine Bestellung?", "vielen Dank"],
    "ja": ["はい", "振込をしたいです", "ありがとう", "キャンセルしてください"],
    "zh-Hans": ["我想转账", "谢谢", "我的余额是多少？", "确认"],
    "zh-Hant": ["我想轉帳", "謝謝", "我的餘額是多少？", "確認"],
}


@pytest.mark.parametrize(
    ("language", "text"), [(lang, text) for lang, texts in TYPICAL.items() for text in texts]
)
def test_each_shipped_language_is_recognised_on_short_messages(language: str, text: str) -> None:
    assert detect(text) == language
    assert detect(text, SHIPPED) == language


@pytest.mark.parametrize(
    "text",
    [
        "500",
        "1234324",
        "$250.00",
        "+34 600 123 456",
        "ORD-55821",
        "maria.silva@example.com",
        "https://shop.example.com/o/8841",
        "seldo",
        "Maria Silva",
        "👍",
        "🙏🙏",
        "ok",
        "ok 👍",
        "?",
        "",
    ],
)
def test_numbers_ids_names_and_emoji_are_in_no_language(text: str) -> None:
    assert detect(text) is None
    assert detect(text, SHIPPED) is None


def test_chinese_is_told_by_its_script_and_shared_characters_name_no_script() -> None:
    assert detect("我的用户名是seldo") == "zh-Hans"  # a Latin name inside Chinese
    assert detect("轉到帳戶1234324") == "zh-Hant"
    assert detect("好的") == "zh"
    assert detect("可以") == "zh"


def test_kanji_alone_is_japanese_to_an_agent_that_serves_japanese_and_no_chinese() -> None:
    assert detect("了解", ["ja"]) == "ja"
    assert detect("了解", ["ja", "zh-Hant"]) == "zh"
    assert detect("はい", ["en"]) == "ja"  # kana is Japanese whoever the agent serves


def test_a_message_in_an_unserved_language_is_not_pushed_into_a_served_one() -> None:
    for text in ["vorrei fare un bonifico", "ik wil geld overmaken", "grazie mille"]:
        assert detect(text, ["es", "pt-BR", "de"]) not in {"es", "pt", "de"}
    assert detect("vorrei fare un bonifico") == "it"  # every language: told as itself


def test_capitals_read_as_the_same_language() -> None:
    assert detect("WHERE IS MY ORDER") == "en"
    assert detect("QUIERO TRANSFERIR DINERO") == "es"


# -- the session's language -------------------------------------------------------------------


def test_the_session_language_follows_the_latest_served_message() -> None:
    served = ["en", "es", "pt-BR"]
    assert session_language(None, ["es"], served) == "es"
    assert session_language("es", ["pt"], served) == "pt-BR"
    assert session_language("en", ["es", "pt"], served) == "pt-BR"
    assert session_language("pt-BR", ["pt", "es"], served) == "es"


def test_none_and_unserved_languages_leave_the_session_language_as_it_was() -> None:
    served = ["en", "es"]
    assert session_language("es", [None], served) == "es"
    assert session_language("es", ["fr", None, "it"], served) == "es"
    assert session_language(None, [None], served) == "en"  # the agent's default
    assert session_language("de", [None], served) == "en"  # no longer served


def test_chinese_of_either_script_keeps_a_chinese_session_script() -> None:
    both = ["en", "zh-Hans", "zh-Hant"]
    assert session_language("zh-Hant", ["zh"], both) == "zh-Hant"
    assert session_language("en", ["zh"], both) == "zh-Hans"  # the first Chinese served
    assert session_language("en", ["zh"], ["en", "zh-Hant"]) == "zh-Hant"
    assert session_language("en", ["zh"], ["en", "ja"]) == "en"
    assert session_language("zh-Hant", ["zh-Hans"], both) == "zh-Hans"


# -- through a turn ---------------------------------------------------------------------------


def _customer_events(out: Any) -> list[Any]:
    return [
        e
        for e in out.state.events
        if e.kind is EventKind.MESSAGE and e.source is EventSource.CUSTOMER
    ]


async def test_a_turn_records_each_message_language_and_the_session_follows_it() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({}))
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(
        guidelines=[Guideline(id="g", condition="x", action="y")],
        config=AgentConfig(languages=("en", "es", "zh-Hant")),
    )
    h = Harness(agent, llm, index=False)
    await h.start()

    out = await h.say("quiero transferir dinero")
    assert _customer_events(out)[-1].data["language"] == "es"
    assert out.state.language == "es"
    assert out.trace.language_ms >= 0

    out = await h.say("1234324")  # in no language: recorded as none, the session stays
    assert "language" not in _customer_events(out)[-1].data
    assert out.state.language == "es"

    out = await h.say("vorrei fare un bonifico")  # Italian, not served: the session stays
    assert _customer_events(out)[-1].data.get("language") != "es"
    assert out.state.language == "es"

    out = await h.say("我想轉帳")
    assert _customer_events(out)[-1].data["language"] == "zh-Hant"
    assert out.state.language == "zh-Hant"

    out = await h.say("好的")  # the same in both scripts: the session keeps Traditional
    assert _customer_events(out)[-1].data["language"] == "zh"
    assert out.state.language == "zh-Hant"
    assert "Traditional Chinese" in llm.calls_for(ComposedReply)[-1].prompt


def test_detection_answers_alike_under_every_hash_seed() -> None:
    script = (
        "import yaml, pathlib\n"
        "from engine.language.detection import detect\n"
        "from engine.language.tags import SHIPPED\n"
        "texts = []\n"
        "for path in sorted(pathlib.Path('bench/language_cases').glob('*.yaml')):\n"
        "    data = yaml.safe_load(path.read_text(encoding='utf-8'))\n"
        "    for item in (data['dev'] or []) + (data['test'] or []):\n"
        "        texts.append(item if isinstance(item, str) else item['text'])\n"
        "for text in texts:\n"
        "    print(repr(text), detect(text), detect(text, SHIPPED), detect(text, ['es']))\n"
    )
    outputs = outputs_under_hash_seeds(script, ("0", "1", "42", "12345"))
    assert len(outputs) == 1
    assert next(iter(outputs)).count("\n") > 500


SERVED_ALL = ("en", "zh-Hans", "zh-Hant", "es", "pt-BR", "fr", "de", "ja")


@pytest.mark.parametrize(
    ("session", "text"),
    [
        ("de", "ja, genau"),  # a detector reads it as English
        ("es", "quinientos"),  # … as German
        ("pt-BR", "quinhentos"),  # … as English
        ("ja", "五百"),  # kanji only: Japanese too
        ("ja", "当座預金"),
    ],
)
def test_a_short_answer_in_the_sessions_own_words_keeps_its_language(
    session: str, text: str
) -> None:
    detected = [detect(text, SERVED_ALL)]
    assert session_language(session, detected, SERVED_ALL) != session  # the detector alone moves it

    settled = in_session_words(session, [text], detected, SERVED_ALL)

    assert settled == [session]
    assert session_language(session, settled, SERVED_ALL) == session


@pytest.mark.parametrize(
    ("session", "text", "moves_to"),
    [
        ("de", "Can you help me with a transfer?", "en"),
        ("es", "我想转账", "zh-Hans"),
        ("es", "Je voudrais faire un virement", "fr"),
    ],
)
def test_a_message_in_another_language_still_moves_the_session(
    session: str, text: str, moves_to: str
) -> None:
    settled = in_session_words(session, [text], [detect(text, SERVED_ALL)], SERVED_ALL)
    assert session_language(session, settled, SERVED_ALL) == moves_to


def _read_language_by_counting(text: str, rank: Any, allowed: frozenset[str] | None) -> Any:
    """`read_language` as it was written before #34 (sixth pass): every letter's script counted,
    whatever the text. It now counts only when a kana, hangul or han character is present."""
    from engine.language import detection as d

    words = d._without_neutral(text)
    letters = [c for c in words if c.isalpha()]
    if not letters:
        return None
    kana = sum(1 for c in letters if d._within(c, d._KANA))
    hangul = sum(1 for c in letters if d._within(c, d._HANGUL))
    han = sum(1 for c in letters if d._within(c, d._HAN))
    if kana:
        return "ja"
    if hangul and hangul >= han:
        return "ko"
    if han:
        if allowed is not None and "zh" not in allowed and "ja" in allowed:
            return "ja"
        return d.chinese_script(words)
    if len(letters) < 2:
        return None
    ranking = rank(" ".join(words.split()))
    if not ranking:
        return None
    language, confidence = ranking[0]
    return None if confidence < d.MIN_CONFIDENCE else language


def test_reading_a_language_skips_counting_scripts_only_when_none_is_there() -> None:
    import random

    from engine.language.detection import read_language

    def rank(text: str) -> list[tuple[str, float]]:  # deterministic, any text
        return [("fr" if len(text) % 2 else "de", (len(text) % 10) / 10)]

    alphabet = [
        *"abcdefg xyz éñü ",
        "・",  # katakana middle dot: in the kana range, not a letter
        "ー",
        *"はキ",
        *"한글",
        *"我想轉帳谢",
        "\U00020000",
        *"12 @.,!",
    ]
    generator = random.Random(34)
    texts = ["", "a", "ab", "・", "・a", "ー", "OK", "hello world", *TYPICAL["ja"], *TYPICAL["de"]]
    texts += [
        "".join(generator.choice(alphabet) for _ in range(generator.randint(0, 14)))
        for _ in range(3_000)
    ]
    for allowed in (None, frozenset({"en", "ja"}), frozenset({"en", "zh", "ja"})):
        for text in texts:
            expected = _read_language_by_counting(text, rank, allowed)
            assert read_language(text, rank, allowed=allowed) == expected, (text, allowed)
