"""The offline model's meaning-based condition matching on requests worded without the
condition's own words (issue #21): general English only — light verbs, requests to "you", price
questions — and never a domain word list. Scores are those of `infra.offline.language.similarity`
and `infra.offline.matching.condition_score`; the engine matches a guideline from 5 of 10."""

from __future__ import annotations

import pytest

from infra.offline.language import HEAD_MATCH, similarity, words
from infra.offline.matching import APPLIES_AT, _agent_as_you


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("The customer wants to order a pizza", "can I get a pizza?"),
        ("The customer wants to book an appointment", "Can I make an appointment with a physio?"),
        ("The customer wants to know the balance of an account", "can you check my balance"),
        ("The customer asks how much a treatment costs", "how much is a treatment?"),
        ("The customer asks about fees on their account", "why did I pay a fee?"),
        ("The customer asks about the status of an order", "where is my order 17?"),
        ("The customer wants to know the balance of an account", "how much do I have in savings?"),
    ],
)
def test_a_request_in_other_words_reaches_the_match_threshold(condition: str, message: str) -> None:
    assert similarity(condition, message) >= HEAD_MATCH >= APPLIES_AT / 10


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        # the object alone, without a light verb, is not a request for the topic
        (
            "The customer wants to change an existing appointment",
            "I'd like to book a new appointment",
        ),
        ("The customer wants to order a pizza", "is the pizza vegetarian"),
        # a statement naming the head is not a question about it
        ("The customer asks about fees on their account", "I like low fees"),
    ],
)
def test_sharing_one_word_is_still_not_a_match(condition: str, message: str) -> None:
    assert similarity(condition, message) < APPLIES_AT / 10


def test_a_contraction_is_not_a_word_of_its_own() -> None:
    assert words("What's the price? I'd like it") == ["what", "the", "price", "i", "like", "it"]


def test_you_stands_for_the_business_only_for_the_one_word_the_customer_did_not_say() -> None:
    description = "Books appointments at a physiotherapy clinic and answers questions"
    asked = _agent_as_you("When are you open on Saturday?", "when the clinic is open", description)
    assert asked.endswith(" clinic")
    # two missing words: the customer did not ask for a booking by saying "you"
    untouched = _agent_as_you("can you tell me a joke", "wants to book an appointment", description)
    assert untouched == "can you tell me a joke"


@pytest.mark.parametrize(
    ("said", "value"),
    [
        ("three hundred", 300),
        ("two thousand five hundred dollars", 2500),
        ("one hundred and fifty", 150),
        ("twenty-five", 25),
    ],
)
def test_an_amount_in_words_is_a_number(said: str, value: int) -> None:
    from infra.offline.shapes import number_phrase

    assert number_phrase(said.split())[0] == value


@pytest.mark.parametrize("said", ["the checking one", "two", "a hundred of them? no"])
def test_a_lone_small_word_is_left_to_the_count_rule(said: str) -> None:
    from infra.offline.shapes import number_phrase

    assert number_phrase(said.split()) == (0, 0)


def test_a_time_and_a_weekday_are_read_from_words_around_them() -> None:
    from infra.offline.slots import Slot
    from infra.offline.values import extract_values

    slots = [Slot("time"), Slot("day")]
    assert extract_values(slots, "11:30 works for me, on Saturday") == {
        "time": "11:30",
        "day": "Saturday",
    }
    # two times: which one is meant is unclear, so none is taken by its shape
    assert "time" not in extract_values([Slot("time")], "9:00 or 15:00?")


def test_a_choice_with_a_hyphen_is_named_with_a_space_or_without() -> None:
    from infra.offline.choices import mentions_choice

    assert mentions_choice("a follow up please", "follow-up")
    assert mentions_choice("followup", "follow-up")
    assert not mentions_choice("a massage", "follow-up")
