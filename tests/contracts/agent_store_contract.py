"""The `AgentStore` contract: subclass `AgentStoreContract` and provide an `agent_store` fixture."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import AgentNotFound, InvalidAgentDefinition
from engine.ports import AgentStore

from .factories import make_agent


class AgentStoreContract:
    @pytest.fixture
    def agent_store(self) -> AgentStore:
        raise NotImplementedError("provide an agent_store fixture")

    async def test_an_unpublished_agent_is_not_found(self, agent_store: AgentStore) -> None:
        with pytest.raises(AgentNotFound, match="waypoint publish"):
            await agent_store.get("bank")

    async def test_publish_without_version_uses_the_content_hash(
        self, agent_store: AgentStore
    ) -> None:
        agent = make_agent()
        version = await agent_store.publish(agent)
        assert version == agent.content_hash()
        assert await agent_store.get("bank") == agent.with_content_version()
        assert await agent_store.get("bank", version) == agent.with_content_version()

    async def test_publishing_the_same_content_again_is_idempotent(
        self, agent_store: AgentStore
    ) -> None:
        first = await agent_store.publish(make_agent(version="v1"))
        second = await agent_store.publish(make_agent(version="v1"))
        assert first == second == "v1"
        assert (await agent_store.get("bank")).version == "v1"

    async def test_a_version_cannot_be_reused_for_other_content(
        self, agent_store: AgentStore
    ) -> None:
        await agent_store.publish(make_agent(version="v1"))
        with pytest.raises(InvalidAgentDefinition, match="new version"):
            await agent_store.publish(make_agent(version="v1", name="Renamed bank"))
        assert (await agent_store.get("bank", "v1")).name == "Bank"

    async def test_publishing_flips_the_published_version_and_keeps_old_ones(
        self, agent_store: AgentStore
    ) -> None:
        await agent_store.publish(make_agent(version="v1"))
        await agent_store.publish(make_agent(version="v2", name="Bank 2"))
        assert (await agent_store.get("bank")).name == "Bank 2"
        assert (await agent_store.get("bank", "v1")).name == "Bank"
        await agent_store.publish(make_agent(version="v1"))  # rollback = re-publish an old version
        assert (await agent_store.get("bank")).version == "v1"

    async def test_an_unknown_version_is_not_found(self, agent_store: AgentStore) -> None:
        await agent_store.publish(make_agent(version="v1"))
        with pytest.raises(AgentNotFound, match="no version 'v9'"):
            await agent_store.get("bank", "v9")

    async def test_agents_are_independent(self, agent_store: AgentStore) -> None:
        await agent_store.publish(make_agent("bank", version="v1"))
        await agent_store.publish(make_agent("shop", version="v1", name="Shop"))
        assert (await agent_store.get("bank")).name == "Bank"
        assert (await agent_store.get("shop")).name == "Shop"

    async def test_rollback_flips_back_to_the_previous_version_and_again_forward(
        self, agent_store: Any
    ) -> None:
        await agent_store.publish(make_agent(version="v1"))
        await agent_store.publish(make_agent(version="v2", name="Bank 2"))
        assert await agent_store.rollback("bank") == ("v2", "v1")
        assert (await agent_store.get("bank")).version == "v1"
        assert await agent_store.published_version("bank") == "v1"
        assert await agent_store.rollback("bank") == ("v1", "v2")  # undoing a rollback
        assert await agent_store.versions("bank") == ["v1", "v2"]

    async def test_rollback_to_a_named_version(self, agent_store: Any) -> None:
        for n in (1, 2, 3):
            await agent_store.publish(make_agent(version=f"v{n}", name=f"Bank {n}"))
        assert await agent_store.rollback("bank", "v1") == ("v3", "v1")
        assert (await agent_store.get("bank")).name == "Bank 1"

    async def test_rollback_refuses_what_it_cannot_do_and_changes_nothing(
        self, agent_store: Any
    ) -> None:
        with pytest.raises(AgentNotFound, match="waypoint publish"):
            await agent_store.rollback("bank")
        await agent_store.publish(make_agent(version="v1"))
        with pytest.raises(AgentNotFound, match="no earlier published version"):
            await agent_store.rollback("bank")
        with pytest.raises(AgentNotFound, match=r"no version 'v9' \(stored versions: v1\)"):
            await agent_store.rollback("bank", "v9")
        assert await agent_store.published_version("bank") == "v1"
