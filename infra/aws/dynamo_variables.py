"""Context variable values on DynamoDB: one item per (agent, person, variable), a person being a
customer id on a channel (`VARS#{agent}#{channel}#{customer}` / `VAR#{name}`; keys:
`infra.aws.dynamo_table`).

Until issue #33 the key had no channel (`VARS#{agent}#{customer}`): the same id on two channels
(a Telegram chat id equal to a Slack user id, one customer id given to the API and to the
generic channel) shared one profile, and erasing one person deleted the other's. Items written
then are read as a fallback, beneath the channel's own values ("read old keys as fallback"):
they cannot be told apart by channel, so they keep applying to that id on every channel until a
value is set (or deleted) for the channel, which shadows them. Deleting a value the legacy item
still holds writes a `deleted` marker under the channel's key, so the old value does not come
back. Erasing a person deletes their channel's items and the legacy ones of their id (which may
be theirs). No migration job is needed; docs/data-model.md says how to retire the fallback.
"""

from __future__ import annotations

import json
from typing import Any

from infra.aws.dynamo_table import _key, _key_part, _s, _Table

_VAR = "VAR#"


def variables_pk(agent_id: str, channel: str, customer_id: str) -> str:
    """The partition of one person's values for one agent."""
    return f"VARS#{_key_part(agent_id, 'agent id')}#{_key_part(channel, 'channel')}#{customer_id}"


def legacy_variables_pk(agent_id: str, customer_id: str) -> str:
    """The partition values were kept in before the channel was part of the key (read only)."""
    return f"VARS#{_key_part(agent_id, 'agent id')}#{customer_id}"


class DynamoVariableStore:
    """Context variable values per (agent, channel, customer), one item per variable so that
    concurrent writers of different variables never overwrite each other."""

    def __init__(self, table_name: str | None = None, *, dynamodb: Any = None):
        self._table = _Table(table_name, dynamodb)

    def _values(self, pk: str) -> dict[str, dict[str, Any]]:
        items = self._table.query(
            "pk = :pk AND begins_with(sk, :prefix)", {":pk": _s(pk), ":prefix": _s(_VAR)}
        )
        return {item["sk"]["S"][len(_VAR) :]: item for item in items}

    async def get_variables(self, agent_id: str, channel: str, customer_id: str) -> dict[str, Any]:
        """All stored values for this person of this agent (name → value): their channel's,
        over the legacy channel-less ones (two Queries while the fallback lasts)."""
        legacy = self._values(legacy_variables_pk(agent_id, customer_id))
        own = self._values(variables_pk(agent_id, channel, customer_id))
        merged = {**legacy, **own}
        return {
            name: json.loads(item["value"]["S"])
            for name, item in merged.items()
            if "deleted" not in item
        }

    async def set_variable(
        self, agent_id: str, channel: str, customer_id: str, name: str, value: Any
    ) -> None:
        """Store one JSON value, replacing the previous one."""
        self._table.ddb.put_item(
            TableName=self._table.name,
            Item={
                **_key(variables_pk(agent_id, channel, customer_id), f"{_VAR}{name}"),
                "value": _s(json.dumps(value)),
            },
        )

    async def delete_variable(
        self, agent_id: str, channel: str, customer_id: str, name: str
    ) -> None:
        """Forget one value; absent names are ignored. A value still held by a legacy item is
        shadowed by a `deleted` marker (the legacy item may be another channel's)."""
        key = _key(variables_pk(agent_id, channel, customer_id), f"{_VAR}{name}")
        if self._table.get(legacy_variables_pk(agent_id, customer_id), f"{_VAR}{name}") is None:
            self._table.ddb.delete_item(TableName=self._table.name, Key=key)
            return
        self._table.ddb.put_item(
            TableName=self._table.name, Item={**key, "deleted": {"BOOL": True}}
        )
