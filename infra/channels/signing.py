"""Sign requests exactly the way each platform does, and compare signatures in constant time.

The channels verify with these same functions, so there is one definition of each scheme. Tests,
the `waypoint demo` CLI (generic channel) and users poking a deployed webhook use them to produce
genuinely signed requests:

    body = json.dumps({"event_id": "e1", "conversation_id": "c1", "customer_id": "u1",
                       "text": "hi"}).encode()
    headers = generic_headers(secret, body, timestamp=int(time.time()))
    httpx.post(url, content=body, headers=headers)

Telegram has nothing to sign: it echoes a static secret token (`telegram_headers`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping

from pydantic import SecretStr

Secret = str | SecretStr

SLACK_SIGNATURE = "x-slack-signature"
SLACK_TIMESTAMP = "x-slack-request-timestamp"
META_SIGNATURE = "x-hub-signature-256"
TWILIO_SIGNATURE = "x-twilio-signature"
# Sent with SharedKey signing: `key=<shared key id>,algorithm=HMAC_SHA256`.
TWILIO_SIGNATURE_SETTINGS = "x-twilio-webhooks-signature-settings"
TWILIO_HMAC_SHA1 = "HMAC_SHA1"  # the Auth Token scheme (no settings header)
TWILIO_HMAC_SHA256 = "HMAC_SHA256"  # the SharedKey scheme
_TWILIO_HASHES = {TWILIO_HMAC_SHA1: hashlib.sha1, TWILIO_HMAC_SHA256: hashlib.sha256}
TELEGRAM_SECRET = "x-telegram-bot-api-secret-token"
GENERIC_SIGNATURE = "x-waypoint-signature"
GENERIC_TIMESTAMP = "x-waypoint-timestamp"


def as_secret(value: Secret) -> SecretStr:
    """`value` wrapped in `SecretStr` (kept out of reprs, logs and tracebacks' locals displays)."""
    return value if isinstance(value, SecretStr) else SecretStr(value)


def _key(secret: Secret) -> bytes:
    raw = secret.get_secret_value() if isinstance(secret, SecretStr) else secret
    return raw.encode()


def _bytes(body: bytes | str) -> bytes:
    return body.encode() if isinstance(body, str) else body


def constant_time_equals(received: str, expected: str) -> bool:
    """Compare a received credential with the expected one without leaking where they differ.
    Non-ASCII input is fine (it simply never matches an ASCII secret)."""
    return hmac.compare_digest(
        received.encode("utf-8", "replace"), expected.encode("utf-8", "replace")
    )


# -- Slack: v0 = HMAC-SHA256(signing secret, "v0:{ts}:{body}"), hex ------------------------------


def sign_slack(signing_secret: Secret, body: bytes | str, timestamp: int | str) -> str:
    """Slack's `X-Slack-Signature` value (`v0=<hex>`) for `body` sent at `timestamp`."""
    base = b"v0:" + str(timestamp).encode() + b":" + _bytes(body)
    return "v0=" + hmac.new(_key(signing_secret), base, hashlib.sha256).hexdigest()


def slack_headers(
    signing_secret: Secret,
    body: bytes | str,
    timestamp: int | str,
    content_type: str = "application/json",
) -> dict[str, str]:
    """Headers of a genuine Slack request (signature, timestamp, content type)."""
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": sign_slack(signing_secret, body, timestamp),
    }


# -- Meta (WhatsApp Cloud API, Messenger): sha256 = HMAC-SHA256(app secret, raw body), hex --------


def sign_meta(app_secret: Secret, body: bytes | str) -> str:
    """Meta's `X-Hub-Signature-256` value (`sha256=<hex>`). Sign the exact bytes sent: Meta
    escapes non-ASCII as `\\uXXXX`, which `json.dumps` (ensure_ascii=True) reproduces."""
    return "sha256=" + hmac.new(_key(app_secret), _bytes(body), hashlib.sha256).hexdigest()


def meta_headers(app_secret: Secret, body: bytes | str) -> dict[str, str]:
    """Headers of a genuine Meta webhook POST."""
    return {"Content-Type": "application/json", "X-Hub-Signature-256": sign_meta(app_secret, body)}


