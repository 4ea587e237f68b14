"""Every reference in README.md and docs/*.md leads somewhere.

- A relative link (`[text](docs/deploy.md#publishing-changes)`, an image) names a file or folder
  that exists; when it names a heading of a Markdown page (`#anchor`), the page has that heading,
  by GitHub's rule for anchors (lower case, punctuation dropped, spaces as hyphens, `-1`, `-2` …
  for repeats). Links in code blocks and inline code are not links.
- A test cited in prose (`test_a_yes_runs_only_the_call_it_was_asked_for`) is a test function
  defined under tests/ — also a method of a contract class. Cited with its file
  (`tests/engine/test_x.py::test_y`, or `test_x.py::test_y`), it is defined in that file. A name
  cut short with `…` (`test_a_throttled_inbox_claim_…`) must begin at least one test's name.
  Test functions a page defines in its own code blocks are examples, not citations.
- A test file cited by path (`tests/cli/test_scaffold.py`) exists.

A guarantee the docs state names the tests that prove it, so a renamed test must not leave the
docs citing nothing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(?P<text>.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:
CITED_TEST = re.compile(
    r"(?<![\w/.])(?:(?P<file>(?:[\w.-]+/)*test_\w+\.py)::)?(?P<name>test_\w+)\b(?!\.py)"
)
CITED_FILE = re.compile(r"(?<![\w/.-])(?P<path>tests/(?:[\w.-]+/)*[\w.-]+\.py)\b")


@dataclass(frozen=True)
class Problem:
    document: Path
    line: int
    what: str

    def __str__(self) -> str:
        doc = self.document
        shown = doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc
        return f"{shown}:{self.line}: {self.what}"


def prose_lines(document: Path) -> Iterator[tuple[int, str]]:
    """The document's lines outside fenced code blocks, 1-based."""
    fence: str | None = None
    for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
        opening = FENCE.match(line)
        if opening and fence is None:
            fence = opening[1]
        elif opening and line.strip().startswith(fence or "") and not line.strip(fence[0]):
            fence = None
        elif fence is None:
            yield number, line


