"""A newcomer's project, as `waypoint init` lays it out (agent.yaml, tools.py, tests/), driven by
real `waypoint` processes: `validate` finds the agent and its tools as `test` does, and a syntax
mistake in a file the CLI reads is told with its file, line, column, line and likely cause —
once, however many tests use the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.banking import AGENT_PATH as BANK_YAML
from tests.cli.chat_kit import run_cli
from waypoint.scaffold import TEMPLATE_DIR

PROJECT_FILES = ("agent.yaml", "tools.py", "tests/shop.conv.yaml")


def scaffolded(folder: Path, name: str = "shop") -> Path:
    """The files `waypoint init NAME` writes that the local commands read (no wheel, no SAM)."""
    for relative in PROJECT_FILES:
        text = (TEMPLATE_DIR / relative).read_text(encoding="utf-8")
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            text.replace("__PROJECT__", name).replace("__AGENT_ID__", name), encoding="utf-8"
        )
    return folder


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return scaffolded(tmp_path / "shop")


def misindent_the_stock_guideline(project: Path) -> int:
    """Indent one key of the `stock` guideline a space short; its line number."""
    agent = project / "agent.yaml"
    lines = agent.read_text(encoding="utf-8").split("\n")
    number = next(i for i, ln in enumerate(lines) if "condition: The customer asks if" in ln)
    lines[number] = lines[number][1:]
    agent.write_text("\n".join(lines), encoding="utf-8")
    return number + 1


def test_validate_without_arguments_checks_the_projects_agent_with_its_tools(
    project: Path,
) -> None:
    done = run_cli("validate", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ agent.yaml: agent 'shop'" in done.stdout
    assert "2 tools (@tool registry: tools)" in done.stdout


def test_validate_of_the_agent_file_finds_the_tools_py_beside_it(project: Path) -> None:
    done = run_cli("validate", "agent.yaml", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "named only" not in done.stdout and "(@tool registry: tools)" in done.stdout
    from_above = run_cli("validate", "shop/agent.yaml", cwd=project.parent)
    assert from_above.returncode == 0, from_above.stdout + from_above.stderr


def test_a_tools_py_without_a_registry_is_not_taken_for_the_tools(project: Path) -> None:
    (project / "tools.py").write_text("def helper() -> int:\n    return 1\n", encoding="utf-8")
    done = run_cli("validate", "agent.yaml", cwd=project)
    assert done.returncode == 1 and "named only" in done.stdout  # and --tools is the way out


def test_validate_without_arguments_takes_the_agents_the_conversation_tests_name(
    tmp_path: Path,
) -> None:
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "bank.conv.yaml").write_text(
        f"agent: {BANK_YAML}\ntools: examples.banking.tools\n"
        "turns:\n  - customer: Hi\n    expect: {reply_contains: hello}\n",
        encoding="utf-8",
    )
    done = run_cli("validate", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "agent 'bank'" in done.stdout and "(@tool registry: examples.banking.tools)" in (
        done.stdout
    )


def test_validate_without_arguments_outside_a_project_says_what_to_give(tmp_path: Path) -> None:
    done = run_cli("validate", cwd=tmp_path)
    assert done.returncode == 2
    assert "no agent here" in done.stdout
    assert "waypoint validate path/to/agent.yaml" in done.stdout


def test_an_indentation_mistake_is_told_with_file_line_column_line_and_hint(
    project: Path,
) -> None:
    line = misindent_the_stock_guideline(project)
    done = run_cli("validate", cwd=project)
    assert done.returncode == 1
    out = done.stdout
    assert f"agent.yaml:{line}:4: not valid YAML: this line does not line up" in out
    assert f"{line} |    condition: The customer asks if something is in stock" in out
    assert f"hint: line {line} starts in column 4" in out
    assert "<unicode string>" not in out and "Traceback" not in out + done.stderr


def test_waypoint_test_tells_an_invalid_agent_once_not_once_per_test(project: Path) -> None:
    line = misindent_the_stock_guideline(project)
    done = run_cli("test", cwd=project)
    assert done.returncode == 1
    out = done.stdout
    assert out.count(f"agent.yaml:{line}:4: not valid YAML") == 1, out
    assert out.count("not run: agent agent.yaml is invalid (above)") == 2
    assert "0 passed, 3 failed" in out


def test_a_conversation_test_with_a_tab_is_told_where(project: Path) -> None:
    tests = project / "tests" / "shop.conv.yaml"
    tests.write_text(
        tests.read_text(encoding="utf-8").replace("    turns:", "\tturns:", 1), encoding="utf-8"
    )
    done = run_cli("test", cwd=project)
    assert done.returncode == 2
    assert "tests/shop.conv.yaml:" in done.stdout and "not valid YAML: a tab character" in (
        done.stdout
    )
    assert "→turns:" in done.stdout and "replace the tab with spaces" in done.stdout
