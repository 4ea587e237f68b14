"""A fake `SchematicLLM` for benchmarks: plausible, deterministic answers and a latency model.

`BenchLLM` answers every schema the engine asks for by reading the prompt the way a model would —
guideline handles and conditions, the journey map's numbered steps and flags, the offered tools
and known values, the numbered instructions — and never by peeking at engine internals:

    GuidelineMatchBatch, CustomerDependentBatch, DisambiguationVerdict  (matching)
    JourneyNodeSelection                                                 (journey steps)
    ToolCallPlan                                                         (tool arguments)
    ComposedReply, CannedChoice                                          (the reply)
    SecretsSaid                                                          (secrets typed ahead)

Latency: every call sleeps `per_call_ms` (+ `per_completion_token_ms` per output token) with
`asyncio.sleep`, so calls the engine gathers concurrently overlap exactly as real requests would.
Tokens are counted with `bench.tokens` (a real BPE tokenizer when available). The CPU time the
fake itself spends per call (reading, answering, counting) is recorded as `self_ms`, so the
harness can subtract it and report the engine's own overhead. Parsing the answer's JSON text into
the schema is not the fake's work but what a provider adapter does with every real answer, so it
runs after `self_ms` is taken and counts as engine overhead.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from bench import reading
from bench.tokens import TokenCounter, token_counter
from engine.ports import Generation, Usage

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class LatencyModel:
    """Seconds a call takes: a fixed part plus an optional part per completion token."""

    per_call_ms: float = 400.0
    per_completion_token_ms: float = 0.0

    def seconds(self, completion_tokens: int) -> float:
        return (self.per_call_ms + self.per_completion_token_ms * completion_tokens) / 1000


@dataclass(frozen=True)
class CallLog:
    schema: str
    prompt_chars: int
    prompt_tokens: int
    completion_tokens: int
    started: float  # perf_counter at entry: lets the harness attribute the call to a stage
    self_ms: float  # CPU time of the fake itself (not the simulated latency)
    self_cpu_ms: float = 0.0  # the same window by process CPU (compare: engine CPU = total − this)


@dataclass
class BenchLLM:
    """`SchematicLLM` with prompt-reading answers, a latency model and token accounting."""

    latency: LatencyModel = field(default_factory=LatencyModel)
    tokens: TokenCounter = field(default_factory=token_counter)
    calls: list[CallLog] = field(default_factory=list)

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        started, cpu = time.perf_counter(), time.process_time()
        answer = ANSWERS.get(schema.__name__)
        if answer is None:
            raise AssertionError(f"BenchLLM: no answerer for schema {schema.__name__}")
        # The fake's own work ends with the answer as the text a model would send back…
        raw = schema.model_validate(answer(prompt)).model_dump_json()
        prompt_tokens = self.tokens.count(prompt)
        completion_tokens = self.tokens.count(raw)
        self_ms = (time.perf_counter() - started) * 1000
        self_cpu_ms = (time.process_time() - cpu) * 1000
        # …and parsing that text into the schema is what a provider adapter does with every real
        # answer: it stays in the measured engine overhead.
        value = schema.model_validate_json(raw)
        self.calls.append(
            CallLog(
                schema.__name__,
                len(prompt),
                prompt_tokens,
                completion_tokens,
                started,
                self_ms,
                self_cpu_ms,
            )
        )
        delay = self.latency.seconds(completion_tokens)
        await asyncio.sleep(delay)  # 0 still yields: gathered calls interleave as in production
        return Generation(
            value=value,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
            model=model,
            latency_ms=delay * 1000,
        )


# --------------------------------------------------------------------------------------------------
# Reading the shared context


def latest_customer_text(prompt: str) -> str:
    lines = [line for line in prompt.splitlines() if line.startswith("Customer: ")]
    return lines[-1][len("Customer: ") :] if lines else ""


def tool_results_text(prompt: str) -> str:
    """This turn's tool results (the context block the engine adds after tools ran)."""
    match = re.search(r"^Tool results from this turn:\n((?:- .*\n?)+)", prompt, re.M)
    return match.group(1) if match else ""


# --------------------------------------------------------------------------------------------------
# Matching

_GUIDELINE = re.compile(r"^- \[(g\d+)\] when: (.*)$", re.M)
_HEAD = re.compile(r'decide whether this holds: "(.*?)"\. If it does')


def answer_match(prompt: str) -> dict[str, Any]:
    message = latest_customer_text(prompt)
    verdicts = []
    for handle, condition in _GUIDELINE.findall(prompt):
        applies, score = reading.relevance(condition, message)
        verdicts.append({"id": handle, "applies": applies, "score": score, "rationale": "lexical"})
    return {"verdicts": verdicts}


