"""The compose stage: the reply, from what applies this turn.

Gathers the instructions (matched guidelines, clarifications, journey steps shown and tool steps
performed), observations, questions and facts (failed tools, suspended journeys) into a
`CompositionInput`, then writes the reply fluidly or from canned templates (strict: approved
templates and tool fragments only). A failed composition sends the fallback reply; a reply that
claims an action that did not run is replaced by the engine's statement of what happened
(`engine.stages.reply_claims`). Appends the reply event; returns the ids of the guidelines the
reply applied.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.agent_config import CompositionMode, LLMPurpose
from engine.compose import (
    CannedChoice,
    ComposedReply,
    CompositionInput,
    Instruction,
    Template,
    applied_sources,
    build_canned_prompt,
    build_compose_prompt,
    effective_composition_mode,
    field_values,
    fillable,
    merge_fragments,
    render_template,
)
from engine.context import TurnContext
from engine.errors import LLMError
from engine.matching.projection import journey_node_guideline_id, node_action_text
from engine.model import Guideline, GuidelineKind, Journey, JourneyNode, NodeKind, journey_tag
from engine.recall.index import recall_index
from engine.relations import Resolution
from engine.sessions.session import Event, EventKind, EventSource
from engine.stages.confirmation import confirmation_line
from engine.stages.journey_progress import first_runnable
from engine.stages.reply_claims import claimed_unrun
from engine.stages.state import TurnState


async def compose_reply(state: TurnState, resolution: Resolution) -> tuple[Event, list[str]]:
    data, guidelines, steps = composition_input(state, resolution)
    mode = effective_composition_mode(state.agent, guidelines, steps)
    state.trace.composition_mode = mode.value
    state.trace.matched_guideline_ids = sorted(resolution.guideline_ids)
    state.llm.round += 1
    fallback = False
    try:
        if mode is CompositionMode.FLUID:
            text, applied = await _compose_fluid(state, data)
        else:
            text, applied = await _compose_canned(state, data, resolution, mode)
    except LLMError as exc:
        state.trace.notes.append(f"composition failed, fallback reply sent: {exc}")
        text, applied, fallback = state.line("fallback_reply"), [], True
    if not text.strip():
        state.trace.notes.append("composition was empty; sent the fallback reply")
        text, applied, fallback = state.line("fallback_reply"), [], True
    claimed = None if fallback else claimed_unrun(state, text, resolution)
    if claimed is not None:
        # The model says an action happened that did not run: never sent, the engine says why.
        action, said = claimed
        state.trace.notes.append(
            f"the reply claimed that {action.tool} succeeded but it {action.what} "
            f"({state.secrets.scrub_text(said)!r}); sent the engine's statement instead"
        )
        text, applied = action.statement, []
    if state.pending_confirmation is not None and not state.pending_confirmation.agreed:
        # Whatever the model wrote (or failed to), the customer sees the exact call to agree to.
        line = confirmation_line(state.line, state.pending_confirmation)
        text = f"{text.strip()}\n\n{line}"
    # A fallback still carries the turn's buttons and view: a selector's options or a
    # confirmation's yes/no must reach the customer even when the model failed.
    extras: dict[str, Any] = {"fallback": True} if fallback else {"composition_mode": mode.value}
    extras["language"] = state.language  # what the channel writes around it in (`infra.channels`)
    state.trace.applied_guideline_ids = applied
    if state.reply_options:
        extras["options"] = state.reply_options
    if state.reply_view is not None:
        extras["view"] = state.reply_view
    return state.add_event(EventKind.MESSAGE, EventSource.AGENT, text, **extras), applied


def composition_input(
    state: TurnState, resolution: Resolution
) -> tuple[CompositionInput, list[Guideline], list[tuple[Journey, JourneyNode]]]:
    """What the reply must do and say, with the guidelines and steps it draws on."""
    agent = state.agent
    data = CompositionInput(
        questions=list(state.questions),
        collected=state.secrets.scrub(state.collected_for()),
        language=state.language,
    )
    guidelines: list[Guideline] = []
    steps: list[tuple[Journey, JourneyNode]] = []
    n = 0
    # The resolved guidelines in the agent's order, without walking all of the agent's.
    for gid in recall_index(agent).in_agent_order(resolution.guideline_ids):
        g = agent.guideline(gid)
        if g.kind is GuidelineKind.OBSERVATIONAL:
            data.observations.append(g.condition)
            continue
        if any(g.id in c.metadata.get("disambiguates", []) for c in state.clarifications):
            continue  # the clarification question replaces the ambiguous options
        n += 1
        guidelines.append(g)
        data.instructions.append(Instruction(f"i{n}", g.action or "", g.id))
    for c in state.clarifications:
        n += 1
        data.instructions.append(Instruction(f"i{n}", c.action or "", c.id))
    for jid, node_id in state.performed_tool_steps:
        node = agent.journey(jid).node(node_id)
        shown = state.steps.get(jid) == node_id and jid in resolution.journey_ids
        if node.action and not shown:  # the journey moved on, but the step's words are due
            steps.append((agent.journey(jid), node))
            n += 1
            source = journey_node_guideline_id(jid, node_id)
            data.instructions.append(Instruction(f"i{n}", node.action, source, jid))
    for jid, node_id in state.steps.items():
        if jid not in resolution.journey_ids:
            continue
        journey = agent.journey(jid)
        node = journey.node(node_id)
        if not _may_speak_for(state, node):
            continue  # its words describe a result this turn does not have
        text = node_action_text(journey, node)
        if not text:
            continue
        n += 1
        steps.append((journey, node))
        data.instructions.append(
            Instruction(
                f"i{n}",
                f"({journey.title}) {text}",
                journey_node_guideline_id(jid, node_id),
                jid,
            )
        )
    for jid in state.suspended:
        if jid not in state.session.suspended_journeys:
            waiting_for = first_runnable(state, agent.journey(jid), set())
            if waiting_for and waiting_for != jid:
                data.notes.append(
                    f"Before '{agent.journey(jid).title}' the customer must complete "
                    f"'{agent.journey(waiting_for).title}'; say so briefly."
                )
    data.notes.extend(state.notes_for_reply)
    # A tool error or an invalid value may quote a secret: the reply prompt never sees one.
    data.notes = [state.secrets.scrub_text(n) for n in data.notes]
    data.questions = [state.secrets.scrub_text(q) for q in data.questions]
    return data, guidelines, steps


def _reply_context(state: TurnState) -> TurnContext:
    """What the reply prompt sees: the history is masked already (`mask_events`); this turn's
    tool results are masked too (a tool may return a secret by name or quote one)."""
    ctx = state.context()
    secrets = state.secrets
    return ctx.with_tool_results(
        [
            replace(r, data=secrets.scrub(r.data), error=secrets.scrub_text(r.error or "") or None)
            for r in ctx.tool_results
        ]
    )


def _may_speak_for(state: TurnState, node: JourneyNode) -> bool:
    """A tool step's words ("tell the customer the transfer is complete") are due only once its
    tool succeeded this turn — not while it waits, is refused, or failed."""
    return node.kind is not NodeKind.TOOL or bool(set(node.tools) & state.succeeded_tools)


async def _compose_fluid(state: TurnState, data: CompositionInput) -> tuple[str, list[str]]:
    # Tool fragments are offered in every mode: in fluid mode as wording the reply may use.
    if not data.fragments:
        values = _template_values(state)
        data.fragments = [
            render_template(t, values) for t in fillable(_tool_fragments(state), values)
        ]
    prompt = build_compose_prompt(_reply_context(state), data, explain=state.agent.config.explain)
    gen = await state.llm.generate(LLMPurpose.COMPOSE, prompt, ComposedReply, label="fluid")
    return gen.value.message, applied_sources(data, gen.value)


def _template_values(state: TurnState) -> dict[str, str]:
    """What `{{field}}` placeholders may be filled from: successful tool data, fragments' own
    fields, collected values and context variables (secrets masked)."""
    return field_values(
        [state.secrets.scrub(r.data) for r in state.tool_results if r.error is None],
        [f for r in state.tool_results for f in r.fragments],
        state.secrets.scrub(state.collected_for()),
        state.variables(),
    )


def _tool_fragments(state: TurnState) -> list[Template]:
    """This turn's tool fragments as transient templates."""
    return merge_fragments([(r.tool, r.fragments) for r in state.tool_results if r.fragments])


