"""The new user's path, end to end, as real processes in a folder outside this repository:

`waypoint init demo-shop` → `validate` → `waypoint test` (offline) → `chat` scripted through stdin
→ `serve` + `publish` (an edited agent, to the served stack) + one signed generic-webhook message
answered by the published version. The `sam build` of such a project is in test_scaffold.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from infra.channels.signing import generic_headers
from tests.reliability.served_process import FrontEnd, ServedProcess

pytestmark = pytest.mark.long(60)  # about that many seconds: scheduled first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
_EXPORT = re.compile(r"^\s*export (\w+)=(\S+)\s*$")


def _env(cache: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER")
        and not k.startswith("WAYPOINT_")
    }
    env.update({"PYTHONPATH": str(REPO), "WAYPOINT_CACHE_DIR": str(cache), "COLUMNS": "200"})
    return env


def waypoint(
    *args: str, cwd: Path, env: dict[str, str], stdin: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """`waypoint ARGS` as a user runs it (this checkout's code, in its own process)."""
    return subprocess.run(
        [sys.executable, "-m", "waypoint.cli", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    home = tmp_path / "work"
    home.mkdir()
    assert REPO not in home.parents  # outside the repository, as a user's project is
    return home


def test_a_new_user_scaffolds_tests_chats_serves_and_publishes_an_agent(
    home: Path, tmp_path: Path
) -> None:
    env = _env(tmp_path / "cache")

    init = waypoint("init", "demo-shop", cwd=home, env=env)
    assert init.returncode == 0, init.stdout + init.stderr
    project = home / "demo-shop"
    assert (project / "agent.yaml").is_file() and (project / "tools.py").is_file()
    assert list((project / "runtime" / "wheels").glob("waypoint-*.whl"))

    validate = waypoint("validate", "agent.yaml", "--tools", "tools", cwd=project, env=env)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert "agent 'demo-shop'" in validate.stdout and "2 tools" in validate.stdout

    tested = waypoint("test", cwd=project, env=env)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "offline" in tested.stdout and "3 passed, 0 failed" in tested.stdout

    chat = waypoint(
        "chat", "agent.yaml", "--tools", "tools",
        cwd=project, env=env, stdin="Hi\nIs the hoodie in stock?\n",
    )  # fmt: skip
    assert chat.returncode == 0, chat.stdout + chat.stderr
    assert "agent › Hi! I can check whether a product is in stock" in chat.stdout
    assert "The number in stock for hoodie is 0" in chat.stdout

    # The user edits the agent while it is served, then publishes the edit to the running stack:
    # the signed message that follows is answered by the published version, not the served file.
    front_end = FrontEnd()
    served = ServedProcess(
        ["agent.yaml", "--tools", "tools", "--ephemeral"], cwd=project, cache_dir=tmp_path / "c2"
    )
    try:
        exports = _exports_printed_by(served)
        agent = project / "agent.yaml"
        agent.write_text(
            agent.read_text().replace("What would you like?", "How can I help today?"),
            encoding="utf-8",
        )
        published = waypoint(
            "publish", "agent.yaml", "--tools", "tools", cwd=project, env={**env, **exports}
        )
        assert published.returncode == 0, published.stdout + published.stderr
        assert "published agent 'demo-shop'" in published.stdout

        status = served.send("c-1", "evt-1", "Hi", front_end.url)
        assert status == 200
        front_end.wait_for(["evt-1"], timeout=60)
        (reply,) = front_end.answers_to("evt-1")
        assert "How can I help today?" in reply["text"], reply
        # A message signed with another secret is refused, and never answered.
        assert _post_signed_with("not-the-secret", served.base_url, front_end.url) == 401
        time.sleep(1)
        assert front_end.answers_to("evt-forged") == []
    finally:
        served.stop()
        front_end.close()


def _post_signed_with(secret: str, base_url: str, callback_url: str) -> int:
    body = json.dumps(
        {
            "event_id": "evt-forged",
            "conversation_id": "c-2",
            "customer_id": "mallory",
            "text": "Hi",
            "callback_url": callback_url,
        }
    ).encode()
    headers = generic_headers(secret, body, int(time.time()))
    return httpx.post(f"{base_url}/webhooks/generic", content=body, headers=headers).status_code


def _exports_printed_by(served: ServedProcess, timeout: float = 30) -> dict[str, str]:
    """The `export NAME=value` lines `waypoint serve` prints for clients in other shells."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = "".join(served.output)
        if "Ctrl-C to stop" in text:
            found = dict(m.groups() for ln in text.splitlines() if (m := _EXPORT.match(ln)))
            assert {"WAYPOINT_TABLE", "WAYPOINT_BUCKET", "WAYPOINT_AWS_ENDPOINT_URL"} <= set(found)
            return found
        time.sleep(0.1)
    raise TimeoutError(f"no client settings printed:\n{''.join(served.output)}")
