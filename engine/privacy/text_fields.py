"""Where a secret may be written: the text fields of what a turn stores.

Masking touches text only — what the customer, a model or a tool wrote: message and reply
texts, tool arguments and results, errors, notes, the labels of the options a reply offers, a
model's prompts and answers. Everything else in an event or a trace is the engine's own record
and is never masked, nor searched for a secret: ids of every kind (events, channel events,
senders, calls, turns, sessions, journeys, steps, guidelines), a message's attachments (the
platform's references to fetch them), model names, versions, timestamps, and the words the
engine routes by (a tool result's lifespan, a status, a mode). A masked channel event id loses
a reply; a masked sender escapes erasure; a masked media URL can no longer be fetched.

So each record is described here by the fields that hold text, and only those are touched. A
field is `TEXT` (every string in it is masked by value) or `CONTENT` (a structure a tool or a
model wrote: by value, and by name where a key is a secret name); a nested mapping names the
text fields of each item of a list, or of a mapping.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal, Protocol

TEXT: Literal["text"] = "text"
CONTENT: Literal["content"] = "content"

Fields = Mapping[str, Any]  # field name → TEXT, CONTENT or the Fields of its items

# An event's data (`Event.data`); its `text` is always text.
EVENT_DATA: Fields = {
    "arguments": CONTENT,  # a tool's arguments (secret ones already masked by name)
    "llm_view": CONTENT,  # the tool's result as the model reads it
    "view": CONTENT,  # and as the channel shows it
    "error": TEXT,  # a tool's error may quote what it ran on
    "options": {"label": TEXT, "value": CONTENT},  # what the customer reads; never the ids
    "why": TEXT,  # why the session went to a person (a status event)
    "reason": TEXT,
}

# A turn's trace (`engine.trace.TurnTrace`, as stored: its JSON form).
TRACE: Fields = {
    "llm_calls": {"prompt": TEXT, "answer": TEXT, "error": TEXT},
    "matches": {"rationale": TEXT},
    # a repair names what the model proposed ("dropped unknown step '…'"): the model wrote it
    "journeys": {"rationale": TEXT, "repairs": TEXT, "proposed": TEXT},
    "tool_calls": {"arguments": CONTENT, "detail": TEXT, "sources": TEXT},
    "tools_ahead": {"arguments": CONTENT, "detail": TEXT},
    "collected": CONTENT,
    "notes": TEXT,
    "handoff": {"reason": TEXT},
}

# The trace as later turns read it for echoes: a prompt quotes only what is stored elsewhere,
# and a turn that handled a secret keeps none.
TRACE_BUT_PROMPTS: Fields = {
    **TRACE,
    "llm_calls": {"answer": TEXT, "error": TEXT},
}


class Masking(Protocol):
    """What masks a text and a tool's or a model's structure (`engine.privacy.secrets.TurnSecrets`)."""

    def scrub_text(self, text: str) -> str: ...

    def scrub(self, value: Any) -> Any: ...


def masked_fields(masking: Masking, value: Any, fields: Fields | str) -> Any:
    """`value` with the text of `fields` masked; every other entry exactly as it was."""
    if fields == TEXT:
        return _masked_text(masking, value)
    if fields == CONTENT:
        return masking.scrub(value)
    assert isinstance(fields, Mapping)
    if isinstance(value, Mapping):
        return {
            k: masked_fields(masking, v, fields[k]) if k in fields else v for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(masked_fields(masking, v, fields) for v in value)
    return value


def texts_of(value: Any, fields: Fields | str) -> Iterator[str]:
    """Every text of `fields` in `value`: what may quote a secret."""
    if fields in (TEXT, CONTENT):
        yield from _strings(value)
    elif isinstance(value, Mapping):
        assert isinstance(fields, Mapping)
        for key, item in value.items():
            if key in fields:
                yield from texts_of(item, fields[key])
    elif isinstance(value, list | tuple):
        for item in value:
            yield from texts_of(item, fields)


def _masked_text(masking: Masking, value: Any) -> Any:
    if isinstance(value, str):
        return masking.scrub_text(value)
    if isinstance(value, Mapping):
        return {k: _masked_text(masking, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_masked_text(masking, v) for v in value)
    return value


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
