"""Fixtures for the infra tests: an in-process moto stack built from template.yaml."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.aws.local_stack import LocalStack


@pytest.fixture
def local_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    """A fresh, empty in-process moto world with the template's table, bucket and queues; env vars
    (WAYPOINT_TABLE, …) set; warm caches cleared; embeddings cached under the test's tmp dir."""
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / "cache"))
    with LocalStack() as stack:
        yield stack


@pytest.fixture
def count_calls() -> Callable[[Any, str], list[dict[str, Any]]]:
    """`calls = count_calls(client, "GetObject")`: every later call of that operation is appended."""

    def attach(client: Any, operation: str) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []
        service = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register(
            f"before-parameter-build.{service}.{operation}",
            lambda params, **_: calls.append(params),
        )
        return calls

    return attach
