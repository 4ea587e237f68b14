"""`waypoint serve` as a user meets it a second time: a port already taken is one line naming it
and `--port`, before anything starts or is written; the `export` lines it prints are one line
each at any width (a wrapped line pastes as two commands); and after a restart on the same data
the local AWS endpoint and its credentials are the same, so exports pasted earlier still work
(a new port only when the old one is taken, said at start)."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.banking import load as load_bank
from tests.cli.chat_kit import run_cli, serve_banner
from waypoint.local_server import LocalServer, PortInUse

pytestmark = pytest.mark.long(30)  # about that many seconds: scheduled first (tests/conftest.py)

_EXPORT = re.compile(r"^  export (\w+)=(\S+)$")
EXPORTED = {
    "WAYPOINT_AWS_ENDPOINT_URL", "WAYPOINT_TABLE", "WAYPOINT_BUCKET", "WAYPOINT_QUEUE_URL",
    "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
}  # fmt: skip


@pytest.fixture()
def taken_port() -> Iterator[int]:
    """A port another process listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def exports(banner: str) -> dict[str, str]:
    return dict(m.groups() for line in banner.splitlines() if (m := _EXPORT.match(line)))


def test_a_busy_port_is_one_line_naming_it_and_the_port_option_with_nothing_left_behind(
    tmp_path: Path, taken_port: int
) -> None:
    done = run_cli("serve", "--port", str(taken_port), cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    told = [line for line in done.stdout.splitlines() if line.strip()]
    assert told == [
        f"✗ port {taken_port} on 127.0.0.1 is in use (another waypoint serve?): stop it, or "
        "choose another port with --port N (--port 0 takes any free one)"
    ], done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / ".waypoint").exists()  # no data directory, no credentials file


def test_a_busy_port_fails_before_the_local_stack_starts(taken_port: int) -> None:
    server = LocalServer(load_bank(), port=taken_port)
    with pytest.raises(PortInUse, match=f"port {taken_port} on 127.0.0.1 is in use"):
        server.start()
    assert server.stack is None  # moto never started, nothing published
    server.stop()


def test_the_export_lines_stay_one_line_each_in_a_narrow_pipe(tmp_path: Path) -> None:
    banner = serve_banner("--port", "0", "--ephemeral", cwd=tmp_path, env_extra={"COLUMNS": "40"})
    found = exports(banner)
    assert set(found) == EXPORTED, banner
    longest = max(len(f"  export {name}={value}") for name, value in found.items())
    assert longest > 40 and found["WAYPOINT_QUEUE_URL"].endswith(".fifo")


def test_the_local_aws_endpoint_and_its_credentials_survive_a_restart(tmp_path: Path) -> None:
    first = exports(serve_banner("--port", "0", cwd=tmp_path))
    again = exports(serve_banner("--port", "0", cwd=tmp_path))
    assert set(first) == EXPORTED
    assert again == first  # the lines another shell pasted still reach the restarted stack


def test_the_endpoint_moves_only_when_its_port_is_taken_and_says_so(tmp_path: Path) -> None:
    first = exports(serve_banner("--port", "0", cwd=tmp_path))
    endpoint = first["WAYPOINT_AWS_ENDPOINT_URL"]
    old_port = int(endpoint.rsplit(":", 1)[1])
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", old_port))
        other.listen()
        banner = serve_banner("--port", "0", cwd=tmp_path)
    moved = exports(banner)
    assert f"the local AWS endpoint moved: port {old_port} is in use" in banner
    assert moved["WAYPOINT_AWS_ENDPOINT_URL"] != endpoint
    assert moved["AWS_ACCESS_KEY_ID"] == first["AWS_ACCESS_KEY_ID"]  # the credentials stay
