"""No message names a command that does not exist: every `waypoint COMMAND [--flag …]` the
program can print — its messages (in the engine, the adapters, the functions and the CLI), its
commands' help, the files `waypoint init` writes — and every one the README and docs/ show names
a command of the real parser, with flags that command (or `waypoint` itself) takes."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

from waypoint.cli import app

ROOT = Path(__file__).resolve().parents[2]
MESSAGE_SOURCES = ("engine", "infra", "functions", "waypoint")
HELP_SOURCES = ("waypoint/cli",)  # the commands' docstrings are their --help text
DOCUMENTS = ("README.md", "docs", "waypoint/scaffold_template")
# "waypoint" followed by a command and what may follow it on the same command line; a hint ends
# at a quote, a bracket closing a parenthesis, a sentence's semicolon or a pipe.
HINT = re.compile(r"\bwaypoint((?:\s+--[a-z][\w-]*)*)\s+([a-z][\w-]*)([^`\"'()\n;|]*)")
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")
MARKUP = re.compile(r"\[/?[a-z ]+\]")  # rich markup: [bold]waypoint validate[/bold]
# Phrases where "waypoint" is the program's name, not a command line.
NOT_COMMAND_LINES = {"waypoint conversation tests"}  # the JUnit suite's name


def _strings(path: Path, *, with_docstrings: bool) -> Iterator[tuple[int, str]]:
    """The string literals of a module (f-strings with `{}` for their fields), by line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()  # the parts of f-strings, and docstrings unless asked for
    for node in ast.walk(tree):  # breadth first: a parent is seen before its children
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(part) for part in node.values)
            yield (
                node.lineno,
                "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values),
            )
        elif isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if not with_docstrings and isinstance(first, ast.Expr):
                skipped.add(id(first.value))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skipped
        ):
            yield node.lineno, node.value


def _texts() -> Iterator[tuple[str, str]]:
    """(where, text) for every message, help text and document a user reads."""
    for folder in MESSAGE_SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            with_docstrings = any(path.is_relative_to(ROOT / h) for h in HELP_SOURCES)
            for line, text in _strings(path, with_docstrings=with_docstrings):
                yield f"{path.relative_to(ROOT)}:{line}", text
    for name in DOCUMENTS:
        target = ROOT / name
        for path in sorted(target.rglob("*") if target.is_dir() else [target]):
            if path.is_file() and path.suffix in ("", ".md", ".yaml", ".py", ".txt"):
                for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    yield f"{path.relative_to(ROOT)}:{line}", text


def _hints() -> list[tuple[str, str, list[str], str]]:
    """(where, command, flags, the hint as written) for every command line found."""
    found = []
    for where, text in _texts():
        for match in HINT.finditer(MARKUP.sub("", text)):
            if any(match.group(0).startswith(phrase) for phrase in NOT_COMMAND_LINES):
                continue
            flags = FLAG.findall(match.group(1)) + FLAG.findall(match.group(3))
            found.append((where, match.group(2), flags, match.group(0).strip()))
    return found


PROGRAM = typer.main.get_command(app)
assert isinstance(PROGRAM, TyperGroup)  # typer vendors a click of its own
GLOBAL_FLAGS = {opt for p in PROGRAM.params for opt in p.opts}


@pytest.fixture(scope="module")
def hints() -> list[tuple[str, str, list[str], str]]:
    """Read when a test asks (one worker, once), not when the suite is collected (every worker)."""
    return _hints()


def test_the_sources_are_walked(hints: list[tuple[str, str, list[str], str]]) -> None:
    """The walk itself: it finds the hints known to be there (a regex gone blind passes nothing)."""
    written = {hint for _, _, _, hint in hints}
    assert "waypoint validate --tools MODULE" in written  # the engine's tool declarations
    assert any(h.startswith("waypoint publish") for h in written)  # `serve`'s closing lines
    assert len(hints) > 50


def test_every_hint_names_a_real_command_and_its_flags(
    hints: list[tuple[str, str, list[str], str]],
) -> None:
    """Every hint found, each wrong one named with where it is written."""
    wrong = []
    for where, command, flags, hint in hints:
        if command not in PROGRAM.commands:
            wrong.append(
                f"{where}: `{hint}` names `waypoint {command}`, which does not exist; "
                f"the commands: {', '.join(sorted(PROGRAM.commands))}"
            )
            continue
        taken = GLOBAL_FLAGS | {opt for p in PROGRAM.commands[command].params for opt in p.opts}
        unknown = [flag for flag in flags if flag not in taken]
        if unknown:
            wrong.append(f"{where}: `{hint}`: `waypoint {command}` takes no {', '.join(unknown)}")
    assert not wrong, "\n".join(wrong)


def test_publish_without_the_environment_points_at_commands_that_exist(tmp_path: Path) -> None:
    from examples.banking import AGENT_PATH
    from tests.cli.chat_kit import run_cli

    done = run_cli("publish", str(AGENT_PATH), cwd=tmp_path, env={"WAYPOINT_TABLE": ""})
    assert done.returncode == 2
    assert "WAYPOINT_TABLE is not set" in done.stdout
    assert "start `waypoint serve` and export the lines it prints" in done.stdout
    assert "waypoint local" not in done.stdout
