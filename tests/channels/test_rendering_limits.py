"""Every reply each channel renders satisfies its platform's documented limits and uniqueness rules
(`infra.channels.platform_limits`, written from the platforms' documents), for random texts (emoji,
CJK, markup, combining marks) and random option sets (1-150 options, labels up to 200 characters,
shared prefixes); no option is lost, whatever form (buttons, list, menu, numbered lines) it takes.

The payloads are captured on their way out through a real httpx client (an in-process transport
answering like each platform), so what is checked is exactly what would be sent.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from infra.channels.base import OutboundReply, ReplyOption
from infra.channels.options import resolve_choice
from infra.channels.platform_limits import (
    slack_violations,
    telegram_violations,
    twilio_violations,
    whatsapp_violations,
)
from infra.channels.registry import build_channels
from infra.channels.sms import sms_cost
from infra.channels.text import split_text, utf16_len
from infra.channels.titles import short_titles, title_key
from tests.channels.conftest import SettableClock
from tests.channels.signed import PUBLIC_BASE_URL, channel_secrets

PLATFORM = "http://platform.test"
CHANNELS = build_channels(
    channel_secrets(),
    SettableClock(),
    base_urls={
        "telegram": f"{PLATFORM}/telegram",
        "slack": f"{PLATFORM}/slack/api",
        "whatsapp": f"{PLATFORM}/graph",
        "twilio": f"{PLATFORM}/twilio",
    },
    public_base_url=PUBLIC_BASE_URL,
)
REPLY_TO: dict[str, dict[str, Any]] = {
    "telegram": {"chat_id": 7},
    "slack": {"channel": "C1", "thread_ts": "1.2"},
    "whatsapp": {"phone_number_id": "106540352242922", "wa_id": "15551234567"},
    "twilio": {"to": "+14155550199", "from": "+14155550100"},
}
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Characters that stress length accounting and splitting: astral emoji (2 UTF-16 units), joined
# and modified emoji, flags, CJK, combining accents, GSM-7 escapes, and each platform's markup.
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one drawn emoji of five code points
ALPHABET = st.sampled_from(
    [
        *"abcdefghij",
        *("  ", " ", "\n", "\n\n"),
        *("😀", FAMILY, "👍🏽", "🇫🇷", "中文", "한", "é", "e\u0301", "€"),
        *("[", "^", "*", "_", "~", "```", "<", ">", "&", "<@U1>", "https://x.example/a?b=1"),
    ]
)
texts = st.lists(ALPHABET, max_size=1500).map("".join)
label_parts = st.lists(ALPHABET, min_size=1, max_size=60).map("".join)


@st.composite
def option_sets(draw: st.DrawFn) -> list[ReplyOption]:
    """1-150 options; labels up to 200 characters, often sharing a long beginning; ids unique,
    some longer than any platform's id limit."""
    count = draw(st.integers(min_value=1, max_value=150))
    prefix = draw(st.sampled_from(["", "Transfer money to ", "Option ", "🇫🇷 "]) | label_parts)
    options = []
    for n in range(count):
        label = (prefix + draw(label_parts | st.just("")))[:200] or "x"
        if not label.strip():
            label = f"x{n}"
        id_tail = draw(st.sampled_from(["", "-" + "z" * 300, "-ü"]))
        options.append(ReplyOption(id=f"opt-{n}{id_tail}", label=label))
    return options


def _replies(text: str, options: list[ReplyOption], channel: str) -> OutboundReply:
    return OutboundReply(text=text, options=options, reply_to=REPLY_TO[channel])


