"""The two port sets the benchmarks run the engine over.

- in-memory: `engine.memory.stores` stores and an in-memory vector index (what unit tests use);
- moto: `infra.aws` DynamoDB stores and the S3 vector index on the in-process moto stack built
  from template.yaml (`infra.aws.local_stack.LocalStack`) — real boto3 calls, emulated services.
  moto's emulation costs CPU of its own, so these figures bound the adapters' overhead from
  above; against real DynamoDB / S3 the network round trips (a few ms each) replace it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bench.harness import Ports
from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.model import AgentSnapshot
from engine.ports import VectorIndex
from engine.recall.vectors import InMemoryVectorIndex, agent_index_texts, build_index
from infra.embeddings import HashingEmbedder

IN_MEMORY = "in-memory"
MOTO = "moto (DynamoDB + S3)"


def in_memory_ports(embedder: HashingEmbedder) -> Ports:
    indexes: dict[tuple[str, str], InMemoryVectorIndex] = {}

    async def index_for(agent: AgentSnapshot) -> VectorIndex | None:
        key = (agent.id, agent.version)
        if key not in indexes:  # built once per version, like the warm-container cache
            indexes[key] = await build_index(embedder, agent_index_texts(agent))
        return indexes[key]

    return Ports(IN_MEMORY, InMemoryAgentStore(), InMemorySessionStore(), index_for)


@asynccontextmanager
async def moto_ports(embedder: HashingEmbedder) -> AsyncIterator[tuple[Ports, MotoStack]]:
    """DynamoDB stores + S3 vector index on a fresh in-process moto stack."""
    from infra.aws.clients import client
    from infra.aws.dynamo_agents import DynamoAgentStore
    from infra.aws.dynamo_sessions import DynamoSessionStore
    from infra.aws.local_stack import LocalStack
    from infra.aws.s3_vectors import S3VectorIndex

    with tempfile.TemporaryDirectory(prefix="waypoint-bench-") as cache:
        saved = os.environ.get("WAYPOINT_CACHE_DIR")
        os.environ["WAYPOINT_CACHE_DIR"] = cache
        try:
            with LocalStack() as stack:

                async def index_for(agent: AgentSnapshot) -> VectorIndex | None:
                    return S3VectorIndex(agent.id, agent.version)  # warm cache after the first

                dynamodb = client("dynamodb")  # one client for both stores: one to meter
                agents = DynamoAgentStore(dynamodb=dynamodb)
                sessions = DynamoSessionStore(dynamodb=dynamodb)
                ports = Ports(MOTO, agents, sessions, index_for)
                yield ports, MotoStack(stack.bucket, dynamodb, embedder)
        finally:
            if saved is None:
                os.environ.pop("WAYPOINT_CACHE_DIR", None)
            else:
                os.environ["WAYPOINT_CACHE_DIR"] = saved


class MotoStack:
    """The moto stack under the ports: the DynamoDB client its stores call (what a benchmark
    meters), and the bucket it publishes an agent's embeddings to, as `waypoint publish` does."""

    def __init__(self, bucket: str, dynamodb: Any, embedder: HashingEmbedder) -> None:
        self.bucket = bucket
        self.dynamodb = dynamodb  # a boto3 client: boto3 ships no types of its own
        self.embedder = embedder

    async def publish_embeddings(self, agent: AgentSnapshot) -> None:
        from infra.aws.clients import client
        from infra.aws.s3_vectors import publish_embeddings

        await publish_embeddings(client("s3"), self.bucket, agent, self.embedder)
