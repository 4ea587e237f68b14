"""The code blocks of README.md and docs/*.md are examples that work: each is extracted and run.

How a fenced block is checked, by its language:

- ```python — executed in a fresh namespace, with a fresh temporary directory as the working
  directory (also importable, so a `tools.py` written there imports). The repository root is on
  `sys.path`, so `engine`, `infra` and `examples.*` import. After it ran, every top-level function
  it defined whose name starts with `test_` is called (a coroutine function through
  `asyncio.run`), so a documented unit test is run, not only defined.
- ```yaml / ```yml / ```json — parsed. A mapping with `turns` or `tests` at the top is a
  conversation test: it must validate as `engine.conversations.spec.ConversationTest` (or its file
  form), and its `tools` and `setup` must import. A mapping with a top-level key of an agent
  document (`agent`, `guidelines`, `journeys`, `tools`, `terms`, `variables`,
  `canned_responses`, `relationships`) is an agent: it is loaded with the real loader
  (`engine.authoring.load_agent`), with the `@tool` registry named by `tools=` (below) when it
  names its tools only. Any other YAML/JSON only has to parse.
- ```bash / ```sh / ```shell / ```console — every `waypoint …` command (in `console` blocks only
  the lines starting with `$ `) must parse against the real command-line program (typer/click:
  the command exists, its options and arguments are valid); every `make TARGET` must name a target
  of the Makefile. Other commands (`sam`, `curl`, `pytest`) are not run.
- Other languages (```text, unlabelled blocks) are not checked.

A block may be annotated by an HTML comment on the line right before its fence (blank lines in
between are allowed); markdown renderers do not show it:

    <!-- snippet: fragment -->                 not a complete example: Python must still compile,
                                               YAML/JSON is not checked, shell is not checked
    <!-- snippet: group=bank -->               blocks of one file with the same group run in order,
                                               sharing one namespace and one working directory
    <!-- snippet: file=agent.yaml -->          the block is also written to this path (relative
                                               to the group's working directory) before it is
                                               checked, so a later block of the group can load it
    <!-- snippet: tools=examples.banking.tools -->   the `@tool` registry module an agent
                                               document is loaded with

Options combine: `<!-- snippet: group=bank file=agent.yaml tools=tools -->` (a `tools` module
written by an earlier block of the group imports, the working directory being importable). An
unknown option fails the test, so a misspelt annotation is not silently ignored. An unannotated
block is a complete example: if it is not meant to run, mark it `fragment`, never leave it broken.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
ANNOTATION = re.compile(r"^\s*<!--\s*snippet:(?P<options>.*?)-->\s*$")
OPTION_KEYS = {"group", "file", "tools"}
PYTHON = {"python", "py", "python3"}
DATA = {"yaml", "yml", "json"}
SHELL = {"bash", "sh", "shell", "console", "shell-session"}
AGENT_KEYS = {
    "agent",
    "guidelines",
    "journeys",
    "tools",
    "terms",
    "variables",
    "canned_responses",
    "relationships",
}


@dataclass
class Block:
    document: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    fragment: bool = False
    group: str | None = None
    file: str | None = None
    tools: str | None = None
    annotation_error: str | None = None

    @property
    def where(self) -> str:
        return f"{_shown(self.document)}:{self.line}"


def _shown(document: Path) -> str:
    return str(document.relative_to(ROOT)) if document.is_relative_to(ROOT) else str(document)


@dataclass
class Example:
    """What one test runs: a single block, or every block of a group in document order."""

    name: str
    blocks: list[Block] = field(default_factory=list)


def extract_blocks(document: Path) -> list[Block]:
    lines = document.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, info = opening["fence"], opening["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence[0] * len(fence)) and not lines[j].strip(fence[0])
        ):
            body.append(lines[j])
            j += 1
        block = Block(document, i + 1, info.split()[0].lower() if info else "", "\n".join(body))
        _annotate(block, lines, i)
        blocks.append(block)
        i = j + 1
    return blocks


def _annotate(block: Block, lines: list[str], fence_index: int) -> None:
    k = fence_index - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    found = ANNOTATION.match(lines[k]) if k >= 0 else None
    if not found:
        return
    for option in found["options"].split():
        key, has_value, value = option.partition("=")
        if option == "fragment":
            block.fragment = True
        elif key in OPTION_KEYS and has_value and value:
            setattr(block, key, value)
        else:
            block.annotation_error = (
                f"{block.where}: unknown snippet option {option!r} (use fragment, group=NAME, "
                "file=PATH, tools=MODULE)"
            )


def collect_examples(documents: list[Path] = DOCUMENTS) -> list[Example]:
    examples: list[Example] = []
    for document in documents:
        groups: dict[str, Example] = {}
        for block in extract_blocks(document):
            if block.group is None:
                examples.append(Example(block.where, [block]))
                continue
            name = f"{_shown(document)}#{block.group}"
            if name not in groups:
                groups[name] = Example(name)
                examples.append(groups[name])
            groups[name].blocks.append(block)
    return [e for e in examples if any(_checked(b) for b in e.blocks)]


def _checked(block: Block) -> bool:
    return block.language in PYTHON | DATA | SHELL or block.annotation_error is not None


EXAMPLES = collect_examples()


# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_the_documented_example_works(
    example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT))
    namespace: dict[str, Any] = {"__name__": "__snippet__"}
    try:
        for block in example.blocks:
            assert block.annotation_error is None, block.annotation_error
            if block.file is not None:
                target = tmp_path / block.file
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.code + "\n", encoding="utf-8")
            check_block(block, namespace)
    finally:
        _forget_modules_under(tmp_path)


def check_block(block: Block, namespace: dict[str, Any]) -> None:
    if block.language in PYTHON:
        run_python(block, namespace)
    elif block.language in DATA and not block.fragment:
        check_data(block)
    elif block.language in SHELL and not block.fragment:
        check_shell(block)


def run_python(block: Block, namespace: dict[str, Any]) -> None:
    code = compile(block.code, block.where, "exec", dont_inherit=True)
    if block.fragment:
        return
    defined_before = set(namespace)
    exec(code, namespace)
    for name, value in list(namespace.items()):
        if name in defined_before or not name.startswith("test_") or not callable(value):
            continue
        if inspect.iscoroutinefunction(value):
            asyncio.run(value())
        else:
            value()


def check_data(block: Block) -> None:
    value = json.loads(block.code) if block.language == "json" else yaml.safe_load(block.code)
    if not isinstance(value, dict):
        return
    if "turns" in value or "tests" in value:
        check_conversation_test(block, value)
    elif AGENT_KEYS & set(value):
        check_agent_document(block, value)


def check_agent_document(block: Block, document: dict[str, Any]) -> None:
    from engine.authoring import load_agent
    from engine.errors import InvalidAgentDefinition
    from engine.toolkit import registry_from_module

    specs = registry_from_module(block.tools).specs if block.tools else None
    try:
        load_agent(document, tools=specs)
    except InvalidAgentDefinition as exc:
        pytest.fail(
            f"{block.where}: the agent document does not load:\n  " + "\n  ".join(exc.problems)
        )


def check_conversation_test(block: Block, document: dict[str, Any]) -> None:
    from engine.authoring import load_agent
    from engine.toolkit import registry_from_module
    from infra.conversation_tests import load_file

    path = Path(block.file or "snippet.conv.yaml").resolve()
    if block.file is None:
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
    for test in load_file(path):
        specs = registry_from_module(test.tools).specs if test.tools else None
        if test.setup:
            module, _, function = test.setup.partition(":")
            assert callable(getattr(__import__(module, fromlist=[function]), function))
        if test.agent.exists():  # written by an earlier block of the group
            load_agent(test.agent, tools=specs)


def check_shell(block: Block) -> None:
    for words in shell_commands(block):
        # `VAR=value waypoint …` and `.venv/bin/waypoint …` are waypoint commands too
        command = list(itertools.dropwhile(lambda w: ASSIGNMENT.match(w) is not None, words))
        if not command:
            continue
        command[0] = command[0].rsplit("/", 1)[-1]
        if command[0] == "waypoint":
            parse_waypoint_command(block, command[1:])
        elif command[0] == "make":
            for target in (a for a in command[1:] if not a.startswith("-") and "=" not in a):
                assert target in makefile_targets(), (
                    f"{block.where}: `make {target}` is not a target of the Makefile"
                )


def shell_commands(block: Block) -> Iterator[list[str]]:
    """Each simple command of the block, as words (prompts, comments, continuations handled)."""
    lines = block.code.splitlines()
    if block.language in {"console", "shell-session"}:
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    text = re.sub(r"\\\n", " ", "\n".join(lines))
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for word in lexer:
            if word in {"&&", "||", ";", "|", "&"}:
                if words:
                    yield words
                words = []
            else:
                words.append(word)
        if words:
            yield words


def parse_waypoint_command(block: Block, args: list[str]) -> None:
    """Parse (never run) `waypoint ARGS` with the real program's parser. Typer may carry its own
    copy of click, so its exceptions are recognised by what they are, not by import."""
    from waypoint.cli import app

    program = typer.main.get_command(app)
    shown = " ".join(["waypoint", *args])
    if not args or args[0].startswith("-"):
        return  # `waypoint`, `waypoint --help`
    try:
        with program.make_context("waypoint", [args[0]]) as context:
            command = program.get_command(context, args[0])
            assert command is not None, f"{block.where}: `{shown}`: no command {args[0]!r}"
            command.make_context(args[0], list(args[1:]), parent=context)
    except Exception as exc:
        if type(exc).__name__ == "Exit":
            return  # --help
        if hasattr(exc, "format_message"):  # click's UsageError / BadParameter
            pytest.fail(f"{block.where}: `{shown}` does not parse: {exc.format_message()}")
        raise


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {m[1] for m in re.finditer(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M)}


def _forget_modules_under(directory: Path) -> None:
    """A module a snippet wrote (`tools.py`) must not leak into the next snippet's imports."""
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None) or ""
        if origin.startswith(str(directory)):
            del sys.modules[name]


