"""What an agent id may be: one rule, checked wherever an id enters (the agent's validation on
every build, publishing, the management API's paths and bodies, the runtime's settings).

An agent id becomes part of DynamoDB keys (`AGENT#{id}`, where `#` separates key parts), of S3
keys (`agents/{id}/{version}/…`), of URL paths and of log lines, so it is kept to characters that
mean nothing in any of them: `../evil`, `a/b` and `bank#x` are refused before anything is written.
"""

from __future__ import annotations

import re

from engine.errors import InvalidAgentDefinition

AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
AGENT_ID_RULE = (
    "an agent id is 1-100 characters of letters, digits, '_', '.' and '-', starting with a "
    "letter or a digit"
)
_AGENT_ID = re.compile(AGENT_ID_PATTERN)


class InvalidAgentId(InvalidAgentDefinition, ValueError):
    """An agent id breaks `AGENT_ID_RULE`; the message quotes the id and the rule."""


def agent_id_problem(agent_id: object) -> str | None:
    """Why `agent_id` is not a valid agent id, or None when it is."""
    if isinstance(agent_id, str) and _AGENT_ID.fullmatch(agent_id):
        return None
    shown = repr(agent_id)[:120]
    return f"agent id {shown} is not allowed: {AGENT_ID_RULE}"


def check_agent_id(agent_id: object) -> str:
    """`agent_id` when valid, else `InvalidAgentId`."""
    problem = agent_id_problem(agent_id)
    if problem is not None:
        raise InvalidAgentId([problem])
    assert isinstance(agent_id, str)
    return agent_id
