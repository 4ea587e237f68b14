"""The `compare` block of docs/BENCHMARKS.md: both engines side by side, with ratios and what
is not like for like."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.compare import Side

NOT_LIKE_FOR_LIKE = (
    "The fakes do NOT make the same decisions everywhere. Ours (bench/fake_llm.py) reads our "
    "prompts and decides matching, journey steps, tool calls and replies lexically. The "
    "reference's (bench/reference_driver.py) decides only the guideline checks (from the "
    "output template its matching prompts carry and the topic words of the customer's latest "
    "message); every other schema gets its minimal valid instance: its journey step selection "
    "never advances the return journey, its tool batches call no tool (no consequential "
    "`SingleToolBatch`, ≈ 10k prompt tokens each in the notes), its draft is a fixed text. So "
    "the reference's calls, tokens and rounds here are a lower bound of what this "
    "conversation costs it with a model that follows the journey and calls the tool; ours "
    "include the journey's steps and the tool calls.",
    "The reference sends a preamble message in its first turns and when replies are slow, "
    "after a deliberate 1.5–2 s delay (its perceived-performance policy); that delay is in "
    "its wall time (turns of ≈ 2.2 s). Its wall time ends at its last message of the turn.",
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
    "Import time: `import parlant.sdk` against `import functions.worker` (our heaviest turn "
    "path); memory: peak RSS of the process that ran the conversation.",
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
        lines.append(
            f"| {i + 1} | {turn['message']} | {turn['calls']} / {turn['rounds']} / "
            f"{turn['prompt_tokens']:,} / {turn['wall_ms']:,.0f} | {cell} |"
        )
    if theirs.run.get("schemas"):
        schemas = ", ".join(f"{k} {v}" for k, v in sorted(theirs.run["schemas"].items()))
        lines += ["", f"Reference calls by schema over the conversation: {schemas}."]
    lines += ["", "**Not like for like:**", ""]
    lines += [f"- {item}" for item in NOT_LIKE_FOR_LIKE]
    return "\n".join(lines)
