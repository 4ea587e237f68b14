"""Reading a reply for a claim that an action was done (`engine.completion_claims`): what counts,
what an honest reply says instead, and the words an action is known by."""

from __future__ import annotations

import pytest

from engine.completion_claims import Reading, action_words

TRANSFER = action_words(
    "transfer_money",
    "Transfer money to another account",
    ["the transfer is complete"],
)
ORDER = action_words("place_order", "Place the pizza order", ["the order is placed"])


def claims(text: str, action=TRANSFER) -> list[tuple[str, bool]]:  # type: ignore[no-untyped-def]
    return [(c.said, c.specific) for c in Reading(text).claims(action)]


def test_an_action_is_known_by_its_verbs_their_past_and_its_nouns() -> None:
    assert {"transfer", "transferred", "transferring"} <= TRANSFER.verbs
    assert {"transferred", "complete"} <= TRANSFER.done
    assert {"money", "transfer", "transfers"} <= TRANSFER.nouns
    assert {"placed", "placing"} <= ORDER.verbs and {"order", "pizza", "pizzas"} <= ORDER.nouns
    send = action_words("send_money", "Send money to an account")
    assert "sent" in send.done and "account" not in send.nouns  # a destination, not the object


@pytest.mark.parametrize(
    "text",
    [
        "Done ✅",
        "DONE!!!",
        "✅",
        "all set!",
        "Completed.",
        "Success!",
        "The transfer is complete.",
        "Your request has been completed successfully.",
        "It's been taken care of.",
        "Everything went through.",
        "I transferred $40.00 to account 1234324.",
        "I’ve TRANSFERRED the money",  # a curly apostrophe
        "$40 has been sent.",
        "Your money is on its way 💸",
        "money's on its way",
        "I'm transferring it now.",
        "The transfer is done, anything else?",  # it says something before it asks
        "No problem, I transferred it.",
        "No worries I transferred it",  # "no worries" denies nothing
        "Before, I said no. Now it's done.",
    ],
)
def test_a_completion_claim_is_read_in_any_wording(text: str) -> None:
    assert claims(text), text


@pytest.mark.parametrize(
    "text",
    [
        "I need your confirmation before I transfer.",
        "I haven't transferred anything.",
        "I have NOT transferred anything yet.",
        "Nothing has been transferred yet.",
        "No money has been sent.",
        "I transferred nothing.",
        "Once done, I'll send you a receipt.",
        "Once you confirm, the money will be transferred.",
        "When it is done you will get a receipt.",
        "If you confirm the transfer is complete in a minute.",
        "Shall I transfer $40 to account 1234324?",
        "Is it done?",
        "Done?",
        "You want $40 transferred to 1234324.",
        "The amount to be transferred is $40.",
        "To complete the transfer I need your yes.",
        "Please complete the form.",
        "I can't do that until you confirm.",
        "The transfer is not complete yet.",
        "I'll transfer the money.",
        "Here is what I found: sufficient: yes.",
        "Your transfer was cancelled.",
    ],
)
def test_an_honest_reply_about_what_did_not_happen_claims_nothing(text: str) -> None:
    assert claims(text) == [], text


def test_a_claim_that_names_the_action_is_specific_a_bare_one_is_not() -> None:
    assert claims("Your order is placed!", ORDER) == [("Your order is placed", True)]
    assert claims("All set — money's on its way!") == [
        ("All set", False),
        ("money's on its way", True),
    ]


def test_success_words_count_only_where_they_are_not_denied_doubted_or_asked() -> None:
    markers = ["your order", "is placed"]

    def found(text: str) -> list[str]:
        return [c.said for c in Reading(text).markers(markers)]

    assert found("Your order P-1 is placed: 2 pizzas.") == ["your order", "is placed"]
    assert found("Your order is not placed yet.") == []
    assert found("Sorry, your order failed.") == []
    assert found("Shall I place your order?") == []
    assert found("Once your order is placed you get a text.") == []
