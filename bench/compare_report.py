"""The `compare` block of docs/BENCHMARKS.md: both engines side by side, with ratios and what
is not like for like."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.compare import Side

NOT_LIKE_FOR_LIKE = (
    'The fakes make the same decisions, and the "Same decisions?" table checks that they '
    "did. Ours (bench/fake_llm.py) decides matching, journey steps, tool calls and replies "
    "lexically from our prompts; our side records what our engine decided on each turn, and "
    "the reference's fake (bench/reference_fake.py) answers by that script. Its guideline "
    "checks (actionable, observational, previously applied, customer dependent, low "
    "criticality) apply iff our engine matched a guideline with the same condition text (a "
    "condition without counterpart would fall back to topic words shared with the message). "
    "Its response analysis says applied iff our engine applied that action. At boot, its "
    "journey indexing (`ReachableNodesEvaluationSchema`) gets conditions that name the step "
    "they lead to, so its step selection (`JourneyNextStepSelectionSchema`) picks the one "
    'that leads to our step of the turn: "0" to stay, the completing one when ours '
    'completed, "None" when ours had no such journey active. Its backtrack checks say no. '
    "Its tool batches run the tool with our arguments iff ours ran it; the SDK's tools are "
    "non-consequential by default, so that is the light `NonConsequentialToolBatchSchema` "
    "(≈ 2k prompt tokens), not the consequential `SingleToolBatchSchema` (≈ 10k in the "
    "notes). Its draft is our reply text. Still minimal valid instances (false, placeholder "
    "text): the boot-time proposers our engine has no counterpart for (continuous, customer "
    "dependent, agent intention, relative action, tool-running action), so none of its "
    "guidelines or steps is continuous or customer dependent; and its preamble is a fixed "
    '"One moment." (ours sends none). The fake\'s rationales are a few words where a '
    "model's are long, so completion sizes are not comparable; prompt sizes are.",
    "The reference sends a preamble message in its first turns and when replies are slow, "
    "after a deliberate 1.5–2 s delay (its perceived-performance policy); that delay is in "
    'its wall time (the turns marked "preamble" turn by turn). A turn '
    "ends when it reports its processing completed; its wall time ends at its last message.",
    "The reference runs as its SDK's server (uvicorn, its REST API, long-polled events, tools "
    "served over local HTTP by its plugin server); ours runs `TurnEngine` in the process on "
    "in-memory ports. Its wall time includes its HTTP hops and event polling; ours includes "
    "no store round trips (see the moto rows of the main tables for those).",
    "The reference evaluates every guideline and journey with the LLM when the server starts "
    "(indexing); those calls are counted apart (boot), not in any turn. Ours evaluates nothing "
    "at publish time beyond embedding.",
    "The reference's post-reply response analysis (applied guidelines) runs after the reply is "
    "visible; its calls are counted in the turn that caused them, its time is not in the "
    "turn's wall time when it ends after the reply.",
    "Prompt tokens are chars/4 on both sides (the unit of the reference figures in "
    "shared/notes/reference-engine.md); ours measured by a real BPE run 1.05× that.",
    "Engine CPU = the process's CPU during the turn minus the fake LLM's own; the reference's "
    "includes its server, HTTP and background tasks (it is one process), ours only the engine.",
    "Import time: `import parlant.sdk` against `import functions.worker` (the turn path), and "
    "each of our Lambda handlers' imports as a share of it (issue #22's target: at most "
    "0.15×); memory: peak RSS of the process that ran the conversation.",
)


def _ratio(ours: float, theirs: float) -> str:
    if not ours or not theirs:
        return "–"
    return f"{theirs / ours:.1f}× (ours {ours / theirs:.2f}×)"


def _totals(run: dict[str, Any]) -> dict[str, float]:
    turns = run.get("turns", [])
    if not turns:
        return {}
    n = len(turns)
    return {
        "calls": sum(t["calls"] for t in turns) / n,
        "rounds": sum(t["rounds"] for t in turns) / n,
        "prompt_tokens": sum(t["prompt_tokens"] for t in turns) / n,
        "wall_ms": sum(t["wall_ms"] for t in turns) / n,
        "engine_cpu_ms": sum(t["engine_cpu_ms"] for t in turns) / n,
    }


def _key(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .\"'")


def _calls(tools: list[dict[str, Any]]) -> list[str]:
    return sorted(
        f"{t['name']}({', '.join(f'{k}={v}' for k, v in sorted(t['arguments'].items()))})"
        for t in tools
    )


def agreement(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Whether one turn's decisions were the same on both sides: `ours` is our engine's
    `decisions`, `theirs` what the reference did (`did`: the conditions its guideline checks
    said hold, the step of each journey it kept active, the tools it ran)."""
    our_conditions = {_key(g["condition"]) for g in ours.get("guidelines", [])}
    their_conditions = {_key(c) for c in theirs.get("guidelines", [])}
    our_steps = sorted(
        str(j["node"]) for j in ours.get("journeys", []) if j.get("node") is not None
    )
    their_steps = sorted(str(s) for s in theirs.get("journeys", []))
    our_tools, their_tools = _calls(ours.get("tools", [])), _calls(theirs.get("tools", []))
    differs = [
        name
        for name, same in (
            ("guidelines", our_conditions == their_conditions),
            ("journey step", our_steps == their_steps),
            ("tools", our_tools == their_tools),
        )
        if not same
    ]
    return {
        "guidelines": (
            len(our_conditions),
            len(their_conditions),
            len(our_conditions & their_conditions),
        ),
        "steps": (our_steps, their_steps),
        "tools": (our_tools, their_tools),
        "differs": differs,
    }