def answer_customer_dependent(prompt: str) -> dict[str, Any]:
    message = latest_customer_text(prompt)
    answered = bool(message.strip()) and not reading.is_question(message)
    verdicts = []
    for handle, condition in _GUIDELINE.findall(prompt):
        holds, score = reading.relevance(condition, message)
        verdicts.append(
            {
                "id": handle,
                "condition_holds": holds or answered,
                "customer_completed": answered,
                "score": max(score, 6 if answered else 0),
            }
        )
    return {"verdicts": verdicts}


def answer_disambiguation(prompt: str) -> dict[str, Any]:
    message = latest_customer_text(prompt)
    head = _HEAD.search(prompt)
    head_applies = head is not None and reading.relevance(head.group(1), message)[0]
    candidates = [
        h for h, condition in _GUIDELINE.findall(prompt) if reading.relevance(condition, message)[0]
    ]
    ambiguous = head_applies and len(candidates) >= 2
    return {
        "head_applies": head_applies,
        "is_ambiguous": ambiguous,
        "candidate_ids": candidates if head_applies else [],
        "clarification": "Which of these do you mean?" if ambiguous else "",
    }


# --------------------------------------------------------------------------------------------------
# Journey node selection

_STEP = re.compile(r"^STEP (\d+): (.*)$")
_FIELD = re.compile(r'^  - collects "([^"]+)" \((.*)\): (known = .*|not given yet)$')
_TRANSITION = re.compile(r"^  ↳ (.*?) → (step (\d+)|END JOURNEY)")
_DROP_WORDS = ("stop", "cancel", "never mind", "forget it", "quit")


@dataclass
class _Step:
    number: str
    title: str
    flags: list[str] = field(default_factory=list)
    fields: list[tuple[str, str, bool]] = field(default_factory=list)  # name, kind, known
    exits: list[tuple[str | None, str | None]] = field(default_factory=list)  # condition, target

    def flagged(self, prefix: str) -> bool:
        return any(f.startswith(prefix) for f in self.flags)

    @property
    def is_fork(self) -> bool:
        return self.flagged("FORK")

    @property
    def is_tool(self) -> bool:
        return self.flagged("TOOL STEP")

    @property
    def tools_ran(self) -> bool:
        return any(f.startswith("TOOL STEP") and " — ran this turn" in f for f in self.flags)


def parse_journey_map(prompt: str) -> dict[str, _Step]:
    section = prompt.split("## Journey map", 1)[-1].split("## Where the journey stands", 1)[0]
    steps: dict[str, _Step] = {}
    current: _Step | None = None
    for line in section.splitlines():
        if m := _STEP.match(line):
            current = steps.setdefault(m.group(1), _Step(m.group(1), m.group(2)))
        elif current is None:
            continue
        elif m := _FIELD.match(line):
            current.fields.append((m.group(1), m.group(2), m.group(3).startswith("known")))
        elif m := _TRANSITION.match(line):
            when = m.group(1)
            condition = when[4:-1] if when.startswith('if "') else None
            current.exits.append((condition, m.group(3)))
        elif line.startswith("  - "):
            current.flags.append(line[4:])
    return steps


def _collect(step: _Step, message: str) -> tuple[list[dict[str, str]], bool]:
    """Values the customer gave for a step's fields, and whether every required one is there."""
    values = []
    complete = True
    for name, kind, known in step.fields:
        choices = kind[len("one of: ") :].split(", ") if kind.startswith("one of") else ()
        value = reading.value_for(kind, message, choices, name)
        if value is not None:
            values.append({"name": name, "value": value})
        elif not known and "optional" not in kind:
            complete = False
    return values, complete


def answer_node_selection(prompt: str) -> dict[str, Any]:
    message = latest_customer_text(prompt)
    if any(w in message.lower() for w in _DROP_WORDS):
        return {"journey_applies": False, "next_step": None, "rationale": "customer dropped it"}
    steps = parse_journey_map(prompt)
    evidence = f"{message}\n{tool_results_text(prompt)}"
    current = next((s for s in steps.values() if s.flagged("CURRENT STEP")), None)
    begin = next((s for s in steps.values() if s.flagged("BEGIN HERE")), None)
    start = current or begin
    if start is None:
        return {"journey_applies": True, "next_step": None, "rationale": "no step shown"}
    walk = [start.number]
    collected: list[dict[str, str]] = []
    node = start
    # The current step may be complete (the customer answered it); a newly reached chat step is
    # where the walk stops, because the agent performs it in this reply.
    done = current is not None
    for _ in range(len(steps) + 2):
        if node.is_fork:
            done = True
        elif node.is_tool:
            done = node.tools_ran
        elif not done:
            break
        elif node.fields:
            values, done = _collect(node, message)
            collected += values
        elif node.flagged("CUSTOMER DEPENDENT"):
            done = bool(message.strip()) and not reading.is_question(message)
        if not done:
            break
        choice = reading.best_condition([c for c, _ in node.exits], evidence)
        if choice is None:
            break
        target = node.exits[choice][1]
        if target is None:
            return {
                "rationale": "last step done",
                "step_advancement": walk,
                "next_step": "NONE",
                "collected": collected,
            }
        if target not in steps:
            walk.append(target)
            break
        node = steps[target]
        walk.append(target)
        done = False
    return {
        "rationale": "walked the map",
        "journey_applies": True,
        "step_advancement": walk,
        "next_step": walk[-1],
        "collected": collected,
    }


