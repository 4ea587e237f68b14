// Waypoint studio: the turn inspector and the journey graphs. Loaded before studio.js, whose
// helpers (`el`, `api`, `table` … all rendering data as text) these functions call.
"use strict";

// ---- turn inspector ----------------------------------------------------------------------------

async function agentView(agentId, version) {
  const cacheKey = `${agentId}@${version || ""}`;
  if (!studio.agents.has(cacheKey)) {
    const query = version ? `?version=${enc(version)}` : "";
    studio.agents.set(cacheKey, await api("GET", `/agents/${enc(agentId)}${query}`));
  }
  return studio.agents.get(cacheKey);
}

function table(headers, rows, rowProps) {
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows.map((cells, i) => el("tr", rowProps ? rowProps(i) : {},
      cells.map((c) => el("td", {}, c))))));
}

async function openTurn(sessionId, turnId) {
  show("inspector");
  const root = $("#inspector");
  root.replaceChildren(el("p", { class: "muted", text: "loading…" }));
  const trace = await api("GET", `/sessions/${enc(sessionId)}/traces/${enc(turnId)}`);
  let agent = null;
  try {
    agent = await agentView(trace.agent_id, trace.agent_version);
  } catch (_) {
    agent = null; // the version may be gone; ids are shown instead of conditions
  }
  const guidelines = new Map(((agent && agent.definition.guidelines) || []).map((g) => [g.id, g]));
  const sections = [
    el("h2", { text: `Turn ${trace.turn_id}` }),
    el("p", {}, `session ${trace.session_id} · agent ${trace.agent_id} version ${trace.agent_version}`,
      trace.version_choice ? ` (${trace.version_choice})` : "",
      ` · ${trace.llm_calls.length} LLM calls in ${trace.llm_rounds} rounds`,
      trace.composition_mode ? ` · composed ${trace.composition_mode}` : ""),
    turnCost(trace.llm_calls),
  ];
  sections.push(el("h3", { text: "Stages" }), stagesTable(trace.stages));
  sections.push(el("h3", { text: "Recall" }), el("p", { id: "recall" },
    `likely journeys: ${trace.high_probability_journeys.join(", ") || "none"}; `,
    `held back (not matched, top-k): ${trace.held_back_guideline_ids.join(", ") || "nothing"}`));
  sections.push(el("h3", { text: "Guidelines evaluated" }), el("div", { id: "guidelines" },
    table(["Guideline", "When", "Then", "Batch", "Verdict", "Rationale"],
      trace.matches.map((m) => {
        const g = guidelines.get(m.guideline_id) || projected(agent, m.guideline_id);
        return [m.guideline_id, g.condition || "", g.action || "", m.batch,
          el("span", { class: m.matched ? "verdict-yes" : "verdict-no",
            text: m.matched ? `matched (${m.score})` : `not matched (${m.score})` }),
          m.rationale];
      }),
      (i) => ({ class: trace.matches[i].matched ? "matched" : "", "data-guideline": trace.matches[i].guideline_id }))));
  sections.push(el("p", {}, `applied: ${trace.applied_guideline_ids.join(", ") || "none"}`));
  sections.push(el("h3", { text: "Relationships applied" }), trace.relations.length
    ? table(["Kind", "Source", "Target", "Effect"], trace.relations.map((r) => [r.kind, r.source, r.target, r.effect]))
    : el("p", { class: "muted", text: "none" }));
  sections.push(el("h3", { text: "Journeys" }), el("div", { id: "journeys" }));
  sections.push(el("h3", { text: "Tool calls" }), el("div", { id: "tool-calls" }, trace.tool_calls.length
    ? trace.tool_calls.map(toolCallBlock)
    : el("p", { class: "muted", text: "none" })));
  if (Object.keys(trace.collected).length) {
    sections.push(el("h3", { text: "Collected" }),
      table(["Field", "Value"], Object.entries(trace.collected).map(([k, v]) => [k, v])));
  }
  sections.push(el("h3", { text: "LLM calls" }), el("div", { id: "llm-calls" }, trace.llm_calls.map(llmCallBlock)));
  if (trace.notes.length) {
    sections.push(el("h3", { text: "Notes" }), el("ul", {}, trace.notes.map((n) => el("li", { text: n }))));
  }
  root.replaceChildren(...sections);
  const journeys = $("#journeys");
  if (!trace.journeys.length) journeys.append(el("p", { class: "muted", text: "no journey moved" }));
  for (const t of trace.journeys) journeys.append(await journeyBlock(trace, t));
}

