"""The language-detection set (`python -m bench languages`): it loads, holds at least 40 messages
of each shipped language in both parts plus messages in no language, and its scoring tunes on the
dev part alone. Accuracy is reported, never asserted: the set measures libraries."""

from __future__ import annotations

from collections import Counter

from bench.language_candidates import CANDIDATES
from bench.language_detection import Answer, Case, expected, load_cases, score, tune
from bench.language_report import accuracy_table, per_language_table
from engine.language.detection import MIN_CONFIDENCE
from engine.language.tags import SHIPPED, base


def test_every_shipped_language_has_40_messages_and_a_held_back_part() -> None:
    cases = load_cases()
    per_language = Counter(c.label for c in cases if c.label is not None)
    for tag in SHIPPED:
        language = base(tag)  # "pt-BR" → "pt"
        assert per_language[language] >= 40, tag
        parts = {c.part for c in cases if c.label == language}
        assert parts == {"dev", "test"}, tag
    assert sum(1 for c in cases if c.label is None) >= 40
    assert len({c.text for c in cases}) > 0.9 * len(cases)  # hardly any message twice


def test_the_threshold_is_chosen_on_the_dev_part_alone() -> None:
    cases = [
        Case("a", "en", part="dev"),
        Case("b", None, part="dev"),
        Case("c", None, part="test"),  # would want a higher threshold: must not count
    ]
    answers = [Answer("en", 0.6), Answer("es", 0.2), Answer("fr", 0.5)]
    assert tune(cases, answers, None) == 0.2 + 1e-9


def test_over_a_restricted_set_a_foreign_message_is_right_when_no_served_language_is_named() -> (
    None
):
    italian = Case("grazie mille", "it")
    shipped = frozenset({"en", "es"})
    assert expected(italian, None, shipped)
    assert expected(italian, "fr", shipped)
    assert not expected(italian, "es", shipped)
    assert not expected(italian, None, None)


def test_the_engine_row_scores_with_the_engine_threshold_and_renders() -> None:
    engine = CANDIDATES[0]
    cases = [c for c in load_cases() if c.label in ("es", "ja", None)]
    result = score(engine, "shipped", cases)
    assert result.status == "ok" and result.threshold == MIN_CONFIDENCE
    assert set(result.accuracy) == {"dev", "test"}
    table = accuracy_table([result], {})
    assert table.rows[0][0] == engine.name
    assert per_language_table([result], "test").headers[2:] == ["es", "ja", "none"]
