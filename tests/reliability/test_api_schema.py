"""Schemathesis over the management API's OpenAPI document, against the local server over real
HTTP (`waypoint.local_server.LocalServer`: the app as `waypoint serve` hosts it, on moto). Every
operation, with generated valid and invalid parameters and bodies (schemathesis' examples,
coverage and fuzzing phases), authenticated with the API key: never a server error, and every
response conforms to the document — a documented status, its content type, its body's schema,
the `Allow` header of a 405 — and every request the document calls invalid is refused.

Bounded: hypothesis `max_examples=10` per operation, derandomized (the same cases every run), no
deadline; the agent-document operations skip the coverage phase, which enumerates the whole agent
schema (~1 500 requests). About 20 s of CPU in all, the server's start included.

What is not checked, and why:
- `positive_data_acceptance`: an agent document, a message and a drawing have rules a JSON
  Schema cannot state (a journey naming an unknown step, a text of control characters only,
  `current` without `journey`), so a request the schema allows may rightly be refused with a
  documented 400/409/422 (whose bodies are still checked).
- a path parameter holding a line feed: see `_line_feed_in_path`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from examples.banking import TOOLS_MODULE, bank
from examples.banking import load as load_bank
from functions import management
from infra.runtime import reset_runtime
from tests.functions.conftest import API_KEY
from waypoint.local_server import LocalServer

CONFIG = f"""
headers = {{ "X-Api-Key" = "{API_KEY}" }}

[checks]
positive_data_acceptance.enabled = false

[[operations]]
include-path-regex = "^/agents(/check)?$"
phases.coverage.enabled = false
"""

# The document the server serves (`test_the_server_serves_the_document_fuzzed_here`), loaded
# when the tests are collected: schemathesis' lazy loader (`schemathesis.pytest.from_fixture`)
# fails under pytest 9.2 (it reads `request.node._nodeid`).
schema = schemathesis.openapi.from_dict(
    management.app.openapi(), config=SchemathesisConfig.from_str(CONFIG)
)


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    """The management API of a served local stack (its base URL). Its key is the one the
    autouse `environment` fixture of this folder sets for every test."""
    bank.reset_bank()
    with LocalServer(load_bank(), tools_module=TOOLS_MODULE, management_api_key=API_KEY) as server:
        yield f"{server.base_url}/api"
    reset_runtime()


def test_the_server_serves_the_document_fuzzed_here(api: str) -> None:
    served = httpx.get(f"{api}/openapi.json", headers={"X-Api-Key": API_KEY}).json()
    assert served.pop("servers") == [{"url": "/api"}]
    assert served == management.app.openapi()


@schema.parametrize()
@settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
def test_every_management_operation_conforms_to_its_openapi_document(case: Any, api: str) -> None:
    if _line_feed_in_path(case):
        return
    case.call_and_validate(base_url=api, headers={"X-Api-Key": API_KEY})


def _line_feed_in_path(case: Any) -> bool:
    """The one exclusion: a path parameter holding a line feed (only invalid ids do). Under
    `waypoint serve` such a request never reaches the management app: Starlette's
    `Mount("/api")` matches the rest of the path with `.*`, which stops at a line feed, so the
    local server's own router answers a plain-text 404 the document cannot describe. Deployed,
    API Gateway hands the path to the app, which refuses the id (422 naming the pattern);
    `test_api_fuzzing.py` sends any path to the app itself. (Schemathesis' coverage phase does
    not run `filter_path_parameters` hooks, hence a check here.)"""
    values = [str(value) for value in (case.path_parameters or {}).values()]
    return any("\n" in value or "%0a" in value.lower() for value in values)