# ------------------------------------------------------------------------------------------------
# The checker itself: a broken example must fail, not pass unnoticed.


def _block(language: str, code: str, **options: Any) -> Block:
    return Block(ROOT / "README.md", 1, language, code, **options)


def test_an_unmarked_example_that_raises_fails_and_a_fragment_is_only_compiled() -> None:
    with pytest.raises(NameError):
        check_block(_block("python", "undefined_name + 1"), {})
    check_block(_block("python", "undefined_name + 1", fragment=True), {})
    with pytest.raises(SyntaxError):
        check_block(_block("python", "def broken(:", fragment=True), {})


def test_a_documented_test_function_is_called() -> None:
    with pytest.raises(AssertionError, match="called"):
        check_block(_block("python", "def test_x():\n    raise AssertionError('called')"), {})


def test_an_agent_document_with_a_dangling_reference_fails() -> None:
    document = "agent: {id: a, name: A}\nguidelines:\n  - {id: g, condition: c, entails: [nope]}"
    with pytest.raises(pytest.fail.Exception, match="nope"):
        check_block(_block("yaml", document), {})


def test_a_misspelt_command_option_or_make_target_fails() -> None:
    for line in ("waypoint chat --trcae", "waypoint chatt", "waypoint demo --llm gpt"):
        with pytest.raises((pytest.fail.Exception, AssertionError)):
            check_block(_block("bash", line), {})
    with pytest.raises(AssertionError, match="not a target"):
        check_block(_block("bash", "make tset"), {})
    check_block(_block("bash", "waypoint validate a.yaml --tools t && make test  # ok"), {})
    check_block(_block("console", "$ waypoint test --repeat 5\nthis line is output"), {})
    with pytest.raises(pytest.fail.Exception):
        check_block(_block("bash", "WAYPOINT_LLM_PROVIDER=offline .venv/bin/waypoint chat -x"), {})


def test_annotations_group_blocks_and_a_misspelt_option_is_an_error(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- snippet: group=g file=a.py -->\n```python\nx = 1\n```\n\n"
        "<!-- snippet: group=g -->\n\n```python\nassert x == 1\n```\n\n"
        "<!-- snippet: fragmnet -->\n```python\npass\n```\n",
        encoding="utf-8",
    )

    grouped, misspelt = collect_examples([page])

    assert [(b.file, b.code) for b in grouped.blocks] == [
        ("a.py", "x = 1"),
        (None, "assert x == 1"),
    ]
    assert misspelt.blocks[0].annotation_error is not None
    assert "fragmnet" in misspelt.blocks[0].annotation_error