def _agreement_lines(ours: Side, theirs: Side) -> list[str]:
    pairs = [
        (t, other)
        for t, other in zip(ours.run.get("turns", []), theirs.run.get("turns", []), strict=False)
        if "decisions" in t and "did" in other
    ]
    if not pairs:
        return []
    lines = [
        "",
        "Same decisions? The reference's fake follows what our engine decided on each turn "
        "(bench/reference_fake.py); this is what the reference then did — the conditions its "
        "guideline checks said hold, the step each journey it kept active is at after the turn "
        "(its session's agent state; – when none is active, as after a journey completed), the "
        "tools that ran (with their arguments):",
        "",
        "| # | guidelines matched: ours / reference / agreed | journey step: ours / reference "
        "| tools run: ours / reference | same? |",
        "|---|---|---|---|---|",
    ]
    for i, (t, other) in enumerate(pairs):
        a = agreement(t["decisions"], other["did"])
        steps = " / ".join(", ".join(side) or "–" for side in a["steps"])
        tools = " / ".join(", ".join(side) or "–" for side in a["tools"])
        same = "yes" if not a["differs"] else "no: " + ", ".join(a["differs"])
        lines.append(
            f"| {i + 1} | {' / '.join(map(str, a['guidelines']))} | {steps} | {tools} | {same} |"
        )
    return lines


