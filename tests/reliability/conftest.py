"""Fixtures of the reliability suites: the moto stack, a runtime with every channel enabled and
the platforms faked, the banking agent published (the function-scoped ones are shared with
tests/functions), a module-scoped variant for property tests and request matrices, and the `soak`
marker that keeps the long load run out of the default `make test`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from examples.banking import load as load_bank
from infra.aws.local_stack import LocalStack
from infra.runtime import Runtime, install_runtime, reset_runtime
from infra.runtime_settings import RuntimeSettings

# The Lambda fixtures of tests/functions, shared rather than copied: importing them into this
# conftest registers them for the tests in this folder.
from tests.functions.conftest import (  # noqa: F401
    AGENT_ID,
    API_KEY,
    CountingLLM,
    build_runtime,
    environment,
    llm,
    make_runtime,
    platforms,
    runtime,
    stack,
)
from tests.functions.platforms import FakePlatforms

SOAK = "soak"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{SOAK}: the long load run (100 sessions x 10 messages); run with `make soak`"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Soak tests run only when selected with `-m soak`."""
    if SOAK in (config.getoption("markexpr", "") or ""):
        return
    skip = pytest.mark.skip(reason="long load run: `make soak` (pytest tests/reliability -m soak)")
    for item in items:
        if SOAK in item.keywords:
            item.add_marker(skip)


@dataclass(frozen=True)
class SharedStack:
    """One moto stack and runtime for a whole module (hypothesis examples, request matrices):
    tests compare what they find with what was there before, not with an empty stack."""

    runtime: Runtime
    stack: LocalStack
    platforms: FakePlatforms
    llm: Any


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedStack]:
    """Like `runtime`, for the whole module. Never mix it with the function-scoped `stack` in
    one module: both start moto in process."""
    with pytest.MonkeyPatch.context() as env:
        for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER"):
            env.delenv(name, raising=False)
        env.setenv("POWERTOOLS_TRACE_DISABLED", "1")
        env.setenv("WAYPOINT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        env.setenv("WAYPOINT_AGENT_ID", AGENT_ID)
        env.setenv("WAYPOINT_TOOLS_MODULE", "examples.banking.tools")
        env.setenv("WAYPOINT_MANAGEMENT_API_KEY", API_KEY)
        env.setenv("WAYPOINT_SECRET_DIGEST_KEY", "reliability-secret-digest-key-0123456789")
        env.delenv("WAYPOINT_REPLY_PER_MESSAGE", raising=False)
        with LocalStack() as stack:
            platforms, model = FakePlatforms(), CountingLLM()
            runtime = install_runtime(build_runtime(RuntimeSettings.from_env(), model, platforms))
            runtime.run(runtime.publish_agent(load_bank()))
            yield SharedStack(runtime, stack, platforms, model)
            reset_runtime()
            asyncio.set_event_loop(None)
