"""The message catalogs Waypoint ships: every language has every line the engine writes, with the
values the English line has, and each renders with its values in place (`engine.language.lines`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.language.lines import (
    CATALOGS,
    SHIPPED_LINES,
    Lines,
    UnknownLine,
    catalog_tag,
    keys,
    line,
    placeholders,
    read_flat_catalog,
    shipped,
    unknown_forms,
)
from engine.language.tags import SHIPPED
from engine.values.yes_no import read_yes_no

# A value for every placeholder any line has (a list where the engine gives one).
VALUES: dict[str, object] = {
    "action": "Pay a bill",
    "error": "ERR-42",
    "summary": "Pay a bill (bill_id B-77)",
    "values": ["«amount»", "«to account id»"],
    "name": "amount",
    "value": "40.00 USD",
    "journeys": ["Login", "Card check"],
    "journey": "Money transfer",
    "reason": "REASON-9",
    "head": "A, B",
    "last": "C",
    "count": 12,
}
CJK = {"zh-Hans", "zh-Hant", "ja"}


def test_a_catalog_ships_for_every_shipped_language_and_nothing_else() -> None:
    assert sorted(p.stem for p in CATALOGS.glob("*.yaml")) == sorted(SHIPPED)


@pytest.mark.parametrize("tag", SHIPPED)
def test_every_catalog_has_every_key_and_every_placeholder_the_english_line_has(tag: str) -> None:
    english, catalog = shipped("en"), shipped(tag)
    assert list(catalog) == list(english), "same keys, in the same order"
    for key, text in english.items():
        assert placeholders(catalog[key]) == placeholders(text), f"{tag}.{key}"
        assert not unknown_forms(catalog[key]), f"{tag}.{key}"
        if not key.endswith("separator"):
            assert catalog[key].strip() == catalog[key], f"{tag}.{key}: spaces around the line"


@pytest.mark.parametrize("tag", SHIPPED)
@pytest.mark.parametrize("key", keys())
def test_every_line_renders_in_every_language_with_its_values_in_place(tag: str, key: str) -> None:
    text = line(key, tag, **VALUES)

    assert "{{" not in text and "}}" not in text
    for name in placeholders(shipped(tag)[key]):
        value = VALUES[name]
        parts = value if isinstance(value, list) else [value]
        for part in parts:
            if name != "head":  # (a list's first items, joined)
                assert str(part).lower() in text.lower(), f"{tag}.{key}: {name} not in {text!r}"
    if tag in CJK:  # no Latin words of its own
        assert not _has_words(shipped(tag)[key]), f"{tag}.{key} is not in {tag}"


# Words that are the same in English and in the language.
SAME_AS_ENGLISH = {("es", "confirm_no"), ("fr", "options_title")}


@pytest.mark.parametrize("tag", sorted(set(SHIPPED) - {"en"}))
def test_no_line_is_left_in_english(tag: str) -> None:
    english = shipped("en")
    copied = [
        key
        for key, text in shipped(tag).items()
        if text == english[key] and _has_words(text) and (tag, key) not in SAME_AS_ENGLISH
    ]
    assert not copied, f"{tag} copies the English of {copied}"


def test_a_line_names_the_action_as_the_agent_wrote_it_lower_cased_mid_sentence_in_english() -> (
    None
):
    assert line("declined", "en", action="Send money to an account") == (
        "Nothing was done — as you asked, I did not send money to an account."
    )
    assert line("declined", "es", action="Send money to an account") == (
        "No se ha hecho nada: tal como me pediste, no he seguido con «Send money to an account»."
    )
    assert line("declined", "de", action="Geld überweisen") == (
        "Es wurde nichts ausgeführt – wie von Ihnen gewünscht, habe ich „Geld überweisen“ "
        "nicht durchgeführt."
    )


@pytest.mark.parametrize(
    ("tag", "joined"),
    [
        ("en", "a, b and c"),
        ("es", "a, b y c"),
        ("pt-BR", "a, b e c"),
        ("fr", "a, b et c"),
        ("de", "a, b und c"),
        ("zh-Hans", "a、b和c"),
        ("zh-Hant", "a、b和c"),
        ("ja", "a、bとc"),
    ],
)
def test_a_list_is_joined_the_languages_way(tag: str, joined: str) -> None:
    assert SHIPPED_LINES.joined(["a", "b", "c"], tag) == joined
    assert SHIPPED_LINES.joined(["a"], tag) == "a"
    assert SHIPPED_LINES.joined([], tag) == ""


def test_a_tag_without_its_own_catalog_reads_its_languages() -> None:
    assert catalog_tag("es-MX") == "es"
    assert catalog_tag("pt-PT") == "pt-BR"
    assert catalog_tag("zh-Hant-TW") == "zh-Hant"
    assert catalog_tag("it") is None
    assert line("confirm_yes", "es-MX") == "Sí, adelante"


def test_a_line_missing_in_a_language_comes_from_the_default_language_then_english() -> None:
    lines = Lines({"es": {"no_match": "Eso no lo sé."}, "it": {"confirm_no": "No, grazie"}}, "es")

    assert lines.line("confirm_no", "it") == "No, grazie"  # its own
    assert lines.line("no_match", "it") == "Eso no lo sé."  # the agent's default language
    assert lines.line("confirm_yes", "it") == "Sí, adelante"  # … its shipped catalog
    assert Lines({}, "it").line("confirm_yes", "it") == "Yes, go ahead"  # then English


def test_an_override_is_rendered_like_a_shipped_line() -> None:
    lines = Lines({"es": {"declined": "Vale, no he hecho «{{action}}»; {{action|lower}}."}})

    assert (
        lines.line("declined", "es", action="Pay Bill") == "Vale, no he hecho «Pay Bill»; pay bill."
    )


def test_an_unknown_key_or_a_missing_value_is_a_programming_error() -> None:
    with pytest.raises(UnknownLine):
        line("confirmaton", "en")
    with pytest.raises(KeyError, match="summary"):
        line("confirmation", "en")


def _has_words(text: str) -> bool:
    """Whether a line has words of its own (not only placeholders and punctuation)."""
    return re.search(r"[A-Za-z]", re.sub(r"{{[^}]*}}", "", text)) is not None


def test_importing_the_turn_reads_no_catalog() -> None:
    # Cold start: YAML and the catalogs are read on the first line a container writes.
    root = Path(__file__).resolve().parents[2]
    script = "import sys, engine.turn, engine.own_lines; print('yaml' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


_QUOTED = re.compile(r"[“«„「\"]\s*([^”»“」\"]+?)\s*[”»“」\"]")


@pytest.mark.parametrize("language", SHIPPED)
def test_the_words_a_confirmation_asks_for_and_its_buttons_answer_it(language: str) -> None:
    """The confirmation line asks for a yes or a no in the customer's words, and a channel
    without buttons shows their labels as text to type: each of these is read as it says."""
    asked = line("confirmation", language, summary="S")
    quoted = _QUOTED.findall(asked) or ["yes", "no"]  # English asks without quotes
    yes_word, no_word = quoted
    assert yes_word.casefold() in asked.casefold() and no_word.casefold() in asked.casefold()
    assert read_yes_no(yes_word) is True
    assert read_yes_no(no_word) is False
    assert read_yes_no(line("confirm_yes", language)) is True
    assert read_yes_no(line("confirm_no", language)) is False


@pytest.mark.parametrize("tag", SHIPPED)
def test_a_shipped_catalog_reads_without_yaml_as_yaml_reads_it(tag: str) -> None:
    import yaml

    text = (CATALOGS / f"{tag}.yaml").read_text(encoding="utf-8")
    flat = read_flat_catalog(text)
    assert flat is not None, f"{tag}.yaml has a line of another form: YAML reads it at a cold start"
    assert flat == yaml.safe_load(text)


@pytest.mark.parametrize(
    "text",
    [
        'greeting: "hi"  # an inline comment',
        'greeting: "\\x41"',  # an escape YAML has and JSON not
        'greeting: "\\u00e9"',
        'no: "a key YAML reads as false"',
        'Null: "a key YAML reads as null"',
        'greeting:\n  nested: "hi"',
        ' greeting: "indented"',
        'greeting: "hi"\ngreeting: "twice"',
        "greeting: hi",
        'greeting: "a\ttab"',
        '---\ngreeting: "hi"',
        'greeting: "hi" ',
    ],
)
def test_a_catalog_of_any_other_form_is_left_to_yaml(text: str) -> None:
    assert read_flat_catalog(text) is None


def test_writing_a_line_reads_no_yaml() -> None:
    # Cold start: the shipped catalogs are read without importing PyYAML (≈ 17 ms).
    root = Path(__file__).resolve().parents[2]
    script = (
        "import sys\nfrom engine.language.lines import line\n"
        "line('fallback_reply', 'de'); line('confirm_yes', 'ja')\nprint('yaml' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"