// What a journey's start or step, judged like a guideline (`journey:{id}:condition:{i}`,
// `journey:{id}:node:{step}`), holds on and asks for, from the agent's definition.
function projected(agent, guidelineId) {
  const found = /^journey:(.+):(condition|node):([^:]+)$/.exec(guidelineId);
  const journeys = (agent && agent.definition.journeys) || [];
  const journey = found && journeys.find((j) => j.id === found[1]);
  if (!journey) return {};
  if (found[2] === "condition") {
    return { condition: (journey.conditions || [])[Number(found[3])] || "", action: `start ${journey.title || journey.id}` };
  }
  const step = (journey.states || []).find((n) => n.id === found[3]) || {};
  const does = step.chat || step.action || (step.tool ? `run ${step.tool}` : "");
  return { condition: `${journey.title || journey.id} is at step ${found[3]}`, action: does };
}

function stagesTable(stages) {
  const longest = Math.max(1, ...stages.map((s) => s.ms));
  return table(["Stage", "Time", ""], stages.map((s) => [s.stage, ms(s.ms),
    el("span", { class: "bar", style: `width:${Math.round((200 * s.ms) / longest)}px` })]));
}

function toolCallBlock(call) {
  return el("div", { class: "tool-call", "data-tool": call.tool },
    el("h4", {}, `${call.tool} → `, el("span", { class: `status-${call.status}`, text: call.status }),
      ` in ${ms(call.duration_ms)}`),
    table(["Argument", "Value"], Object.entries(call.arguments).map(([k, v]) =>
      [k, typeof v === "string" ? v : JSON.stringify(v)])),
    call.sources.length ? el("ul", { class: "sources" },
      call.sources.map((s) => el("li", { text: `grounded: ${s}` }))) : null,
    call.detail ? el("pre", { class: "detail", text: call.detail }) : null);
}

// Dollars as the trace records them (engine/pricing.py): null is a model with no price, shown as
// unknown, never as free.
function dollars(value) {
  return value === null || value === undefined ? "cost unknown" : `$${Number(value).toFixed(5)}`;
}

function turnCost(calls) {
  const prompt = calls.reduce((n, c) => n + (c.prompt_tokens || 0), 0);
  const cached = calls.reduce((n, c) => n + (c.cached_prompt_tokens || 0), 0);
  const completion = calls.reduce((n, c) => n + (c.completion_tokens || 0), 0);
  const unpriced = [...new Set(calls.filter((c) => c.cost_usd === null || c.cost_usd === undefined).map((c) => c.model))];
  const total = unpriced.length ? null : calls.reduce((n, c) => n + c.cost_usd, 0);
  return el("p", { id: "turn-cost" },
    `cost: ${dollars(total)}${unpriced.length ? ` (no price for ${unpriced.join(", ")})` : ""}`,
    ` · ${prompt} prompt tokens (${cached} cached) + ${completion} completion tokens`);
}

function llmCallBlock(call) {
  return el("details", { class: "llm-call" },
    el("summary", {}, `round ${call.round} · ${call.purpose}${call.label ? ` (${call.label})` : ""}`,
      ` → ${call.schema_name} on ${call.model} · ${call.prompt_tokens}+${call.completion_tokens} tokens`,
      call.cached_prompt_tokens ? ` (${call.cached_prompt_tokens} cached)` : "",
      call.cache_write_tokens ? ` (${call.cache_write_tokens} written to cache)` : "",
      ` · ${dollars(call.cost_usd)}`,
      ` · ${ms(call.latency_ms)}${call.attempts > 1 ? ` · ${call.attempts} attempts` : ""}`,
      call.error ? ` · error: ${call.error}` : ""),
    el("h4", { text: "Prompt" }),
    el("pre", { class: "prompt", text: call.prompt || "(not recorded)" }),
    el("h4", { text: "Answer" }),
    el("pre", { class: "answer", text: call.answer || "(not recorded)" }));
}

