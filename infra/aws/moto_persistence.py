"""Keep the local stack's moto state on disk, so `waypoint serve` survives a restart or a crash.

moto keeps everything in memory. Here the threaded server's WSGI app is wrapped: after every
request that changes DynamoDB, SQS or S3, that service's state (tables, queues with their
messages, buckets) is pickled to `DIR/moto/{service}.pickle` — written to a temporary file,
fsynced, then renamed over the old one — *before* the response leaves the server. The directory
is its owner's only (0700, files 0600, tightened at start if an older version left them open):
the snapshots are every conversation of the stack. So whatever a
client was told succeeded (the webhook's `SendMessage`, a turn's commit) is on disk; a
`kill -9` at any moment leaves the last complete snapshot of each service, never a torn one.

Why this and not moto's recorder (`MOTO_ENABLE_RECORDING`): the recorder appends every request
to a file and rebuilds state by replaying all of them, so the file and the start-up time grow
with every poll of the queue; a replayed `ReceiveMessage` / `DeleteMessage` pair does not find
the receipt handles of the original run (they are random), so deleted messages come back; and
it neither fsyncs nor serializes its appends. Why not file-backed store adapters: the served
stack would then run other code than a deployment (the point of the local stack is the same
DynamoDB, SQS and S3 adapters), and SQS would still need one.

The cost: a snapshot re-pickles the whole service, so a write costs time proportional to that
service's state (local scale: a few milliseconds per thousand items). `--ephemeral` skips it.

On restore, messages that were in flight (received, not yet deleted) become visible at once:
the only consumer that held them, this server's poller, died with the old process.
"""

from __future__ import annotations

import contextlib
import copyreg
import fcntl
import io
import logging
import os
import pickle
import re
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from engine.errors import WaypointError
from infra.aws import moto_fidelity

log = logging.getLogger("waypoint.local")

FORMAT = 1
PERSISTED_SERVICES = ("dynamodb", "sqs", "s3")
# Actions of these shapes never change state; anything else (an unknown action included) is
# snapshotted — a needless snapshot costs time, a missed one loses data.
_READ_ACTIONS = ("Get", "Describe", "List", "Query", "Scan", "BatchGet", "TransactGet")
_CREDENTIAL_SCOPE = re.compile(r"Credential=[^/,]+/[^/,]+/[^/,]+/([^/,]+)/aws4_request")
_S3_LOCK = threading.RLock()

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class LocalStateError(WaypointError):
    """The local data directory cannot be used (in use by another server, unreadable, or
    written by another moto version); the message says what to do."""


class _StatePickler(pickle.Pickler):
    """moto's SQS queues hold a `threading.Condition`; a restored queue gets a fresh one."""

    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[threading.Condition] = lambda _: (threading.Condition, ())
    dispatch_table[type(threading.RLock())] = lambda _: (threading.RLock, ())
    dispatch_table[type(threading.Lock())] = lambda _: (threading.Lock, ())


def _moto_version() -> str:
    import moto

    return str(moto.__version__)


