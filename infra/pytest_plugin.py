"""The pytest plugin: every `*.conv.yaml` file pytest walks past becomes a test per conversation.

Installed with Waypoint through the `pytest11` entry point named `waypoint`, so `pytest` in your
project runs your conversation tests beside your unit tests; `-p no:waypoint` turns it off.
`--conv-repeat N` runs each conversation N times and fails it unless all N pass (pass^N).
Only pytest is imported at startup; the engine loads when a conversation file is collected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TEST_SUFFIX = ".conv.yaml"  # the same suffix as infra.conversation_tests.TEST_SUFFIX


class JudgedExpectationSkipped(UserWarning):
    """A judged expectation did not run: the offline model cannot judge."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("waypoint", "Waypoint conversation tests")
    group.addoption(
        "--conv-repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each conversation test N times; it passes only when all N runs pass (pass^N)",
    )


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.name.endswith(TEST_SUFFIX):
        return ConversationFile.from_parent(parent, path=file_path)
    return None


class ConversationFile(pytest.File):
    """One conversation test file; its tests are the items."""

    def collect(self) -> Iterator[pytest.Item]:
        from infra.conversation_tests import InvalidConversationTest, load_file

        try:
            tests = load_file(self.path)
        except InvalidConversationTest as exc:
            raise self.CollectError(str(exc)) from None  # shown as one line, no traceback
        for test in tests:
            yield ConversationItem.from_parent(self, name=test.name, test=test)


class ConversationItem(pytest.Item):
    """One scripted conversation, run against a fresh engine."""

    def __init__(self, *, test: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.test = test

    def runtest(self) -> None:
        import warnings

        from infra.conversation_tests import (
            JUDGED_SKIPPED_NOTE,
            ConversationTestFailed,
            run_tests,
        )

        repeat = max(1, int(self.config.getoption("conv_repeat")))
        [outcome] = run_tests([self.test], repeat=repeat)
        for note in outcome.runs[0].skipped_judgements:
            # attributed to the test file, not to this plugin's source line
            warnings.warn_explicit(
                f"{note} ({JUDGED_SKIPPED_NOTE})", JudgedExpectationSkipped, str(self.path), 1
            )
        failed = outcome.first_failure()
        if failed is not None:
            runs = f"{outcome.passes}/{repeat} runs passed\n" if repeat > 1 else ""
            raise ConversationTestFailed(f"{runs}{failed.describe_failure()}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        from infra.conversation_tests import ConversationTestFailed

        if isinstance(excinfo.value, ConversationTestFailed):
            return f"{self.name}\n{excinfo.value}"
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"conversation: {self.name}"
