"""The offline model on agents it was not written for (issue #38): it reads journeys and
guidelines from their conditions and the agent's own words — a value by the shape the agent gave
it, an option as the agent writes it, a request told apart from a topic that shares only its
object, a condition of alternatives — never from a list of one agent's words. The agents of
bench/offline_agents measure it (`python -m bench offline-agents`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.conversation_tests import load_file, run_conversation
from infra.offline.language import similarity
from infra.offline.matching import APPLIES_AT, condition_score
from infra.offline.prompt import Message, SharedContext
from infra.offline.slots import Slot
from infra.offline.values import extract_values

SHOP_TESTS = Path(__file__).parents[2] / "bench" / "offline_agents" / "shop" / "tests"
ORDER_ID = Slot("order_id", description=r"shaped /[A-Za-z]-\d{4}/")


def test_a_word_of_the_shape_the_agent_gave_is_that_value() -> None:
    assert extract_values([ORDER_ID], "where is my parcel A-1001") == {"order_id": "A-1001"}
    # two words of the shape: which one is meant is unclear
    assert extract_values([ORDER_ID], "A-1001 or A-1002?") == {}


def test_text_not_written_for_the_slot_gives_only_a_code_by_its_shape() -> None:
    pin_shaped = Slot("reference", description=r"shaped /\d{4}/")
    assert extract_values([pin_shaped], "1234", named_only=True) == {}
    booking = Slot("booking", description="shaped /[A-Z0-9]{6}/")
    said = "I need to move my flight, my code is QX7K2P"
    assert extract_values([booking], said, named_only=True) == {"booking": "QX7K2P"}


def test_a_short_upper_case_option_is_named_only_as_written() -> None:
    size = Slot("size", "enum", ("XS", "S", "M", "L", "XL"))
    assert extract_values([size], "L please", answering=["size"]) == {"size": "L"}
    # "large" is no "S" and "a medium" no "M": a letter inside a word or a sentence is no option
    assert extract_values([size], "large", answering=["size"]) == {}
    assert extract_values([size], "a medium one", answering=["size"]) == {}


def test_how_many_days_asks_how_long() -> None:
    condition = "The customer asks how long they have to return something"
    assert similarity(condition, "How many days do I have to return something?") >= 0.6


def test_a_condition_of_alternatives_holds_as_its_best_alternative() -> None:
    context = SharedContext(
        messages=(Message("customer", "I have terrible toothache, it's an emergency"),),
        agent_description="Books appointments at a dental practice",
    )
    condition = "The customer is in severe pain or has a dental emergency"
    assert condition_score(condition, context)[0] >= APPLIES_AT


@pytest.mark.parametrize(
    "name",
    [
        "where is my parcel, with its number, is looked up",
        "a return request starts the return only, and looks nothing up",
        "a return with its order number asks only for the reason",
    ],
)
def test_the_scaffold_shop_tracks_and_returns_as_asked(name: str) -> None:
    """The issue's conversations: the order number said with the request goes ahead, the tool's
    data is told, and a return request does not also look the order up."""
    test = next(t for f in SHOP_TESTS.glob("*.conv.yaml") for t in load_file(f) if t.name == name)
    result = run_conversation(test)
    assert result.passed, result.failure