class MotoStateFiles:
    """The snapshots of one local stack in `directory` (see the module docstring).

    `open()` takes the directory's lock (one server per directory) and `restore()` loads what is
    there; `wrap(app)` returns the WSGI app that snapshots after each state-changing request."""

    def __init__(self, directory: Path, account_id: str, region: str) -> None:
        self.directory = Path(directory)
        self.account_id = account_id
        self.region = region
        self.restored: list[str] = []
        self._ready = False
        self._lock_file: IO[str] | None = None

    # ---- lifecycle

    def open(self) -> None:
        """Create the directory and lock it for this process (released when it exits, however
        it exits)."""
        try:
            _private_directory(self.directory)
            _private_directory(self.directory / "moto")
            for stored in (self.directory / "moto").iterdir():  # an older version's 0644 files
                stored.chmod(stored.stat().st_mode & 0o700)
            descriptor = os.open(self.directory / "lock", os.O_WRONLY | os.O_CREAT, 0o600)
            os.fchmod(descriptor, 0o600)
            lock_file = os.fdopen(descriptor, "w")  # held until close()
        except OSError as exc:
            raise LocalStateError(
                f"cannot use {self.directory} as the local data directory ({exc}); pass another "
                "--data DIR or --ephemeral"
            ) from None
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            raise LocalStateError(
                f"{self.directory} is in use by another `waypoint serve`; stop it, or pass "
                "another --data DIR"
            ) from None
        self._lock_file = lock_file

    def close(self) -> None:
        self._ready = False
        if self._lock_file is not None:
            self._lock_file.close()  # releases the flock
            self._lock_file = None

    def restore(self) -> list[str]:
        """Load every stored service into moto's (freshly reset) backends; returns the services
        restored. Snapshots start after this: nothing on disk is overwritten before it is read."""
        restored = []
        for service in PERSISTED_SERVICES:
            path = self._path(service)
            if not path.exists():
                continue
            with open(path, "rb") as f:
                try:
                    stored = pickle.load(f)
                except Exception as exc:
                    raise self._unreadable(path, f"{type(exc).__name__}: {exc}") from None
            if not isinstance(stored, dict) or stored.get("format") != FORMAT:
                raise self._unreadable(path, "unknown format")
            _RESTORERS[service](self, stored["state"])
            restored.append(service)
        self.restored = restored
        self._ready = True
        return restored

    def _unreadable(self, path: Path, why: str) -> LocalStateError:
        return LocalStateError(
            f"cannot read {path} ({why}); it may come from another moto version than this one "
            f"({_moto_version()}). Move {self.directory} away to start empty, or serve with "
            "--ephemeral"
        )

    # ---- snapshots

    def _path(self, service: str) -> Path:
        return self.directory / "moto" / f"{service}.pickle"

    def save(self, service: str) -> None:
        """Write `service`'s state atomically; the caller holds that service's lock."""
        buffer = io.BytesIO()
        state = {"format": FORMAT, "moto": _moto_version(), "state": _SNAPSHOTS[service](self)}
        _StatePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(state)
        path = self._path(service)
        temporary = path.with_suffix(".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(descriptor, 0o600)  # a temporary file left by a crash keeps its old mode
        with os.fdopen(descriptor, "wb") as f:
            f.write(buffer.getbuffer())
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a power cut
        finally:
            os.close(directory)

    def wrap(self, app: WsgiApp) -> WsgiApp:
        """The server's WSGI app, snapshotting each state-changing request before it answers."""

        def persisted(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            service = _service_of(environ)
            if (
                not self._ready
                or service not in PERSISTED_SERVICES
                or not _changes_state(service, environ)
            ):
                return app(environ, start_response)
            lock = _STATE_LOCKS[service]
            # SQS's ReceiveMessage long-polls: it runs outside the lock (it takes it for its own
            # change, moto_fidelity) so senders are not held up for a second; every other
            # change runs under its service's lock together with its snapshot.
            long_poll = service == "sqs" and _action_of(environ) in ("ReceiveMessage", None)
            with contextlib.nullcontext() if long_poll else lock:
                body = _consume(app, environ, start_response)
            with lock:
                try:
                    self.save(service)
                except Exception:
                    # Not on disk → not acknowledged: the client retries (5xx), nobody relies on
                    # a write a crash would lose.
                    log.exception("could not persist the local %s state", service)
                    return _internal_error(start_response)
            return body

        return persisted


def _private_directory(path: Path) -> None:
    """`path` created if missing, readable by its owner only (0700) either way: its files are
    every conversation of the stack."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)


def _consume(app: WsgiApp, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
    # moto computes the response inside the app call, but the body iterable is drained here so
    # that everything the request changed has happened before the snapshot.
    iterable = app(environ, start_response)
    try:
        return [b"".join(iterable)]
    finally:
        close = getattr(iterable, "close", None)
        if close is not None:
            close()


def _internal_error(start_response: Callable[..., Any]) -> list[bytes]:
    body = b'{"__type":"InternalFailure","message":"the local stack could not persist this change"}'
    start_response(
        "500 Internal Server Error",
        [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))],
        sys.exc_info(),  # replaces the status the app had started (nothing was sent yet)
    )
    return [body]


def _service_of(environ: dict[str, Any]) -> str | None:
    match = _CREDENTIAL_SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    return match.group(1) if match else None


def _action_of(environ: dict[str, Any]) -> str | None:
    target = environ.get("HTTP_X_AMZ_TARGET")  # JSON protocols: "DynamoDB_20120810.PutItem"
    if target:
        return str(target).rsplit(".", 1)[-1]
    match = re.search(r"(?:^|&)Action=([A-Za-z]+)", environ.get("QUERY_STRING", ""))
    return match.group(1) if match else None


def _changes_state(service: str, environ: dict[str, Any]) -> bool:
    method = environ.get("REQUEST_METHOD", "GET")
    if service == "s3":
        return method not in ("GET", "HEAD")
    action = _action_of(environ)
    if action is None:  # e.g. a query-protocol POST with the action in the body
        return method not in ("GET", "HEAD")
    return not action.startswith(_READ_ACTIONS)


# ---- what is stored per service, and how it goes back


def _dynamodb(files: MotoStateFiles) -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[files.account_id][files.region]


def _sqs(files: MotoStateFiles) -> Any:
    from moto.sqs.models import sqs_backends

    return sqs_backends[files.account_id][files.region]


def _s3(files: MotoStateFiles) -> Any:
    from moto.s3.models import s3_backends

    return s3_backends[files.account_id]["aws"]


def _restore_dynamodb(files: MotoStateFiles, tables: dict[str, Any]) -> None:
    _dynamodb(files).tables.update(tables)


def _restore_sqs(files: MotoStateFiles, queues: dict[str, Any]) -> None:
    for queue in queues.values():
        # The poller that had received them died with the old process: release them now
        # rather than after their visibility timeout.
        queue._pending_messages = set()
        for message in queue._messages:
            message.visible_at = 0.0
    _sqs(files).queues.update(queues)


def _restore_s3(files: MotoStateFiles, buckets: dict[str, Any]) -> None:
    from moto.s3.models import s3_backends

    _s3(files).buckets.update(buckets)
    for name in buckets:
        s3_backends.bucket_accounts[name] = ("aws", files.account_id)


_SNAPSHOTS: dict[str, Callable[[MotoStateFiles], Any]] = {
    "dynamodb": lambda files: _dynamodb(files).tables,
    "sqs": lambda files: _sqs(files).queues,
    "s3": lambda files: _s3(files).buckets,
}
_RESTORERS: dict[str, Callable[[MotoStateFiles, Any], None]] = {
    "dynamodb": _restore_dynamodb,
    "sqs": _restore_sqs,
    "s3": _restore_s3,
}
# The locks under which each service's state changes (moto_fidelity takes the same ones).
_STATE_LOCKS: dict[str, Any] = {
    "dynamodb": moto_fidelity.DYNAMODB_WRITE_LOCK,
    "sqs": moto_fidelity.SQS_LOCK,
    "s3": _S3_LOCK,
}