def render(ours: Side, theirs: Side, context: dict[str, Any]) -> str:
    """The block's Markdown."""
    lines = [
        f"Run {context['date']} by `python -m bench compare` ({context['seconds']:.0f} s); "
        f"{ours.name} {ours.version} vs {theirs.name} {theirs.version}. Machine: "
        f"{context['machine']}; load average at the end {context['load']} (shared machine: "
        "wall and CPU times carry noise). Latency model: "
        f"{context['latency_ms']:g} ms per LLM call on both sides.",
        "",
    ]
    if theirs.status != "ok":
        lines += [f"**Reference side incomplete:** {theirs.status}", ""]
    a, b = _totals(ours.run), _totals(theirs.run)
    lines += [
        "| per turn (mean of the conversation) | Waypoint | reference | reference ÷ Waypoint |",
        "|---|---|---|---|",
    ]
    for key, label, fmt in (
        ("calls", "LLM calls", "{:.1f}"),
        ("rounds", "sequential LLM rounds", "{:.1f}"),
        ("prompt_tokens", "prompt tokens (chars/4)", "{:,.0f}"),
        ("wall_ms", "wall ms", "{:,.0f}"),
        ("engine_cpu_ms", "engine CPU ms", "{:.1f}"),
    ):
        x, y = a.get(key), b.get(key)
        lines.append(
            f"| {label} | {fmt.format(x) if x is not None else '–'} | "
            f"{fmt.format(y) if y is not None else '–'} | "
            f"{_ratio(x, y) if x is not None and y is not None else '–'} |"
        )
    for key, label, fmt in (
        ("wall_ms", "import wall ms (median)", "{:,.0f}"),
        ("cpu_ms", "import CPU ms (median)", "{:,.0f}"),
        ("modules", "modules loaded by the import", "{:,.0f}"),
        ("rss_mb", "RSS after the import, MB", "{:.0f}"),
    ):
        x, y = ours.imports.get(key), theirs.imports.get(key)
        lines.append(
            f"| {label} | {fmt.format(x) if x is not None else '–'} | "
            f"{fmt.format(y) if y is not None else '–'} | "
            f"{_ratio(x, y) if x is not None and y is not None else '–'} |"
        )
    their_import = theirs.imports.get("wall_ms")
    for module, ms in sorted(ours.handlers.items(), key=lambda kv: -kv[1]):
        share = f"{ms / their_import:.3f}× of theirs" if their_import else "–"
        lines.append(f"| import {module} (median wall ms) | {ms:,.0f} | – | {share} |")
    if ours.http_floor_ms:
        ms = ours.http_floor_ms
        share = f"{ms / their_import:.3f}× of theirs" if their_import else "–"
        lines.append(
            "| import of a one-route FastAPI + Mangum + Logger app, the floor of an HTTP handler "
            f"(`bench.fastapi_floor`, median wall ms) | {ms:,.0f} | – | {share} |"
        )
    x, y = ours.run.get("peak_rss_mb"), theirs.run.get("peak_rss_mb")
    lines.append(
        f"| peak RSS of the conversation's process, MB | {x or 0:.0f} | "
        f"{(y or 0):.0f} | {_ratio(x, y) if x and y else '–'} |"
    )
    if theirs.run.get("boot"):
        boot = theirs.run["boot"]
        lines.append(
            f"| reference server boot (indexing) | – | {boot.get('calls', 0)} LLM calls, "
            f"{boot.get('seconds', 0):.1f} s | |"
        )
    lines += ["", "Turn by turn (calls / rounds / prompt tokens / wall ms):", ""]
    lines += ["| # | customer | Waypoint | reference |", "|---|---|---|---|"]
    for i, turn in enumerate(ours.run.get("turns", [])):
        other = theirs.run.get("turns", [])
        ref = other[i] if i < len(other) else None
        cell = (
            f"{ref['calls']} / {ref['rounds']} / {ref['prompt_tokens']:,} / {ref['wall_ms']:,.0f}"
            if ref
            else "–"
        )
        if ref and "CannedResponsePreambleSchema" in ref.get("schemas", {}):
            cell += " (preamble)"
        lines.append(
            f"| {i + 1} | {turn['message']} | {turn['calls']} / {turn['rounds']} / "
            f"{turn['prompt_tokens']:,} / {turn['wall_ms']:,.0f} | {cell} |"
        )
    lines += _agreement_lines(ours, theirs)
    if theirs.run.get("schemas"):
        schemas = ", ".join(f"{k} {v}" for k, v in sorted(theirs.run["schemas"].items()))
        lines += ["", f"Reference calls by schema over the conversation: {schemas}."]
    if theirs.run.get("minimal"):
        minimal = ", ".join(f"{k} {v}" for k, v in sorted(theirs.run["minimal"].items()))
        lines += [
            "",
            "Reference calls its fake answered with a minimal valid instance or a fixed text, "
            f"not by the script: {minimal}.",
        ]
    lines += ["", "**Not like for like:**", ""]
    lines += [f"- {item}" for item in NOT_LIKE_FOR_LIKE]
    return "\n".join(lines)