def heading_anchor(text: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@cache
def heading_anchors(page: Path) -> frozenset[str]:
    anchors: set[str] = set()
    for _, line in prose_lines(page):
        heading = HEADING.match(line)
        if not heading:
            continue
        anchor = base = heading_anchor(heading["text"])
        repeat = 0
        while anchor in anchors:
            repeat += 1
            anchor = f"{base}-{repeat}"
        anchors.add(anchor)
    return frozenset(anchors)


def link_problems(document: Path) -> list[Problem]:
    problems = []
    for number, line in prose_lines(document):
        for link in LINK.finditer(INLINE_CODE.sub("", line)):
            target = link["target"]
            if EXTERNAL.match(target):
                continue
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            if not linked.exists():
                problems.append(Problem(document, number, f"`{target}`: no file {path!r}"))
            elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
                problems.append(
                    Problem(document, number, f"`{target}`: {linked.name} has no heading #{anchor}")
                )
    return problems


@cache
def defined_tests(tests: Path = ROOT / "tests") -> dict[Path, frozenset[str]]:
    """The test functions (and test methods) each file under `tests` defines."""
    defined = {}
    for source in sorted(tests.rglob("*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"), str(source))
        defined[source] = frozenset(
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test_")
        )
    return defined


def citation_problems(document: Path, tests: Path = ROOT / "tests") -> list[Problem]:
    defined = defined_tests(tests)
    every_name = frozenset().union(*defined.values())
    problems = []
    for number, line in prose_lines(document):
        for cited in CITED_TEST.finditer(line):
            name, file = cited["name"], cited["file"]
            prefix = line[cited.end() : cited.end() + 1] == "…"
            if file is not None:
                holders = [p for p in defined if p.as_posix().endswith("/" + file.lstrip("/"))]
                names = frozenset().union(*(defined[p] for p in holders))
                where = f"in {file}" if holders else f"(no file {file} under tests/)"
            else:
                names, where = every_name, "under tests/"
            found = any(n.startswith(name) for n in names) if prefix else name in names
            if not found:
                shown = name + ("…" if prefix else "")
                problems.append(Problem(document, number, f"{shown}: no such test {where}"))
        for cited in CITED_FILE.finditer(line):
            if not (tests.parent / cited["path"]).exists():
                problems.append(Problem(document, number, f"{cited['path']}: no such file"))
    return problems


# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("document", DOCUMENTS, ids=[d.name for d in DOCUMENTS])
def test_every_relative_link_points_at_an_existing_file_and_heading(document: Path) -> None:
    problems = link_problems(document)
    assert not problems, "broken links:\n  " + "\n  ".join(map(str, problems))


@pytest.mark.parametrize("document", DOCUMENTS, ids=[d.name for d in DOCUMENTS])
def test_every_test_the_docs_cite_exists(document: Path) -> None:
    problems = citation_problems(document)
    assert not problems, "stale test citations:\n  " + "\n  ".join(map(str, problems))


# ------------------------------------------------------------------------------------------------
# The checkers themselves: a broken reference must fail, not pass unnoticed.


def test_a_missing_file_a_missing_heading_and_a_repeated_heading_are_told_apart(
    tmp_path: Path,
) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Publishing changes\n\n## Step\n\n## Step\n")
    page = tmp_path / "page.md"
    page.write_text(
        "See [it](other.md#publishing-changes), [the second](other.md#step-1) and [top](#a-page).\n"
        "# A page\n"
        "[gone](gone.md) · [no heading](other.md#publishing) · ![image](img/none.svg)\n"
        "`[in code](nowhere.md)` and [a site](https://example.com/x.md)\n"
        "```\n[in a block](nowhere.md)\n```\n",
        encoding="utf-8",
    )

    problems = [(p.line, p.what) for p in link_problems(page)]

    assert problems == [
        (3, "`gone.md`: no file 'gone.md'"),
        (3, "`other.md#publishing`: other.md has no heading #publishing"),
        (3, "`img/none.svg`: no file 'img/none.svg'"),
    ]


def test_a_heading_anchor_follows_githubs_rule() -> None:
    assert heading_anchor("`waypoint serve`'s AWS endpoint") == "waypoint-serves-aws-endpoint"
    assert heading_anchor("Paraphrase suite (`python -m bench paraphrase`)") == (
        "paraphrase-suite-python--m-bench-paraphrase"
    )
    assert heading_anchor("Where a value may come from: provenance") == (
        "where-a-value-may-come-from-provenance"
    )


def test_a_renamed_test_a_test_in_another_file_and_a_wrong_prefix_are_stale(
    tmp_path: Path,
) -> None:
    tests = tmp_path / "tests"
    (tests / "engine").mkdir(parents=True)
    (tests / "engine" / "test_a.py").write_text(
        "def test_kept() -> None: ...\n\nclass Contract:\n    async def test_method(self): ...\n"
    )
    (tests / "engine" / "test_b.py").write_text("def test_elsewhere() -> None: ...\n")
    page = tmp_path / "page.md"
    page.write_text(
        "`test_kept`, `test_method`, `tests/engine/test_a.py::test_kept`, `test_ke…`,"
        " tests/engine/test_b.py\n"
        "`test_renamed`, `test_a.py::test_elsewhere`, `test_nothing_…`, tests/engine/test_c.py\n"
        "```python\ndef test_an_example_on_the_page(): ...\n```\n",
        encoding="utf-8",
    )

    problems = [(p.line, p.what) for p in citation_problems(page, tests)]

    assert problems == [
        (2, "test_renamed: no such test under tests/"),
        (2, "test_elsewhere: no such test in test_a.py"),
        (2, "test_nothing_…: no such test under tests/"),
        (2, "tests/engine/test_c.py: no such file"),
    ]
