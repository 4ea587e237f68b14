"""Context variable values on DynamoDB: one item per (agent, customer, variable)
(`VARS#{agent}#{customer}` / `VAR#{name}`; keys: `infra.aws.dynamo_table`)."""

from __future__ import annotations

import json
from typing import Any

from infra.aws.dynamo_table import _key, _key_part, _s, _Table


class DynamoVariableStore:
    """Context variable values per (agent, customer), one item per variable so that concurrent
    writers of different variables never overwrite each other."""

    def __init__(self, table_name: str | None = None, *, dynamodb: Any = None):
        self._table = _Table(table_name, dynamodb)

    @staticmethod
    def _pk(agent_id: str, customer_id: str) -> str:
        return f"VARS#{_key_part(agent_id, 'agent id')}#{customer_id}"

    async def get_variables(self, agent_id: str, customer_id: str) -> dict[str, Any]:
        """All stored values for this customer of this agent (name → value); one Query."""
        items = self._table.query(
            "pk = :pk AND begins_with(sk, :prefix)",
            {":pk": _s(self._pk(agent_id, customer_id)), ":prefix": _s("VAR#")},
        )
        return {item["sk"]["S"][4:]: json.loads(item["value"]["S"]) for item in items}

    async def set_variable(self, agent_id: str, customer_id: str, name: str, value: Any) -> None:
        """Store one JSON value, replacing the previous one."""
        self._table.ddb.put_item(
            TableName=self._table.name,
            Item={
                **_key(self._pk(agent_id, customer_id), f"VAR#{name}"),
                "value": _s(json.dumps(value)),
            },
        )

    async def delete_variable(self, agent_id: str, customer_id: str, name: str) -> None:
        """Forget one value; absent names are ignored."""
        self._table.ddb.delete_item(
            TableName=self._table.name, Key=_key(self._pk(agent_id, customer_id), f"VAR#{name}")
        )