def _canned_templates(state: TurnState, resolution: Resolution) -> list[Template]:
    """Tool fragments of this turn, then the agent's templates in scope (untagged, or tagged to
    a guideline, journey or step that applies), in the agent's default language: the model
    chooses among them by meaning in the language the agent is written in, as it reads its
    conditions, and the chosen one is sent in the session's language (`_in_language`)."""
    scope = {f"guideline:{g}" for g in resolution.guideline_ids}
    scope |= {journey_tag(j) for j in resolution.journey_ids}
    scope |= {
        f"node:{j}:{n}"
        for j, n in state.steps.items()
        if j in resolution.journey_ids and _may_speak_for(state, state.agent.journey(j).node(n))
    }
    scope |= {f"node:{j}:{n}" for j, n in state.performed_tool_steps}
    approved = [
        Template("", c.id, c.template)
        for c in state.agent.canned_responses
        if not c.tags or scope.intersection(c.tags)
    ]
    return _tool_fragments(state) + approved  # fragments first: they are specific to this turn


def _in_language(state: TurnState, chosen: Template, values: dict[str, str]) -> Template:
    """The chosen template in the session's language: its variant for it when it has one that
    can be filled, else the template itself (a tool fragment has no variants)."""
    if chosen.transient:
        return chosen
    canned = next((c for c in state.agent.canned_responses if c.id == chosen.source_id), None)
    if canned is None:
        return chosen
    variant = replace(chosen, text=canned.text_in(state.language))
    return variant if fillable([variant], values) else chosen


async def _compose_canned(
    state: TurnState, data: CompositionInput, resolution: Resolution, mode: CompositionMode
) -> tuple[str, list[str]]:
    strict = mode is CompositionMode.CANNED_STRICT
    values = _template_values(state)
    candidates = fillable(_canned_templates(state, resolution), values)
    candidates = candidates[: state.agent.config.max_canned_candidates]
    candidates = [
        Template(f"t{i}", t.source_id, t.text, t.transient) for i, t in enumerate(candidates, 1)
    ]
    if not candidates:
        if strict:
            state.trace.notes.append("canned_strict: no fillable template; sent the no-match reply")
            return state.line("no_match"), []
        return await _compose_fluid(state, data)
    prompt = build_canned_prompt(_reply_context(state), data, candidates, values, strict=strict)
    gen = await state.llm.generate(LLMPurpose.COMPOSE, prompt, CannedChoice, label=mode.value)
    choice = gen.value
    applied = applied_sources(data, ComposedReply(message="", applied=choice.applied))
    chosen = next((t for t in candidates if t.handle == choice.template), None)
    if chosen is not None:
        state.trace.notes.append(f"canned: sent template {chosen.source_id}")
        return render_template(_in_language(state, chosen, values), values), applied
    if strict or not choice.message.strip():
        state.trace.notes.append("canned: no template chosen; sent the no-match reply")
        return state.line("no_match"), applied
    return choice.message, applied