class Captured:
    """An httpx transport answering like each platform, recording what was sent."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        n = len(self.requests)
        path = request.url.path
        if path.startswith("/telegram/"):
            return httpx.Response(200, json={"ok": True, "result": {"message_id": n}})
        if path.startswith("/slack/"):
            return httpx.Response(200, json={"ok": True, "ts": f"1.{n}"})
        if path.startswith("/graph/"):
            return httpx.Response(200, json={"messages": [{"id": f"wamid.{n}"}]})
        return httpx.Response(201, json={"sid": f"SM{n}"})

    def payloads(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for request in self.requests:
            if request.headers.get("content-type", "").startswith("application/json"):
                out.append(json.loads(request.content))
            else:
                out.append(dict(parse_qsl(request.content.decode(), keep_blank_values=True)))
        return out


def send(channel: str, reply: OutboundReply) -> list[dict[str, Any]]:
    captured = Captured()

    async def run() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(captured)) as client:
            receipt = await CHANNELS[channel].send(reply, client)
            assert receipt.plain_fallbacks == []  # no rendered payload had to be replaced

    asyncio.run(run())
    return captured.payloads()


def _offered_ids(channel: str, payloads: list[dict[str, Any]]) -> list[str]:
    """The choice ids of every native control (button, row, menu option) in the payloads."""
    ids: list[str] = []
    for payload in payloads:
        if channel == "telegram":
            for row in payload.get("reply_markup", {}).get("inline_keyboard", []):
                ids += [button["callback_data"] for button in row]
        elif channel == "slack":
            for block in payload.get("blocks", []):
                for element in block.get("elements", []):
                    if element["type"] == "button":
                        ids.append(element["value"])
                    elif element["type"] == "static_select":
                        ids += [option["value"] for option in element["options"]]
        elif channel == "whatsapp" and payload.get("type") == "interactive":
            action = payload["interactive"]["action"]
            ids += [b["reply"]["id"] for b in action.get("buttons", [])]
            ids += [r["id"] for s in action.get("sections", []) for r in s["rows"]]
    return ids


def _sent_text(channel: str, payloads: list[dict[str, Any]]) -> str:
    pieces = []
    for payload in payloads:
        if channel == "whatsapp":
            body = payload.get("text", {}).get("body") or payload.get("interactive", {})
            pieces.append(body if isinstance(body, str) else body["body"]["text"])
        elif channel == "twilio":
            pieces.append(payload["Body"])
        else:
            pieces.append(payload["text"])
    text = "\n".join(pieces)
    if channel == "slack":
        text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return text


VALIDATE = {
    "telegram": telegram_violations,
    "slack": slack_violations,
    "whatsapp": whatsapp_violations,
    "twilio": lambda payload: twilio_violations(payload, sms=True),
}


@pytest.mark.parametrize("channel", ["telegram", "slack", "whatsapp", "twilio"])
@PROPERTY
@given(text=texts, options=st.none() | option_sets())
@example(text="😀" * 3000, options=None)
@example(
    text="Where to?",
    options=[
        ReplyOption(id="a", label="Transfer money to my savings account"),
        ReplyOption(id="b", label="Transfer money to my mother"),
    ],
)
def test_every_rendered_payload_satisfies_the_platforms_documented_limits(
    channel: str, text: str, options: list[ReplyOption] | None
) -> None:
    if not text.strip() and not options:
        text = "hi"
    reply = _replies(text, options or [], channel)
    payloads = send(channel, reply)

    for payload in payloads:
        assert VALIDATE[channel](payload) == [], payload
    # Nothing the agent wrote is lost (splitting drops only whitespace, adds only closing and
    # reopening code fences).
    sent = re.sub(r"\s|```", "", _sent_text(channel, payloads))
    for word in re.sub(r"```", "", reply.display_text).split():
        assert word in sent
    # Every option is offered: as a native control whose id maps back to it, or numbered.
    offered = _offered_ids(channel, payloads)
    if offered:
        assert len(offered) == len(reply.options)
        resolved = [resolve_choice(choice, reply.options) for choice in offered]
        assert resolved == [option.id for option in reply.options]
    else:
        numbered = _sent_text(channel, payloads)
        for n in range(1, len(reply.options) + 1):
            assert re.search(rf"\n{n}\.\s", numbered), n
    if channel == "whatsapp":  # never cut until the meaning is lost: each label shows in full
        shown = _whatsapp_labels_shown(payloads)
        for option in reply.options:
            assert _flat(option.label) in shown, option.label


def _flat(text: str) -> str:
    """Text as compared: without whitespace and code fences (splitting a long text may break a
    line or close and reopen a code block inside a label)."""
    return re.sub(r"\s|```", "", text)


def _whatsapp_labels_shown(payloads: list[dict[str, Any]]) -> str:
    """Everything a WhatsApp customer reads: texts, button titles, list rows' titles and
    descriptions."""
    pieces = [_sent_text("whatsapp", payloads)]
    for payload in payloads:
        action = payload.get("interactive", {}).get("action", {})
        pieces += [b["reply"]["title"] for b in action.get("buttons", [])]
        for row in (r for section in action.get("sections", []) for r in section["rows"]):
            pieces += [row["title"], row.get("description", "")]
    return "\n".join(_flat(piece) for piece in pieces)


@PROPERTY
@given(
    labels=st.lists(st.sampled_from(["", "Transfer money to ", "🇫🇷 "]) | label_parts, max_size=1)
    .flatmap(lambda p: st.lists(label_parts.map(lambda s: (p[0] if p else "") + s), max_size=150))
    .filter(bool),
    limit=st.sampled_from([20, 24, 75]),
)
def test_short_titles_are_unique_non_empty_and_within_the_limit(
    labels: list[str], limit: int
) -> None:
    titles = short_titles(labels, limit, length=utf16_len)
    assert len(titles) == len(labels)
    assert len({title_key(t) for t in titles}) == len(titles)
    for title in titles:
        assert title.strip() == title and title
        assert utf16_len(title) <= limit


def test_titles_sharing_a_long_beginning_show_where_they_differ() -> None:
    titles = short_titles(
        [
            "Transfer money to my savings account",
            "Transfer money to my mother",
            "Transfer money to my savings plan",
            "Billing",
        ],
        20,
    )
    assert titles == ["Transfer…account", "Transfer…mother", "Transfer…plan", "Billing"]


def test_identical_labels_are_told_apart_by_their_number() -> None:
    assert short_titles(["Billing", "billing", "Support"], 20) == [
        "#1 Billing",
        "#2 billing",
        "Support",
    ]


# -- Twilio: UTF-16 units and SMS segments ---------------------------------------------------------


def test_three_thousand_emoji_go_out_within_twilios_body_limit_and_ten_segments() -> None:
    payloads = send("twilio", _replies("😀" * 3000, [], "twilio"))
    # 10 UCS-2 segments of 67 units hold 33 emoji each (a pair is never split): 660 units.
    assert [utf16_len(p["Body"]) for p in payloads] == [660] * 9 + [60]
    assert all(sms_cost(p["Body"]).segments <= 10 for p in payloads)
    assert "".join(p["Body"] for p in payloads) == "😀" * 3000


def test_twilio_whatsapp_bodies_are_cut_at_1600_utf16_units_only() -> None:
    reply = OutboundReply(
        text="😀" * 3000, reply_to={"to": "whatsapp:+14155550199", "from": "whatsapp:+1415555"}
    )
    payloads = send("twilio", reply)
    assert [utf16_len(p["Body"]) for p in payloads] == [1600, 1600, 1600, 1200]


@pytest.mark.parametrize(
    ("text", "encoding", "units", "segments"),
    [
        ("a" * 160, "GSM-7", 160, 1),
        ("a" * 161, "GSM-7", 161, 2),
        ("a" * 306, "GSM-7", 306, 2),
        ("a" * 307, "GSM-7", 307, 3),
        ("€" * 80, "GSM-7", 160, 1),  # extension characters cost an escape septet each
        ("a" * 152 + "€" + "a" * 152, "GSM-7", 306, 3),  # an escape pair never straddles two
        ("ж" * 70, "UCS-2", 70, 1),
        ("ж" * 71, "UCS-2", 71, 2),
        ("😀" * 35, "UCS-2", 70, 1),  # an emoji is two units
        ("a" + "😀" * 34, "UCS-2", 69, 1),
        ("a" * 66 + "😀" + "a" * 66, "UCS-2", 134, 3),  # 67 units a segment, no pair split
    ],
)
def test_sms_cost_counts_gsm7_septets_and_ucs2_units(
    text: str, encoding: str, units: int, segments: int
) -> None:
    cost = sms_cost(text)
    assert (cost.encoding, cost.units, cost.segments) == (encoding, units, segments)


# -- splitting ----------------------------------------------------------------------------------


@given(st.lists(ALPHABET, max_size=800).map("".join), st.integers(min_value=12, max_value=300))
def test_split_parts_never_break_a_drawn_character_and_keep_code_blocks_closed(
    text: str, limit: int
) -> None:
    parts = split_text(text, limit, length=utf16_len, fences=True)
    for part in parts:
        assert utf16_len(part) <= limit or "```" not in text
        assert part.count("```") % 2 == 0 or text.count("```") % 2 == 1
        assert not part.startswith(("\u200d", "\u0301", "\U0001f3fd"))


def test_a_cut_inside_a_code_block_closes_and_reopens_it() -> None:
    text = "See:\n```\n" + "line of code\n" * 10 + "```\nDone."
    parts = split_text(text, 60, fences=True)
    assert len(parts) > 1
    assert all(part.count("```") % 2 == 0 for part in parts)
    assert parts[1].startswith("```\n")


def test_a_hard_cut_keeps_a_family_emoji_and_flags_whole() -> None:
    parts = split_text(FAMILY * 5, 10, length=utf16_len)  # 8 UTF-16 units each
    assert parts == [FAMILY] * 5
    flags = "🇫🇷🇩🇪🇯🇵"
    assert split_text(flags, 6, length=utf16_len) == ["🇫🇷", "🇩🇪", "🇯🇵"]


# -- the validators bite -----------------------------------------------------------------------


def _wa_buttons(*titles: str) -> dict[str, Any]:
    buttons = [
        {"type": "reply", "reply": {"id": f"b{n}", "title": t}} for n, t in enumerate(titles)
    ]
    return {
        "type": "interactive",
        "interactive": {"type": "button", "body": {"text": "Hi"}, "action": {"buttons": buttons}},
    }


def test_validators_catch_what_each_platform_refuses() -> None:
    dup = "Transfer money to m…"
    assert whatsapp_violations(_wa_buttons(dup, dup)) == [f"button title {dup!r} is not unique"]
    assert whatsapp_violations(_wa_buttons("x" * 21))[0].startswith("button title is 21 long")
    assert whatsapp_violations(_wa_buttons("a", "b", "c", "d")) == ["4 reply buttons"]
    assert whatsapp_violations(_wa_buttons(" a"))[0].endswith("leading or trailing spaces")
    rows = [{"id": f"r{n}", "title": "Row"} for n in range(11)]
    listing = {
        "type": "interactive",
        "interactive": {
            "type": "list",
            "body": {"text": "Hi"},
            "action": {"button": "Choose", "sections": [{"title": "S", "rows": rows}]},
        },
    }
    problems = whatsapp_violations(listing)
    assert "11 list rows" in problems and "row title 'Row' is not unique" in problems
    keyboard = {"inline_keyboard": [[{"text": "a", "callback_data": "x" * 65}]] * 101}
    problems = telegram_violations({"chat_id": 1, "text": "a" * 4097, "reply_markup": keyboard})
    assert "text is 4097 long, over 4096" in problems
    assert "101 buttons, over 100" in problems
    assert any("not 1-64 bytes" in p for p in problems)
    buttons = [{"type": "button", "text": {"text": "b" * 76}, "action_id": "a", "value": "v"}] * 26
    problems = slack_violations({"text": "t", "blocks": [{"type": "actions", "elements": buttons}]})
    assert "an actions block with 26 elements" in problems
    assert any(p.startswith("button text is 76 long") for p in problems)
    assert "action_id 'a' is not unique" in problems
    assert twilio_violations({"Body": "😀" * 801}, sms=False) == ["Body is 1602 long, over 1600"]
    assert twilio_violations({"Body": "ж" * 671}, sms=True) == [
        "Body is 11 UCS-2 segments, over 10"
    ]


# -- the cases issue #18 reported ----------------------------------------------------------------


def test_whatsapp_labels_too_long_for_buttons_are_list_rows_with_the_full_label_below() -> None:
    # Issue #38: as buttons these became "Transfer…savings…" and "Transfer…mother".
    options = [
        ReplyOption(id="sav", label="Transfer money to my savings account"),
        ReplyOption(id="mom", label="Transfer money to my mother"),
    ]
    [payload] = send("whatsapp", _replies("Which transfer?", options, "whatsapp"))
    assert payload["interactive"]["type"] == "list"
    [section] = payload["interactive"]["action"]["sections"]
    assert [row["description"] for row in section["rows"]] == [o.label for o in options]
    titles = [row["title"] for row in section["rows"]]
    assert len({title_key(t) for t in titles}) == 2 and all(len(t) <= 24 for t in titles)


def test_whatsapp_list_rows_get_distinct_titles_and_keep_the_full_label_below() -> None:
    options = [ReplyOption(id=f"a{n}", label=f"Account ending in 4242-{n:04d}") for n in range(5)]
    [payload] = send("whatsapp", _replies("Which account?", options, "whatsapp"))
    [section] = payload["interactive"]["action"]["sections"]
    titles = [row["title"] for row in section["rows"]]
    assert len(set(titles)) == 5 and all(len(t) <= 24 for t in titles)
    assert [row["description"] for row in section["rows"]] == [o.label for o in options]


def test_telegram_120_options_become_numbered_text_not_120_buttons() -> None:
    options = [ReplyOption(id=f"o{n}", label=f"Choice {n}") for n in range(120)]
    [payload] = send("telegram", _replies("Pick one", options, "telegram"))
    assert "reply_markup" not in payload
    assert payload["text"].endswith("119. Choice 118\n120. Choice 119")


def test_slack_past_25_options_is_a_select_menu_and_past_100_numbered_text() -> None:
    menu = [ReplyOption(id=f"o{n}", label=f"Choice {n}") for n in range(40)]
    [payload] = send("slack", _replies("Pick one", menu, "slack"))
    [element] = payload["blocks"][1]["elements"]
    assert element["type"] == "static_select" and len(element["options"]) == 40
    many = [ReplyOption(id=f"o{n}", label=f"Choice {n}") for n in range(101)]
    payloads = send("slack", _replies("Pick one", many, "slack"))
    assert all("blocks" not in p for p in payloads)
