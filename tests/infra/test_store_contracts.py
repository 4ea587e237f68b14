"""Every store implementation runs the same contracts: in-memory (engine/memory/stores.py) and DynamoDB
(infra/aws/dynamo_*.py, on in-process moto) — turns, retention, erasure and rollback."""

from __future__ import annotations

from typing import Any

import pytest

from engine.memory.stores import (
    InMemoryAgentStore,
    InMemoryCustomerErasure,
    InMemoryInboxStore,
    InMemorySessionStore,
    InMemoryVariableStore,
)
from infra.aws.dynamo_agents import DynamoAgentStore
from infra.aws.dynamo_inbox import DynamoInboxStore
from infra.aws.dynamo_sessions import DynamoSessionStore
from infra.aws.dynamo_variables import DynamoVariableStore
from infra.aws.erasure import CustomerErasure
from infra.aws.local_stack import LocalStack
from tests.contracts.agent_store_contract import AgentStoreContract
from tests.contracts.customer_state_contract import (
    InboxContract,
    ManualClock,
    VariableStoreContract,
)
from tests.contracts.lifecycle_contract import (
    SHORT,
    ErasureContract,
    ErasureWorld,
    RetentionContract,
)
from tests.contracts.session_store_contract import SessionStoreContract


class TestInMemoryAgentStore(AgentStoreContract):
    @pytest.fixture
    def agent_store(self) -> InMemoryAgentStore:
        return InMemoryAgentStore()


class TestDynamoAgentStore(AgentStoreContract):
    @pytest.fixture
    def agent_store(self, local_stack: LocalStack) -> DynamoAgentStore:
        return DynamoAgentStore()


class TestInMemorySessionStore(SessionStoreContract):
    @pytest.fixture
    def session_store(self) -> InMemorySessionStore:
        return InMemorySessionStore()


class TestDynamoSessionStore(SessionStoreContract):
    @pytest.fixture
    def session_store(self, local_stack: LocalStack) -> DynamoSessionStore:
        return DynamoSessionStore()


class TestInMemoryInboxStore(InboxContract):
    @pytest.fixture
    def inbox_and_clock(self) -> tuple[Any, ManualClock]:
        clock = ManualClock()
        return InMemoryInboxStore(clock), clock


class TestDynamoInbox(InboxContract):
    @pytest.fixture
    def inbox_and_clock(self, local_stack: LocalStack) -> tuple[Any, ManualClock]:
        clock = ManualClock()
        return DynamoInboxStore(clock=clock), clock


class TestInMemoryVariableStore(VariableStoreContract):
    @pytest.fixture
    def variable_store(self) -> InMemoryVariableStore:
        return InMemoryVariableStore()


class TestDynamoVariableStore(VariableStoreContract):
    @pytest.fixture
    def variable_store(self, local_stack: LocalStack) -> DynamoVariableStore:
        return DynamoVariableStore()


class TestInMemoryRetention(RetentionContract):
    @pytest.fixture
    def store_and_clock(self) -> tuple[Any, ManualClock]:
        clock = ManualClock()
        return InMemorySessionStore(clock=clock, retention=SHORT), clock

    @pytest.fixture
    def erase_on(self) -> Any:
        return lambda store: store.erase_customer


class TestDynamoRetention(RetentionContract):
    @pytest.fixture
    def store_and_clock(self, local_stack: LocalStack) -> tuple[Any, ManualClock]:
        clock = ManualClock()
        return DynamoSessionStore(clock=clock, retention=SHORT), clock

    @pytest.fixture
    def erase_on(self) -> Any:
        return lambda store: CustomerErasure(store).erase


class TestInMemoryErasure(ErasureContract):
    @pytest.fixture
    def erasure_world(self) -> ErasureWorld:
        store, inbox, variables = (
            InMemorySessionStore(),
            InMemoryInboxStore(),
            InMemoryVariableStore(),
        )
        erasure = InMemoryCustomerErasure(store, inbox=inbox, variables=variables)
        return ErasureWorld(store, inbox, variables, erasure.erase)


class TestDynamoErasure(ErasureContract):
    @pytest.fixture
    def erasure_world(self, local_stack: LocalStack) -> ErasureWorld:
        store = DynamoSessionStore()
        erase = CustomerErasure(store).erase
        return ErasureWorld(store, DynamoInboxStore(), DynamoVariableStore(), erase)