# -- Twilio: base64(HMAC-SHA1(auth token, url + Σ sorted(name + value))) --------------------------
# SharedKey signing is the same construction with HMAC-SHA256 and the shared key's secret, announced
# by `X-Twilio-Webhooks-Signature-Settings: key=<id>,algorithm=HMAC_SHA256` (twilio-python 9.13,
# `RequestValidator.compute_signature(…, algorithm="HMAC_SHA256")`).


def sign_twilio(
    auth_token: Secret,
    url: str,
    params: Mapping[str, str] | Iterable[tuple[str, str]],
    *,
    algorithm: str = TWILIO_HMAC_SHA1,
) -> str:
    """Twilio's `X-Twilio-Signature` for a form POST to `url` (the full public URL, query string
    included). Names are sorted, and each name's distinct values are sorted, as Twilio's own
    `RequestValidator` does, so repeated parameters sign identically. `algorithm`: HMAC_SHA1
    (Auth Token) or HMAC_SHA256 (SharedKey; pass the shared key's secret as `auth_token`)."""
    hash_function = _TWILIO_HASHES.get(algorithm.upper())
    if hash_function is None:
        raise ValueError(f"unsupported Twilio signature algorithm {algorithm!r:.40}")
    pairs = list(params.items()) if isinstance(params, Mapping) else list(params)
    signed = url
    for name in sorted({name for name, _ in pairs}):
        for value in sorted({value for key, value in pairs if key == name}):
            signed += name + value
    digest = hmac.new(_key(auth_token), signed.encode(), hash_function).digest()
    return base64.b64encode(digest).decode()


def twilio_signature_settings(header: str | None) -> tuple[str, str | None]:
    """(algorithm, shared key id) named by an `X-Twilio-Webhooks-Signature-Settings` header;
    no header (or no `algorithm=`) means the Auth Token scheme, HMAC_SHA1."""
    algorithm, key = TWILIO_HMAC_SHA1, None
    for part in (header or "").split(","):
        name, separator, value = part.partition("=")
        if not separator or not value.strip():
            continue
        if name.strip() == "algorithm":
            algorithm = value.strip().upper()
        elif name.strip() == "key":
            key = value.strip()
    return algorithm, key


def twilio_headers(
    auth_token: Secret,
    url: str,
    params: Mapping[str, str] | Iterable[tuple[str, str]],
    *,
    shared_key_id: str | None = None,
) -> dict[str, str]:
    """Headers of a genuine Twilio form webhook: signed with the Auth Token, or, given
    `shared_key_id`, with that SharedKey (pass its secret as `auth_token`)."""
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if shared_key_id is None:
        headers["X-Twilio-Signature"] = sign_twilio(auth_token, url, params)
        return headers
    headers["X-Twilio-Signature"] = sign_twilio(
        auth_token, url, params, algorithm=TWILIO_HMAC_SHA256
    )
    headers["X-Twilio-Webhooks-Signature-Settings"] = (
        f"key={shared_key_id},algorithm={TWILIO_HMAC_SHA256}"
    )
    return headers


# -- Telegram: a static secret token, echoed verbatim ----------------------------------------------


def telegram_headers(secret_token: Secret) -> dict[str, str]:
    """Headers of a Telegram webhook delivery set up with `setWebhook(secret_token=…)`."""
    token = secret_token.get_secret_value() if isinstance(secret_token, SecretStr) else secret_token
    return {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": token}


# -- Generic (ours): sha256 = HMAC-SHA256(secret, "{ts}.{body}"), hex ------------------------------


def sign_generic(secret: Secret, body: bytes | str, timestamp: int | str) -> str:
    """`X-Waypoint-Signature` value (`sha256=<hex>`) for `body` sent at unix time `timestamp`."""
    signed = str(timestamp).encode() + b"." + _bytes(body)
    return "sha256=" + hmac.new(_key(secret), signed, hashlib.sha256).hexdigest()


def generic_headers(secret: Secret, body: bytes | str, timestamp: int | str) -> dict[str, str]:
    """Headers of a signed generic-channel request (inbound webhook or our outbound callback)."""
    return {
        "Content-Type": "application/json",
        "X-Waypoint-Timestamp": str(timestamp),
        "X-Waypoint-Signature": sign_generic(secret, body, timestamp),
    }
