"""The reference implementation's per-turn costs, from shared/notes/reference-engine.md §2.

The worked example there — 30 guidelines (25 actionable, 3 observational including the journey
trigger, 2 previously applied) + 1 journey active mid-flow at a chat state + 1 tool call, SDK
default (canned_fluid) — costs ≈ 19–22 LLM calls, 3 sequential rounds (match → tool inference →
draft) and ≈ 60–70k prompt tokens (its prompt sizes are measured as chars/4). The variants below
are derived from the same section's per-call prompt sizes; they are our arithmetic, not
measurements, and are labelled so in the report:
- no tool: minus the consequential `SingleToolBatch` call (≈ 10.1k tokens) → 18–21 calls,
  2 rounds, ≈ 50–60k;
- tool via a journey tool state: journey tool states are tool-enabled and go through the same
  tool inference (`SingleToolBatch`), so the same as the worked example;
- two journeys active: a second `JourneyNextStepSelection` ∥ `JourneyBacktrackCheck` pair in
  round A (≈ 5.1k + 4.8k tokens) → 21–24 calls, 3 rounds, ≈ 70–80k.
Its import cost: `import parlant.sdk` took 4.0–4.5 s when the notes were written (§5). With the
pinned set `python -m bench compare` installs (bench/reference-constraints.txt, `pip check` clean)
two runs of it on 2026-11-28 measured 2,430 ms wall, 2,016 ms CPU (one import) and a median of
4,022 ms wall, 2,504 ms CPU (five), fresh processes, at load averages of about 2.5 and 4 on two
shared cores — the figure
below, when a run has not measured it itself (its low end sets the handler-import limit).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TheirFigures:
    calls: str
    rounds: str
    prompt_tokens: str  # chars/4, as measured in the notes
    derived: bool = False


THEIRS = {
    "tool_via_guideline": TheirFigures("19–22", "3", "60–70k"),
    "tool_via_journey_step": TheirFigures("19–22", "3", "60–70k", derived=True),
    "no_tool": TheirFigures("18–21", "2", "≈50–60k", derived=True),
    "two_journeys": TheirFigures("21–24", "3", "≈70–80k", derived=True),
}

THEIR_IMPORT = "2.4–4.0 s (`import parlant.sdk`, pinned set, measured 2026-11-28)"
THEIR_IMPORT_MS = (2_430.0, 4_020.0)
