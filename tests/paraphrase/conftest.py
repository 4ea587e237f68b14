"""The paraphrase suite's shared pieces: the offline models every conversation runs on, and the
pass rate per agent printed at the end of the pytest run (what `make test` reports)."""

from __future__ import annotations

import pytest

from bench.paraphrase import Conversation, console_table, pass_rates
from infra.conversation_tests import Models
from infra.llm.factory import build_embedder, build_llm

RESULTS: list[tuple[Conversation, bool]] = []


@pytest.fixture(scope="session")
def offline_models() -> Models:
    """The offline model and embedder, whatever the environment says: the suite measures the
    model every new user starts with, and must give the same answer on every machine."""
    return Models(build_llm("offline"), build_embedder("offline"), real=False)


@pytest.fixture(scope="session")
def paraphrase_results() -> list[tuple[Conversation, bool]]:
    """Where each conversation's outcome is recorded for the summary."""
    return RESULTS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    terminalreporter.section("paraphrase suite: pass rate per agent (target >= 90%)")
    terminalreporter.write_line(console_table(pass_rates(RESULTS)))