async function journeyBlock(trace, t) {
  const previous = t.previous_path.filter((n) => n !== null);
  const kept = t.new_path.slice(t.previous_path.length).filter((n) => n !== null);
  const block = el("div", { class: "journey", "data-journey": t.journey_id },
    el("h4", { text: `${t.journey_id}: ${t.how} → ${t.node_id || "—"}` }),
    el("p", {}, `path: ${t.new_path.map((n) => n || "(end)").join(" → ") || "—"}`),
    t.proposed && t.proposed.length ? el("p", { text: `the model proposed: ${t.proposed.join(" → ")}` }) : null,
    kept.length ? el("p", { text: `verification kept: ${kept.join(" → ")}` }) : null,
    t.repairs.map((r) => el("p", { class: "muted", text: `repaired: ${r}` })),
    t.rationale ? el("p", { class: "muted", text: `reason: ${t.rationale}` }) : null,
    el("div", { class: "legend" }, el("span", { text: "current step: red outline" }),
      el("span", { text: "proposed by the model: orange dashes" }), el("span", { text: "kept by verification: green" })));
  const holder = el("div", { class: "graph", "data-graph": t.journey_id });
  block.append(holder);
  const params = { version: trace.agent_version, journey: t.journey_id };
  if (t.node_id) params.current = t.node_id;
  if (t.proposed && t.proposed.length) params.proposed = t.proposed.join(",");
  if (kept.length) params.kept = kept.join(",");
  else if (previous.length && !t.node_id) params.kept = previous.join(",");
  await fillGraph(holder, trace.agent_id, params);
  return block;
}

// ---- graphs ------------------------------------------------------------------------------------

async function fillGraph(holder, agentId, params) {
  if (!studio.graphRoute) {
    holder.append(el("p", { class: "muted", text: "this server has no graph route" }));
    return;
  }
  const query = new URLSearchParams({ format: "svg", ...params });
  const response = await fetch(`${studio.base}/agents/${enc(agentId)}/graph?${query}`, {
    headers: keyHeaders(), // studio.js: only to the API the key was entered for
  });
  if (response.status === 404 && !response.headers.get("content-type")?.includes("json")) {
    studio.graphRoute = false;
  }
  if (!response.ok) {
    const text = await response.text();
    let message = `HTTP ${response.status}`;
    try { message = JSON.parse(text).error || message; } catch (_) { /* not JSON */ }
    if (response.status === 404 && /not found/i.test(message)) studio.graphRoute = false;
    holder.append(el("p", { class: "muted", text: `no graph: ${message}` }));
    return;
  }
  const svg = safeSvg(await response.text());
  holder.append(svg || el("p", { class: "muted", text: "the graph could not be read" }));
}

// Our renderer's SVG, parsed as SVG (never as HTML) and stripped of anything that could run.
function safeSvg(text) {
  const parsed = new DOMParser().parseFromString(text, "image/svg+xml");
  const root = parsed.documentElement;
  if (!root || root.nodeName !== "svg" || parsed.getElementsByTagName("parsererror").length) return null;
  for (const bad of root.querySelectorAll("script, foreignObject, iframe, object, embed, use")) bad.remove();
  for (const node of [root, ...root.querySelectorAll("*")]) {
    for (const attr of [...node.attributes]) {
      const name = attr.name.toLowerCase();
      const value = attr.value.trim().toLowerCase();
      if (name.startsWith("on") || ((name === "href" || name.endsWith(":href")) && !value.startsWith("#"))) {
        node.removeAttribute(attr.name);
      }
    }
  }
  return document.importNode(root, true);
}

async function showGraphs() {
  const root = $("#graphs");
  if (!studio.agent) {
    await newChatSession(); // learns the served agent's id
  }
  const agent = await agentView(studio.agent, null);
  root.replaceChildren(el("h2", { text: `${agent.name} (${agent.id}) version ${agent.version}` }));
  const byId = new Map(agent.definition.journeys.map((j) => [j.id, j]));
  for (const journeyId of agent.journeys) {
    const journey = byId.get(journeyId) || {};
    const holder = el("div", { class: "graph", "data-graph": journeyId });
    const requires = Array.isArray(journey.requires) ? journey.requires : [];
    // Element.append writes null as the text "null": only real nodes go in.
    root.append(...[el("h3", { text: `${journey.title || journeyId} (${journeyId})` }),
      requires.length ? el("p", { class: "muted", text: `requires: ${requires.join(", ")}` }) : null,
      holder].filter(Boolean));
    await fillGraph(holder, agent.id, { version: agent.version, journey: journeyId });
  }
}
