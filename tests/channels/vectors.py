"""Published known-answer vectors: each platform's own example of a signed request."""

from __future__ import annotations

# Slack's documented example (docs.slack.dev "verifying requests"; slack_sdk's own test vector).
SLACK_DOC_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_DOC_TIMESTAMP = "1531420618"
SLACK_DOC_BODY = (
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmi"
    "bIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
SLACK_DOC_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"

# A genuine Meta-signed WhatsApp webhook body from pywa's tests (the app secret is since reset).
META_APP_SECRET = "1222e786b144d0e85b9f365372d93676"
META_BODY = (
    b'{"object":"whatsapp_business_account","entry":[{"id":"264937493375603","changes":[{"value":'
    b'{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550953877",'
    b'"phone_number_id":"277321005464405"},"contacts":[{"profile":{"name":"PyWa Tests"},'
    b'"wa_id":"972544401243"}],"messages":[{"from":"972544401243","id":"wamid.HBgMOTcyNTQ0NDAxMj'
    b'QzFQIAEhggM0RFQTNCMEEwRTY3QzUwODYzMDc4NjQ4QzM4ODAxM0YA","timestamp":"1730231903","text":'
    b'{"body":"Hey there! I am using PyWa."},"type":"text"}]},"field":"messages"}]}]}'
)
META_SIGNATURE = "sha256=54edfa1d7259e0eb13c677cc7d73d1b5c86cfa12433d19156e058ab9251bc441"

# Twilio's documented vectors (twilio-python tests/unit/test_request_validator.py).
TWILIO_DOC_TOKEN = "12345"
TWILIO_DOC_URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
TWILIO_DOC_PARAMS = {
    "CallSid": "CA1234567890ABCDE",
    "Digits": "1234",
    "From": "+14158675309",
    "To": "+18005551212",
    "Caller": "+14158675309",
}
TWILIO_DOC_SIGNATURE = "RSOYDt4T1cUTdK1PDd93/VVr8B8="

# The same request signed the SharedKey way (HMAC-SHA256, the key's secret "12345"), computed with
# twilio-python 9.13.0: RequestValidator("12345").compute_signature(url, params, "HMAC_SHA256").
TWILIO_SHA256_SIGNATURE = "033hgUJA9M/hXIZsYjwkerEP/DBm35nEri5FhCYjA5s="
