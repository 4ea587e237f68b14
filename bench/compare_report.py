"""The `compare` block of docs/BENCHMARKS.md: both engines side by side, with ratios and what
is not like for like."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.compare import Side

# How the reference's perceived-performance policy was set, for the report (its driver's `--delays`).
DELAYS_OFF = (
    "its perceived-performance waits off: the SDK's default policy "
    "(`BasicPerceivedPerformancePolicy`) with its preamble, processing-indicator and follow-up "
    "delays at 0 (bench/reference_agent.py, `NoDelays`)"
)
DELAYS_DEFAULT = (
    "its default perceived-performance policy (`BasicPerceivedPerformancePolicy`), which waits "
    "1.5–2 s on purpose before a preamble message and 1–2 s after it"
)

LIKE_FOR_LIKE = (
    "The same agent (exported from bench/worked_example.py to a neutral spec and built through "
    "each engine's own API), the same five customer messages, the same decisions (checked "
    "below), the same latency model per LLM call, the same prompt-size unit (chars/4).",
    "Wall time: the reference's per-turn rows and ratios are with " + DELAYS_OFF + ". Ours "
    "has no such waits. Its wall times with " + DELAYS_DEFAULT + ", are in the row labelled "
    '"default policy" and the last column turn by turn.',
    "Engine CPU: the CPU of each engine's own work for the turn, minus its fake LLM's. Ours: "
    "the process's CPU over `TurnEngine`'s turn (the process runs nothing else). The "
    "reference's: the CPU of the asyncio callbacks of its engine's tasks (bench/task_cpu.py) — "
    "the session's processing task the message starts and all it creates (matching, tools, "
    "the reply, the response analysis after it), and its plugin server's handling of the tool "
    "calls — on the event loop's thread clock. Not in it: the measuring client (the same "
    "process), the server's handlers of the client's requests (posting the message, polling "
    "for events), the event loop's own bookkeeping. The whole process's CPU over the turn is "
    "the row below it, for scale.",
    "Memory: the peak resident set of a fresh process on both sides (VmHWM, "
    "bench/peak_memory.py: `ru_maxrss` would carry the parent's high-water mark into the "
    "child), after the import alone and after the whole conversation.",
)

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
    "The reference sends a preamble message in its first turns and when replies are slow (its "
    "perceived-performance policy decides; both settings keep that, only the waits differ), one "
    'LLM call more on those turns (marked "preamble" turn by turn). A turn ends when it '
    "reports its processing completed; its wall time ends at its last message.",
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
    "Engine CPU: the reference's engine does its work as asyncio tasks in a server; its HTTP "
    "hop to its own plugin server for a tool call is in its figure, the JSON and HTTP parsing "
    "of its server's protocol callbacks is not. Ours has no HTTP in the turn.",
    "Import time: `import parlant.sdk` against `import functions.worker` (the turn path), and "
    "each of our Lambda handlers' imports as a share of it (issue #22's target: at most "
    "0.15×). Memory after the conversation: the reference's process also holds its server, "
    "its plugin server and the measuring client.",
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
        **(
            {"process_cpu_ms": sum(t["process_cpu_ms"] for t in turns) / n}
            if all("process_cpu_ms" in t for t in turns)
            else {}
        ),
    }


def _nth(run: dict[str, Any], i: int) -> dict[str, Any] | None:
    turns = run.get("turns", [])
    return dict(turns[i]) if i < len(turns) else None


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
    lines += ["**Like for like:**", ""] + [f"- {item}" for item in LIKE_FOR_LIKE] + [""]
    a, b = _totals(ours.run), _totals(theirs.run)
    default = _totals(theirs.default_delays)
    lines += [
        "| per turn (mean of the conversation) | Waypoint | reference | reference ÷ Waypoint |",
        "|---|---|---|---|",
    ]
    rows: list[tuple[str, float | None, float | None, str]] = [
        ("LLM calls", a.get("calls"), b.get("calls"), "{:.1f}"),
        ("sequential LLM rounds", a.get("rounds"), b.get("rounds"), "{:.1f}"),
        ("prompt tokens (chars/4)", a.get("prompt_tokens"), b.get("prompt_tokens"), "{:,.0f}"),
        (
            "wall ms (reference: perceived-performance waits off)",
            a.get("wall_ms"),
            b.get("wall_ms"),
            "{:,.0f}",
        ),
        (
            "wall ms, reference with its default policy (1.5–2 s wait before a preamble, 1–2 s "
            "after it)",
            a.get("wall_ms"),
            default.get("wall_ms"),
            "{:,.0f}",
        ),
        (
            "engine CPU ms (reference: its engine's tasks)",
            a.get("engine_cpu_ms"),
            b.get("engine_cpu_ms"),
            "{:.1f}",
        ),
        (
            "reference process CPU ms over the turn (everything in its process: server, client's "
            "polling)",
            None,
            b.get("process_cpu_ms"),
            "{:.1f}",
        ),
    ]
    for label, x, y, fmt in rows:
        lines.append(
            f"| {label} | {fmt.format(x) if x is not None else '–'} | "
            f"{fmt.format(y) if y is not None else '–'} | "
            f"{_ratio(x, y) if x is not None and y is not None else '–'} |"
        )
    for key, label, fmt in (
        ("wall_ms", "import wall ms (median)", "{:,.0f}"),
        ("cpu_ms", "import CPU ms (median)", "{:,.0f}"),
        ("modules", "modules loaded by the import", "{:,.0f}"),
        ("rss_mb", "peak RSS of a fresh process that imports it, MB", "{:.0f}"),
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
            "| import of a one-route FastAPI + Mangum + Logger app, the floor of a FastAPI handler "
            f"(`bench.fastapi_floor`, median wall ms) | {ms:,.0f} | – | {share} |"
        )
    x, y = ours.run.get("peak_rss_mb"), theirs.run.get("peak_rss_mb")
    lines.append(
        f"| peak RSS of the fresh process that ran the conversation, MB | {x or 0:.0f} | "
        f"{(y or 0):.0f} | {_ratio(x, y) if x and y else '–'} |"
    )
    if theirs.run.get("boot"):
        boot = theirs.run["boot"]
        lines.append(
            f"| reference server boot (indexing) | – | {boot.get('calls', 0)} LLM calls, "
            f"{boot.get('seconds', 0):.1f} s | |"
        )
    lines += [
        "",
        "Turn by turn (calls / rounds / prompt tokens / wall ms / engine CPU ms; the reference "
        "with its waits off, then its wall ms with its default policy):",
        "",
        "| # | customer | Waypoint | reference, waits off | reference wall ms, default policy |",
        "|---|---|---|---|---|",
    ]
    for i, turn in enumerate(ours.run.get("turns", [])):
        ref = _nth(theirs.run, i)
        cell = (
            f"{ref['calls']} / {ref['rounds']} / {ref['prompt_tokens']:,} / "
            f"{ref['wall_ms']:,.0f} / {ref['engine_cpu_ms']:.1f}"
            if ref
            else "–"
        )
        if ref and "CannedResponsePreambleSchema" in ref.get("schemas", {}):
            cell += " (preamble)"
        slow = _nth(theirs.default_delays, i)
        slow_cell = f"{slow['wall_ms']:,.0f}" if slow else "–"
        lines.append(
            f"| {i + 1} | {turn['message']} | {turn['calls']} / {turn['rounds']} / "
            f"{turn['prompt_tokens']:,} / {turn['wall_ms']:,.0f} / {turn['engine_cpu_ms']:.1f} "
            f"| {cell} | {slow_cell} |"
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
