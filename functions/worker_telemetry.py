"""The turn worker's Powertools Logger, Metrics and lazy X-Ray tracer, shared by its modules.

One instance of each, so the handler's decorators (`inject_lambda_context`, `log_metrics`)
flush what the burst, delivery and handoff modules record.
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics

from functions.tracing import LazyTracer

SERVICE = "waypoint-worker"
logger = Logger(service=SERVICE)
# `service` explicitly: it is the dimension template.yaml's DeliveryFailedAlarm watches.
metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "Waypoint", service=SERVICE
)
# The X-Ray SDK is imported on the first invocation, and only when subsegments are wanted
# (functions/tracing.py); Lambda's active tracing records the invocation either way.
tracer = LazyTracer(SERVICE)
