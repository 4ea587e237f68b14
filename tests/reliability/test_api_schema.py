"""Schemathesis against the management API's own OpenAPI schema (FastAPI generates it even though
the deployed app does not serve it): every operation, with generated valid and invalid
parameters and bodies, authenticated with the API key → never a server error."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings

from functions import management
from tests.functions.conftest import API_KEY
from tests.reliability.conftest import SharedStack

schema = schemathesis.openapi.from_dict(management.app.openapi())
schema.app = management.app


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_management_operation_answers_without_a_server_error(
    case: object, shared: SharedStack
) -> None:
    response = case.call(headers={"X-Api-Key": API_KEY})  # type: ignore[attr-defined]

    assert response.status_code < 500, (case, response.text)  # type: ignore[attr-defined]
