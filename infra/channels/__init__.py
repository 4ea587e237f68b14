"""Chat channels: verify and normalize inbound webhooks, deliver replies through platform APIs.

Independent of AWS and of the turn logic. See `base` for the contract, one module per platform
(`telegram`, `slack`, `whatsapp`, `twilio`, `generic`) — some read what their platform posts in a
companion (`telegram_updates`, `slack_events`, `whatsapp_notifications`) and lay out what they send
in another (`slack_blocks`, `whatsapp_reply_messages`) —, `registry` to build them from the
environment, and `signing` to produce genuinely signed requests (tests, demos).

Import names from their module (`from infra.channels.base import Channel`): this package
re-exports nothing, so importing the contract does not load the five platform adapters — a
handler that needs none of them (the management API) does not pay for them.
"""
