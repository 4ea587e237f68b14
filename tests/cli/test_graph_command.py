"""`waypoint graph` draws an agent file, a Python agent or one journey, as Mermaid or SVG, and a
served stack draws the same over HTTP (waypoint/graph_command.py, functions/graph_api.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from examples.banking import TOOLS_MODULE, bank
from examples.banking import load as load_bank
from infra.graphs import agent_mermaid, agent_svg, journey_mermaid
from infra.runtime import reset_runtime
from tests.cli.chat_kit import ROOT, run_cli
from waypoint.local_server import LocalServer

BANK_YAML = ROOT / "examples" / "banking" / "agent.yaml"
PIZZA_YAML = ROOT / "examples" / "pizza" / "agent.yaml"
KEY = "graph-test-key-0123456789"


def test_graph_prints_every_journey_as_mermaid(tmp_path: Path) -> None:
    done = run_cli("graph", str(BANK_YAML), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == agent_mermaid(load_bank())


def test_graph_draws_one_journey(tmp_path: Path) -> None:
    done = run_cli("graph", str(BANK_YAML), "--journey", "transfer", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == journey_mermaid(load_bank(), "transfer")


def test_graph_writes_an_svg_file_chosen_by_its_suffix(tmp_path: Path) -> None:
    done = run_cli("graph", str(BANK_YAML), "-o", "journeys.svg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "wrote journeys.svg" in done.stdout
    written = (tmp_path / "journeys.svg").read_text(encoding="utf-8")
    assert written == agent_svg(load_bank())
    ET.fromstring(written)  # a well-formed document


def test_graph_format_option_wins_over_the_suffix(tmp_path: Path) -> None:
    done = run_cli("graph", str(BANK_YAML), "--format", "mermaid", "-o", "x.svg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "x.svg").read_text(encoding="utf-8").startswith("---\ntitle:")


def test_graph_of_a_python_agent_module(tmp_path: Path) -> None:
    (tmp_path / "my_bank.py").write_text(
        "from examples.banking import load\n\nagent = load()\n", encoding="utf-8"
    )
    done = run_cli("graph", "my_bank.py", "--tools", TOOLS_MODULE, "--format", "svg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == agent_svg(load_bank())


def test_graph_of_a_document_naming_its_tools_only_needs_the_tools_module(tmp_path: Path) -> None:
    refused = run_cli("graph", str(PIZZA_YAML), cwd=tmp_path)
    assert refused.returncode == 1 and "named only" in refused.stdout
    done = run_cli("graph", str(PIZZA_YAML), "--tools", "examples.pizza.tools", cwd=tmp_path)
    assert done.returncode == 0 and 'subgraph j2["Pizza order (order)"]' in done.stdout


def test_an_unknown_journey_is_one_line_naming_the_known_ones(tmp_path: Path) -> None:
    done = run_cli("graph", str(BANK_YAML), "--journey", "loans", cwd=tmp_path)
    assert done.returncode == 2
    assert "agent 'bank' has no journey 'loans'; its journeys: stock, authenticate" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_an_output_folder_that_does_not_exist_is_told(tmp_path: Path) -> None:
    done = run_cli("graph", str(BANK_YAML), "-o", "missing/dir/x.svg", cwd=tmp_path)
    assert done.returncode == 2 and "does not exist" in done.stdout
    assert not (tmp_path / "missing").exists()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[LocalServer]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "CRITICAL")
    bank.reset_bank()
    with LocalServer(load_bank(), tools_module=TOOLS_MODULE, management_api_key=KEY) as server:
        yield server
    reset_runtime()


def test_a_served_stack_draws_the_agent_over_http(served: LocalServer) -> None:
    api = f"{served.base_url}/api/agents/bank/graph"
    svg = httpx.get(
        api, headers={"X-Api-Key": KEY}, params={"journey": "transfer", "current": "check"}
    )
    assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
    assert 'data-step="check">' in svg.text and "wp-current" in svg.text
    mermaid = httpx.get(api, headers={"X-Api-Key": KEY}, params={"format": "mermaid"})
    assert mermaid.text == agent_mermaid(served.agent)
    missing = httpx.get(api, headers={"X-Api-Key": KEY}, params={"journey": "loans"})
    assert missing.status_code == 404 and "no journey 'loans'" in missing.json()["error"]
    assert httpx.get(api).status_code == 401
