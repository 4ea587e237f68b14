"""Where a session's bodies too large for a DynamoDB item go in S3, how long they stay there, and
how erasure finds them without the customer index (issue #33).

A body over the item budget (`dynamo_table.ItemBodies`) is stored in the bucket and the item keeps
a pointer. An object must not outlive its item: the item expires by DynamoDB's TTL, the object by
the bucket's lifecycle rules (template.yaml, `EmbeddingsBucket`), one rule per lifetime, matched by
key prefix:

    sessions-idle/{session}/state.json.gz                 SessionIdleDays after its write
    sessions-events/{session}/events/{offset}.json.gz     EventRetentionDays
    sessions-events/{session}/payloads/{offset}.json.gz   EventRetentionDays
    sessions-traces/{session}/{turn}.json.gz              TraceRetentionDays
    sessions-{lifetime}/person={digest}/{session}         an owner marker (below)

The lifetimes are the items' (`engine.privacy.retention.Retention`): a META item expires SessionIdleDays
after its last write, and each write of a large state writes its object again; events, payloads
and traces expire that long after they were written, and so do their objects. S3 counts days from
the object's creation and rounds up to the next midnight UTC, so an object is never deleted
before its item (which would make a live item unreadable) and outlives it by less than a day
(then S3 removes it, asynchronously). Bodies written before issue #33 (`sessions/{session}/…`)
are expired by a rule of their own on `sessions/` after SessionIdleDays (the longest of the
three). No prefix is the start of another: each object is under exactly one rule, whichever way
S3 or CloudFormation would treat overlapping ones. moto keeps lifecycle rules without applying
them: locally, `infra.aws.s3_lifecycle` applies them.

Erasure finds a person's sessions through the customer index, which expires with the sessions'
items. Whatever an object outlives, it is found without the index: every offload also writes an
empty marker naming the session's customer by their keyed digest (`SessionStore.person_digest`)
and the session, beside the body under the same lifetime's prefix
(`sessions-{lifetime}/person={digest}/{session}`), once before the body (a call cut short
never leaves a body without one) and once after it (so it never expires before the body, even
written across midnight). Listing a person's three marker prefixes gives every session holding
bodies of theirs: erasure deletes the ones whose items are gone whole, markers last. A session
whose customer was erased from it (a group, customer `erased`) writes no marker: its objects are
found through the others' index entries. Session ids never contain `=` (`infra.turn_queue`), so
a marker's folder is never taken for a session's.
"""

from __future__ import annotations

from engine.privacy.erasure import ERASED

LEGACY = "sessions/"  # every body written before issue #33, whatever its kind
IDLE = "sessions-idle/"  # state bodies: SessionIdleDays
EVENTS = "sessions-events/"  # event and payload bodies: EventRetentionDays
TRACES = "sessions-traces/"  # trace bodies: TraceRetentionDays
LIFETIMES = (IDLE, EVENTS, TRACES)


def state_key(session_id: str) -> str:
    return f"{IDLE}{session_id}/state.json.gz"


def event_key(session_id: str, offset: int) -> str:
    return f"{EVENTS}{session_id}/events/{offset:010d}.json.gz"


def payload_key(session_id: str, offset: int) -> str:
    return f"{EVENTS}{session_id}/payloads/{offset:010d}.json.gz"


def trace_key(session_id: str, turn_id: str) -> str:
    return f"{TRACES}{session_id}/{turn_id}.json.gz"


def owner_key(body_key: str, digest: str, session_id: str) -> str:
    """The marker saying `session_id` holds bodies of the person named by `digest`, under the
    lifetime prefix of the body at `body_key`."""
    lifetime = next(p for p in LIFETIMES if body_key.startswith(p))
    return f"{lifetime}person={digest}/{session_id}"


def owners_prefixes(digest: str) -> tuple[str, ...]:
    """Where the markers of one person's sessions are listed (one prefix per lifetime)."""
    return tuple(f"{lifetime}person={digest}/" for lifetime in LIFETIMES)


def session_of_marker(key: str) -> str:
    return key.rsplit("/", 1)[-1]


def owns_bodies(customer_id: str) -> bool:
    """Whether a session's customer is a person a marker can name (not `erased`)."""
    return bool(customer_id) and customer_id != ERASED


def session_prefixes(session_id: str) -> tuple[str, ...]:
    """Every prefix a session's bodies may be under (this layout's and the one before it)."""
    return (
        f"{IDLE}{session_id}/",
        f"{EVENTS}{session_id}/",
        f"{TRACES}{session_id}/",
        legacy_prefix(session_id),
    )


def legacy_prefix(session_id: str) -> str:
    """Bodies written before issue #33: `sessions/{session}/…`, read through their items'
    pointers as before, deleted by erasure through the index, expired by the catch-all rule."""
    return f"{LEGACY}{session_id}/"


def legacy_keys(session_id: str, kind: str, names: set[str]) -> set[str]:
    """The legacy keys of `kind` (`events`, `payloads`, `traces`) named `names` (`{offset:010d}`
    or a turn id), `.json.gz` added."""
    return {f"{legacy_prefix(session_id)}{kind}/{name}.json.gz" for name in names}
