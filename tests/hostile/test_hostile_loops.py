"""A hostile model driving a looping journey (issue #31): sixty insufficient-funds loops of the
banking transfer, then an amount that is covered. Whatever the model does — jump to the end,
invent values, claim every guideline applies, any of those per call — every stored journey path
stays under its bound, and the suite's guarantees hold on every turn."""

from __future__ import annotations

import pytest

from engine.matching.journey_graph import path_bound
from tests.hostile.world import check_run, example, run_script

A = "alice"
LOOPS = 60
SCRIPT = [
    (A, t)
    for t in [
        "Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324",
        *(str(1001 + n) for n in range(LOOPS)), "500", "yes",
    ]
]  # fmt: skip


@pytest.mark.parametrize("behaviour", ["jump_to_end", "invent", "all_apply", "mixed"])
async def test_a_hostile_model_looping_a_transfer_keeps_bounded_paths(behaviour: str) -> None:
    run = await run_script(example("banking"), behaviour, 1, SCRIPT)

    check_run(run)
    agent = run.example.agent
    for turn in run.turns:
        for jid, path in turn.output.state.journey_paths.items():
            assert len(path) <= path_bound(agent.journey(jid)), (behaviour, jid, path)
    stored = await run.sessions.load("s")
    assert stored is not None
    assert all(len(p) <= path_bound(agent.journey(j)) for j, p in stored.journey_paths.items())
