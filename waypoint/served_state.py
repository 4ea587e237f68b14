"""What `waypoint serve` keeps across restarts beside its data, in `DIR/secrets.json` (0600, in the
0700 data directory): the management API key, the generic channel secret, the secret-digest key,
and the local AWS endpoint's credentials and port.

Kept so that a restart invalidates nothing a client was given: the front end's key and secret,
the digests the stored sessions keep, and the `export …` lines another shell pasted to publish to
the stack (the endpoint comes back on the same port when that port is free; when it is taken,
`serve` says the endpoint moved). `--ephemeral` keeps nothing: new ones at every start.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waypoint.agent_source import CliProblem

SECRETS_FILE = "secrets.json"
AWS_PORT = "aws_port"


def _aws_key_id() -> str:
    from infra.aws.moto_access import LocalCredentials

    return str(LocalCredentials.new().access_key_id)


# Each credential's name in the file, the environment variable that overrides it (None: none
# does — AWS_ACCESS_KEY_ID in a shell is the user's own AWS key), and how a new one is made.
_KEPT: tuple[tuple[str, str | None, Callable[[], str]], ...] = (
    ("management_api_key", "WAYPOINT_MANAGEMENT_API_KEY", lambda: secrets.token_urlsafe(24)),
    ("generic_secret", "WAYPOINT_GENERIC_SECRET", lambda: secrets.token_urlsafe(24)),
    ("secret_digest_key", "WAYPOINT_SECRET_DIGEST_KEY", lambda: secrets.token_hex(32)),
    ("aws_access_key_id", None, _aws_key_id),
    ("aws_secret_access_key", None, lambda: secrets.token_urlsafe(30)),
)


@dataclass(frozen=True)
class ServedSecrets:
    """The local stack's credentials, and the AWS endpoint's port of the last start (None: none
    kept yet, or `--ephemeral`)."""

    management_api_key: str
    generic_secret: str
    secret_digest_key: str  # engine.privacy.digests: a new one forgets what sessions kept
    aws_access_key_id: str
    aws_secret_access_key: str
    aws_port: int | None = None

    @property
    def aws_credentials(self) -> Any:
        from infra.aws.moto_access import LocalCredentials

        return LocalCredentials(self.aws_access_key_id, self.aws_secret_access_key)


def served_secrets(data: Path | None) -> ServedSecrets:
    """Each credential from the environment (where one may come from there), else kept in the
    data directory, else new — and then kept."""
    stored: dict[str, Any] = {}
    path = data / SECRETS_FILE if data is not None else None
    if path is not None and path.exists():
        stored = _stored(path)
    chosen = {
        name: (os.environ.get(env) if env else None) or str(stored.get(name) or "") or make()
        for name, env, make in _KEPT
    }
    if path is not None and any(name not in stored for name in chosen):
        # A file from before a credential existed gets it added; what it held stays.
        _write(path, {**chosen, **stored})
    port = stored.get(AWS_PORT)
    return ServedSecrets(**chosen, aws_port=port if isinstance(port, int) else None)


def remember_aws_port(data: Path, port: int) -> None:
    """Keep the port the local AWS endpoint listens on, for the next start."""
    path = data / SECRETS_FILE
    stored = _stored(path) if path.exists() else {}
    if stored.get(AWS_PORT) != port:
        _write(path, {**stored, AWS_PORT: port})


def _write(path: Path, values: Mapping[str, Any]) -> None:
    """Readable by this user only: these are credentials of the local stack."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the stack's data: 0700
    partial = path.with_name(path.name + ".new")
    partial.unlink(missing_ok=True)
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as f:
        json.dump(dict(values), f)
    os.replace(partial, path)


def _stored(path: Path) -> dict[str, Any]:
    from engine.authoring.document_syntax import describe_syntax_error

    text = path.read_text(encoding="utf-8")
    try:
        stored = json.loads(text)
    except ValueError as exc:
        raise CliProblem(
            f"{describe_syntax_error(exc, text, 'json', str(path))}\nFix it, or delete it to "
            "make new credentials (clients configured with the old ones stop working)"
        ) from None
    if not isinstance(stored, dict):
        raise CliProblem(f"{path}: expected a JSON object of credentials; fix or delete it")
    return stored
