"""The contract models, text cleaning and splitting, and option helpers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from infra.channels.base import ChannelRequest, NormalizedMessage, OutboundReply, ReplyOption
from infra.channels.options import (
    compact_choice_id,
    match_numbered_reply,
    numbered_options,
    resolve_choice,
)
from infra.channels.text import clean_text, split_text, utf16_len
from tests.channels.signed import NOW

OPTIONS = [ReplyOption(id="billing", label="Billing"), ReplyOption(id="tech", label="Tech support")]


def test_request_headers_are_case_insensitive_and_query_is_parsed() -> None:
    request = ChannelRequest.from_http(
        "post",
        "https://h.example.com/webhooks/x?hub.mode=subscribe&a=1&a=2",
        headers={"Content-Type": "application/json; charset=utf-8", "X-Custom": "v"},
    )
    assert request.method == "POST" and request.path == "/webhooks/x"
    assert request.header("x-custom") == request.header("X-CUSTOM") == "v"
    assert request.content_type == "application/json"
    assert request.query == {"hub.mode": "subscribe", "a": "1"}


def test_normalized_message_becomes_the_engines_inbound_message() -> None:
    message = NormalizedMessage(
        channel="telegram",
        account_id="42",
        event_id="10000",
        conversation_key="tg:42:7",
        customer_id="7",
        text="hi",
        choice="opt:1",
        reply_to={"chat_id": 7},
        raw_type="callback_query",
        received_at=NOW,
    )
    inbound = message.to_inbound()
    assert inbound.event_id == "telegram:42:10000"
    assert (inbound.text, inbound.choice, inbound.received_at) == ("hi", "opt:1", NOW)
    assert inbound.metadata["conversation_key"] == "tg:42:7"
    assert "hi" not in repr(message)  # customer text stays out of reprs (logs)


def test_a_reply_needs_text_or_options() -> None:
    with pytest.raises(ValidationError):
        OutboundReply(text="  ")
    assert OutboundReply(options=OPTIONS).display_text == "Please choose an option:"


def test_clean_text_drops_control_characters_and_normalizes() -> None:
    assert clean_text("  e\u0301t\u00e9\x00\x07\r\nok\u2028end\x85 ") == "\u00e9t\u00e9\nok\nend"


@given(st.text(max_size=3000), st.integers(min_value=1, max_value=500))
def test_split_text_respects_the_limit_and_loses_only_whitespace(text: str, limit: int) -> None:
    parts = split_text(text, limit, length=utf16_len)
    assert all(utf16_len(part) <= limit or len(part) == 1 for part in parts)
    assert "".join("".join(parts).split()) == "".join(text.split())


def test_split_text_prefers_paragraphs_then_lines_then_spaces() -> None:
    assert split_text("aaa bbb\n\nccc ddd", 12) == ["aaa bbb", "ccc ddd"]
    assert split_text("aaa bbb\nccc ddd", 12) == ["aaa bbb", "ccc ddd"]
    assert split_text("aaa bbb ccc", 8) == ["aaa bbb", "ccc"]
    assert split_text("abcdefghij", 4) == ["abcd", "efgh", "ij"]
    assert split_text("", 10) == [""]


def test_numbered_options_and_replies_round_trip() -> None:
    assert numbered_options(OPTIONS) == "1. Billing\n2. Tech support"
    for answer in ("2", " 2. ", "2)", "#2", "tech  SUPPORT", "TECH"):
        assert match_numbered_reply(answer, OPTIONS) == "tech", answer
    for answer in ("3", "0", "two", "2 please"):
        assert match_numbered_reply(answer, OPTIONS) is None, answer


def test_compacted_choice_ids_resolve_only_to_offered_options() -> None:
    long_id = "x" * 300
    options = [*OPTIONS, ReplyOption(id=long_id, label="Long")]
    token = compact_choice_id(long_id, 64)
    assert len(token.encode()) <= 64 and token.startswith("~")
    assert resolve_choice(token, options) == long_id
    assert resolve_choice("billing", options) == "billing"
    assert resolve_choice(token, OPTIONS) is None  # not offered: a stale or forged click
    assert resolve_choice("~", options) is None
    assert compact_choice_id("billing", 64) == "billing"
