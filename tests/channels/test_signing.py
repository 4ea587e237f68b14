"""The signing helpers reproduce each platform's published known answers, so the channels, which
verify with the same functions, check what the platforms actually send."""

from __future__ import annotations

from pydantic import SecretStr

from infra.channels.signing import (
    constant_time_equals,
    sign_generic,
    sign_meta,
    sign_slack,
    sign_twilio,
)
from tests.channels.vectors import (
    META_APP_SECRET,
    META_BODY,
    META_SIGNATURE,
    SLACK_DOC_BODY,
    SLACK_DOC_SECRET,
    SLACK_DOC_SIGNATURE,
    SLACK_DOC_TIMESTAMP,
    TWILIO_DOC_PARAMS,
    TWILIO_DOC_SIGNATURE,
    TWILIO_DOC_TOKEN,
    TWILIO_DOC_URL,
)


def test_slack_signature_matches_slacks_documented_example() -> None:
    assert sign_slack(SLACK_DOC_SECRET, SLACK_DOC_BODY, SLACK_DOC_TIMESTAMP) == SLACK_DOC_SIGNATURE
    assert sign_slack(SecretStr(SLACK_DOC_SECRET), SLACK_DOC_BODY.encode(), 1531420618) == (
        SLACK_DOC_SIGNATURE
    )


def test_meta_signature_matches_a_genuine_meta_signed_body() -> None:
    assert sign_meta(META_APP_SECRET, META_BODY) == META_SIGNATURE


def test_twilio_signature_matches_twilios_documented_examples() -> None:
    assert sign_twilio(TWILIO_DOC_TOKEN, TWILIO_DOC_URL, TWILIO_DOC_PARAMS) == TWILIO_DOC_SIGNATURE
    with_port = TWILIO_DOC_URL.replace(".com", ".com:443")
    assert sign_twilio(TWILIO_DOC_TOKEN, with_port, TWILIO_DOC_PARAMS) == (
        "kvajT1Ptam85bY51eRf/AJRuM3w="
    )


def test_twilio_signature_sorts_repeated_parameters_like_twilio() -> None:
    repeated = [("Sid", "CA123"), ("SidAccount", "AC123"), ("Digits", "5678"), ("Digits", "1234")]
    assert sign_twilio(TWILIO_DOC_TOKEN, TWILIO_DOC_URL, repeated) == "IK+Dwps556ElfBT0I3Rgjkr1wJU="


def test_generic_signature_covers_timestamp_and_body() -> None:
    signature = sign_generic("s3cret", b'{"a":1}', 1700000000)
    assert signature.startswith("sha256=") and len(signature) == len("sha256=") + 64
    assert signature != sign_generic("s3cret", b'{"a":1}', 1700000001)
    assert signature != sign_generic("s3cret", b'{"a":2}', 1700000000)
    assert signature != sign_generic("other", b'{"a":1}', 1700000000)


def test_constant_time_equals_tolerates_non_ascii_input() -> None:
    assert constant_time_equals("abc", "abc")
    assert not constant_time_equals("ab\u00e7", "abc")
    assert not constant_time_equals("\ud800", "abc")  # a lone surrogate must not raise
