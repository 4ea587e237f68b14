"""S3 lifecycle expiration where S3 does not run it: moto stores a bucket's lifecycle rules and
never applies them. `expire_objects` applies them the way S3 documents it, so that the local
stack's offloaded bodies go when a deployment's would (`infra.aws.offloaded_bodies`), and so that
tests can prove what template.yaml's rules do.

S3's rule: an object expires `Days` after its creation, rounded up to the next midnight UTC; when
several enabled rules match an object, the shortest expiration wins. Only prefix filters are
read (template.yaml uses nothing else); a rule filtering on anything more is refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from engine.errors import WaypointError

_DELETE_BATCH = 1000  # DeleteObjects' limit


class LifecycleNotEmulated(WaypointError):
    """A lifecycle rule uses a filter the local emulation does not read (only prefixes)."""


@dataclass(frozen=True)
class ExpirationRule:
    """An enabled rule's prefix and days to expiration."""

    rule_id: str
    prefix: str
    days: int


def expiration_rules(s3: Any, bucket: str) -> list[ExpirationRule]:
    """The bucket's enabled expiration rules (none without a lifecycle configuration)."""
    try:
        rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "NoSuchLifecycleConfiguration":
            return []
        raise
    found = []
    for rule in rules:
        days = rule.get("Expiration", {}).get("Days")
        if rule.get("Status") != "Enabled" or days is None:
            continue
        filters = rule.get("Filter", {})
        if set(filters) - {"Prefix"}:
            raise LifecycleNotEmulated(
                f"lifecycle rule {rule.get('ID')!r} filters on {sorted(set(filters))}; the "
                "local emulation reads prefix filters only (infra/aws/s3_lifecycle.py)"
            )
        prefix = filters.get("Prefix", rule.get("Prefix", ""))
        found.append(ExpirationRule(str(rule.get("ID", "")), str(prefix), int(days)))
    return found


def expires_at(created: datetime, days: int) -> datetime:
    """When S3 expires an object created at `created` under a rule of `days`: creation plus
    `days`, rounded up to the next midnight UTC."""
    moment = created.astimezone(UTC) + timedelta(days=days)
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight if midnight == moment else midnight + timedelta(days=1)


def expired_keys(
    objects: Sequence[dict[str, Any]], rules: Sequence[ExpirationRule], now: datetime
) -> list[str]:
    """The keys of `objects` (`Key`, `LastModified`) that `rules` have expired by `now`."""
    expired = []
    for entry in objects:
        days = [r.days for r in rules if entry["Key"].startswith(r.prefix)]
        if days and expires_at(entry["LastModified"], min(days)) <= now:
            expired.append(entry["Key"])
    return expired


def expire_objects(s3: Any, bucket: str, now: datetime | None = None) -> list[str]:
    """Delete the objects of `bucket` that its lifecycle rules have expired by `now` (the
    current time by default); returns their keys."""
    rules = expiration_rules(s3, bucket)
    if not rules:
        return []
    moment = now or datetime.now(UTC)
    expired: list[str] = []
    for page in _pages(s3, bucket):
        expired += expired_keys(page, rules, moment)
    for start in range(0, len(expired), _DELETE_BATCH):
        batch = [{"Key": key} for key in expired[start : start + _DELETE_BATCH]]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": batch})
    return expired


def _pages(s3: Any, bucket: str) -> Iterator[list[dict[str, Any]]]:
    token: dict[str, str] = {}
    while True:
        page = s3.list_objects_v2(Bucket=bucket, **token)
        yield page.get("Contents", [])
        if not page.get("IsTruncated"):
            return
        token = {"ContinuationToken": page["NextContinuationToken"]}
