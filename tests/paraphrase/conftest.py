"""The paraphrase suite's shared pieces: the offline models every conversation runs on, and the
pass rate per agent printed at the end of the pytest run (what `make test` reports).

Each conversation's outcome travels on its test report (`user_properties`), so the table is
the whole run's also when pytest-xdist runs the conversations in several worker processes."""

from __future__ import annotations

import pytest

from bench.paraphrase import console_table, load_suite, pass_rates
from infra.conversation_tests import Models
from infra.llm.factory import build_embedder, build_llm

OUTCOME = "paraphrase outcome"
OUTCOMES: dict[str, bool] = {}  # conversation id → passed, from the reports this process saw


@pytest.fixture(scope="session")
def offline_models() -> Models:
    """The offline model and embedder, whatever the environment says: the suite measures the
    model every new user starts with, and must give the same answer on every machine."""
    return Models(build_llm("offline"), build_embedder("offline"), real=False)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == OUTCOME:
            conversation_id, passed = value
            OUTCOMES[conversation_id] = passed


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not OUTCOMES:
        return
    by_id = {c.id: c for c in load_suite()}
    results = [(by_id[i], passed) for i, passed in OUTCOMES.items() if i in by_id]
    terminalreporter.section("paraphrase suite: pass rate per agent (target >= 90%)")
    terminalreporter.write_line(console_table(pass_rates(results)))