# --------------------------------------------------------------------------------------------------
# Tools

_TOOL = re.compile(r"^- (\w+): ")
_PARAM = re.compile(r"^    - (\w+): (\w+)(?: one of (\[.*?\]))?, (required|optional)")


def answer_tool_plan(prompt: str) -> dict[str, Any]:
    message = latest_customer_text(prompt)
    section = prompt.split("Tools you may call now:", 1)[-1].split("Values already known:", 1)[0]
    known_text = prompt.split("Values already known: ", 1)[-1].split("\n", 1)[0]
    try:
        known = json.loads(known_text)
    except json.JSONDecodeError:
        known = {}
    calls: list[dict[str, Any]] = []
    for line in section.splitlines():
        if m := _TOOL.match(line):
            calls.append({"tool": m.group(1), "arguments": []})
        elif (m := _PARAM.match(line)) and calls:
            name, kind = m.group(1), m.group(2)
            if name in known:
                continue  # the engine fills known values itself
            value = (
                reading.first_number(message)
                if kind in ("number", "integer")
                else reading.named_value(name, message) or reading.reference_token(message)
            )
            if value is not None:
                calls[-1]["arguments"].append({"name": name, "value": value})
    return {"calls": calls, "rationale": "every offered tool is due"}


# --------------------------------------------------------------------------------------------------
# Composition

_INSTRUCTION = re.compile(r"^- \[(i\d+)\] (.*)$", re.M)
_TEMPLATE = re.compile(r"^- \[(t\d+)\] (.*)$", re.M)
_QUESTIONS = re.compile(r"ask the customer for it:\n((?:- .*\n?)+)")


def answer_compose(prompt: str) -> dict[str, Any]:
    instructions = _INSTRUCTION.findall(prompt)
    questions = _QUESTIONS.search(prompt)
    parts = [text.rstrip(".") for _, text in instructions]
    if questions:
        parts += [q[2:].rstrip(".") for q in questions.group(1).splitlines() if q.strip()]
    body = ". ".join(parts) if parts else "How can I help you today"
    return {"message": f"Thanks for your message. {body}.", "applied": [h for h, _ in instructions]}


def answer_canned(prompt: str) -> dict[str, Any]:
    templates = _TEMPLATE.findall(prompt)
    applied = [h for h, _ in _INSTRUCTION.findall(prompt)]
    if templates:
        return {"template": templates[0][0], "applied": applied}
    return {"template": None, "message": answer_compose(prompt)["message"], "applied": applied}


# --------------------------------------------------------------------------------------------------
# Secrets typed ahead

_SECRET_FIELD = re.compile(r"^- (\w+) \(\w+\): ", re.M)


def answer_secrets(prompt: str) -> dict[str, Any]:
    """A value named for a listed secret field in the customer's lines ("password is …")."""
    customer = [line for line in prompt.splitlines() if line.startswith("Customer: ")]
    values = []
    # the list comes before the conversation: a header typed by the customer is not read
    head = prompt.split("Conversation (most recent last):", 1)[0]
    listed = head.rsplit("Secret fields:", 1)[-1].split("\n\n", 1)[0]
    for name in _SECRET_FIELD.findall(listed):
        cue = re.compile(rf"\b{re.escape(name)}\s*(?:is|:|=)\s*(\S+)", re.I)
        values += [{"name": name, "value": v} for line in customer for v in cue.findall(line)]
    return {"values": values}


ANSWERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "GuidelineMatchBatch": answer_match,
    "CustomerDependentBatch": answer_customer_dependent,
    "DisambiguationVerdict": answer_disambiguation,
    "JourneyNodeSelection": answer_node_selection,
    "ToolCallPlan": answer_tool_plan,
    "ComposedReply": answer_compose,
    "CannedChoice": answer_canned,
    "SecretsSaid": answer_secrets,
}
