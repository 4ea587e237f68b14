"""The floor of an HTTP Lambda handler under the project's fixed choice (FastAPI + Mangum, the
Powertools Logger): one route with one response model, nothing of Waypoint. `make bench` imports
it beside the handlers, so their imports can be read against what any such handler pays here
(the management API's, against the 0.15× target of issue #22)."""

from __future__ import annotations

from aws_lambda_powertools import Logger
from fastapi import FastAPI
from mangum import Mangum
from pydantic import BaseModel

logger = Logger(service="fastapi-floor")
app = FastAPI()


class Health(BaseModel):
    ok: bool


@app.get("/health", response_model=Health)
def health() -> Health:
    return Health(ok=True)


handler = Mangum(app, lifespan="off")
