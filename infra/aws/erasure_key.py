"""The deployment's erasure key: the key of the digests that name erased people where their
erasure is remembered (tombstones, a group session's `erased_senders`, the owners of offloaded
bodies; `engine.privacy.erasure.PersonDigest`).

On AWS it is a Secrets Manager secret that template.yaml generates at deploy (`ErasureKey`: 64
random characters, never in the template, a parameter or an environment). Every function gets its
ARN (`WAYPOINT_ERASURE_KEY_SECRET`); the webhook, the worker, the handoff sweep (it writes bodies
back, marked with their owner) and the management function may read it, once per container, on
the first digest they need (most requests need none). The local stack creates its own secret
from the same resource (`infra.aws.local_resources`), and `waypoint serve` keeps it with its
data. `WAYPOINT_ERASURE_KEY` gives the key itself instead (another host).

Replacing the key forgets the erasures it recorded (up to `ERASURE_TOMBSTONE_DAYS`, 30 days): a
message of an erased person still queued would be answered. Keep the secret (the template retains
it when the stack is deleted); rotate it only with the turn queue and its dead-letter queue empty.
"""

from __future__ import annotations

import os

from engine.privacy.erasure import MIN_ERASURE_KEY_BYTES
from infra.aws.clients import AwsConfigurationError, client

ERASURE_KEY_ENV = "WAYPOINT_ERASURE_KEY"
ERASURE_KEY_SECRET_ENV = "WAYPOINT_ERASURE_KEY_SECRET"


def erasure_key() -> bytes:
    """The key, from `WAYPOINT_ERASURE_KEY` or else the secret `WAYPOINT_ERASURE_KEY_SECRET`
    names; `AwsConfigurationError` naming both when neither is set. Called once per store
    (`engine.privacy.erasure.PersonDigest` keeps the key), on its first digest."""
    value = os.environ.get(ERASURE_KEY_ENV) or ""
    if not value:
        arn = os.environ.get(ERASURE_KEY_SECRET_ENV) or ""
        if not arn:
            raise AwsConfigurationError(
                f"{ERASURE_KEY_SECRET_ENV} is not set: it names the Secrets Manager secret "
                "holding the key that erased people are named by (template.yaml's ErasureKey "
                f"sets it for every function); or give the key itself in {ERASURE_KEY_ENV}"
            )
        value = _secret(arn)
    if len(value.encode()) < MIN_ERASURE_KEY_BYTES:
        raise AwsConfigurationError(
            f"the erasure key is {len(value.encode())} bytes long; use at least "
            f"{MIN_ERASURE_KEY_BYTES} random ones (openssl rand -hex 32)"
        )
    return value.encode()


def _secret(arn: str) -> str:
    # Read once per container: the store's `PersonDigest` keeps what it returned.
    return str(client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"])
