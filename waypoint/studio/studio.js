// Waypoint studio: chat, sessions, turn inspector and journey graphs, read from the management
// API only (so it works against `waypoint serve` and a deployed stack alike).
//
// Everything the API returns is data written by customers, authors or a model: it is only ever
// put on the page as text (`textContent`), never as markup. The one exception, the graph's SVG,
// comes from our own renderer and is still parsed as SVG and stripped of anything active.
"use strict";

const studio = {
  base: "",
  key: "",
  keyFor: "", // the API the key was entered for: the only one it is sent to
  agent: "",
  chatSession: null,
  sessionsCursor: null,
  agents: new Map(), // "agent@version" → AgentView
  graphRoute: true, // false once the server answered 404: it has no graph route
};

// ---- small DOM helpers -------------------------------------------------------------------------

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (selector) => document.querySelector(selector);

function setStatus(text, isError) {
  const status = $("#status");
  status.textContent = text || "";
  status.classList.toggle("error", Boolean(isError));
}

function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

function ms(value) {
  return `${Math.round(Number(value) || 0)} ms`;
}

// ---- the API -----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    const problems = body && Array.isArray(body.problems) ? body.problems : [];
    const message = (body && body.error) || `HTTP ${status}`;
    super(problems.length ? `${message}: ${problems.join("; ")}` : message);
    this.status = status;
  }
}

// The key goes only to the API it was entered for (`studio.keyFor`): never to another base,
// whatever set it.
function keyHeaders() {
  return studio.key && studio.keyFor === studio.base ? { "X-Api-Key": studio.key } : {};
}

async function api(method, path, body) {
  const headers = keyHeaders();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(studio.base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (_) {
    // The browser hides why (CORS refusal, DNS, offline); name the usual cause on another origin.
    const crossOrigin = !studio.base.startsWith(location.origin);
    throw new Error(
      crossOrigin
        ? `cannot reach ${studio.base} from this page: is it up, and does it allow the origin ` +
            `${location.origin}? (deploy with StudioOrigins=${location.origin}; docs/studio.md)`
        : `cannot reach ${studio.base}: is the server still running?`,
    );
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (_) {
    data = { error: text.slice(0, 200) };
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

const enc = encodeURIComponent;

// ---- connection: base URL, key and agent from the fragment, the form, or this tab's storage ----
//
// A key belongs to the API it was entered for. The page is served for one API (`/api` on its own
// origin, or the one `waypoint studio --api` names, written into the page); a link or the form
// naming another one is asked about first, and never gets the key of the previous one. The
// page's Content-Security-Policy backs this: it can call no other API at all.

// The API this page was served for.
function configuredApi() {
  const meta = document.querySelector('meta[name="waypoint-api"]');
  return normalizedApi((meta && meta.content) || `${location.origin}/api`);
}

// `url` as an absolute http(s) base without a trailing slash, query or fragment; null if not one.
function normalizedApi(url) {
  const text = String(url || "").trim();
  if (!text) return null;
  let parsed;
  try {
    parsed = new URL(text, location.href);
  } catch (_) {
    return null;
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return null;
  return (parsed.origin + parsed.pathname).replace(/\/+$/, "");
}

function storedConnection() {
  try {
    const stored = JSON.parse(sessionStorage.getItem("waypoint-studio") || "{}");
    return stored && typeof stored === "object" ? stored : {};
  } catch (_) {
    return {};
  }
}

// Whether to leave `current` for `wanted`: the browser's own dialog, which no page content can
// imitate or answer.
function confirmSwitch(current, wanted) {
  return window.confirm(
    `This link points the studio at another management API:\n\n  ${wanted}\n\n` +
      `instead of\n\n  ${current}\n\nSwitch to it? The key you gave for ${current} ` +
      "is not sent there.",
  );
}

function readConnection() {
  const fragment = new URLSearchParams(location.hash.replace(/^#/, ""));
  const stored = storedConnection();
  const current = normalizedApi(stored.base) || configuredApi();
  // The stored key, only if it was entered for the API in use.
  let key = stored.keyFor === current ? String(stored.key || "") : "";
  let agent = String(stored.agent || "");
  let base = current;
  let followLink = true;
  // A link's key is for the link's API; a link with a key and no API means the configured one
  // (`waypoint serve` prints `/#key=…`).
  const linked = fragment.has("api")
    ? normalizedApi(fragment.get("api"))
    : fragment.has("key")
      ? configuredApi()
      : current;
  if (linked !== current) {
    followLink = Boolean(linked) && confirmSwitch(current, linked);
    if (followLink) {
      base = linked;
      key = "";
      agent = "";
    } else {
      setStatus(`stayed on ${current}: the link named another API (${linked || fragment.get("api")})`);
    }
  }
  if (followLink && fragment.has("key")) key = fragment.get("key"); // the link's key, for its API
  if (followLink && fragment.has("agent")) agent = fragment.get("agent");
  if (location.hash) {
    // Keep the key (and the API it goes with) out of the address bar and the history once read.
    history.replaceState(null, "", location.pathname + location.search);
  }
  studio.base = base;
  studio.key = key;
  studio.keyFor = base;
  studio.agent = agent;
  saveConnection();
  $("#api-base").value = studio.base;
  $("#api-key").value = studio.key;
  $("#agent-id").value = studio.agent;
}

// The form: another API than the one in use takes the key typed for it; the key still in the
// field (entered for the previous API) goes there only if the person says so.
function connectionFromForm() {
  const base = normalizedApi($("#api-base").value || configuredApi());
  if (!base) throw new Error("the API must be an http(s) address, e.g. http://127.0.0.1:8750/api");
  let key = $("#api-key").value;
  if (base !== studio.base && key && key === studio.key) {
    const send = window.confirm(
      `Send the key you entered for ${studio.base} to another API, ${base}?`,
    );
    if (!send) {
      key = "";
      $("#api-key").value = "";
    }
  }
  studio.base = base;
  studio.key = key;
  studio.keyFor = base;
  studio.agent = $("#agent-id").value.trim();
  $("#api-base").value = base;
  saveConnection();
}

function saveConnection() {
  sessionStorage.setItem(
    "waypoint-studio",
    JSON.stringify({ base: studio.base, key: studio.key, keyFor: studio.keyFor, agent: studio.agent }),
  );
}

// ---- views -------------------------------------------------------------------------------------

function show(view) {
  for (const section of document.querySelectorAll(".view")) {
    section.hidden = section.id !== `view-${view}`;
  }
  for (const tab of document.querySelectorAll("#tabs .tab")) {
    tab.classList.toggle("active", tab.dataset.view === view);
  }
  if (view === "sessions") loadSessions(true).catch(fail);
  if (view === "handoffs") loadHandoffs().catch(fail);
  if (view === "graphs") showGraphs().catch(fail);
}

function fail(error) {
  setStatus(error.message || String(error), true);
}

// ---- chat --------------------------------------------------------------------------------------

async function newChatSession() {
  const body = { customer_id: `studio-${crypto.randomUUID().slice(0, 8)}` };
  if (studio.agent) body.agent_id = studio.agent;
  const session = await api("POST", "/sessions", body);
  studio.chatSession = session.id;
  studio.agent = studio.agent || session.agent_id;
  $("#chat-session").textContent = `session ${session.id} · agent ${session.agent_id}`;
  $("#transcript").replaceChildren();
  setStatus("");
  return session;
}

function addLine(kind, text, extra) {
  const line = el("li", { class: kind }, text, extra || []);
  $("#transcript").append(line);
  line.scrollIntoView({ block: "nearest" });
  return line;
}

async function sendMessage(text, choice) {
  if (!studio.chatSession) await newChatSession();
  const sessionId = studio.chatSession;
  addLine("customer", text);
  const input = $("#chat-input");
  input.disabled = true;
  $("#chat-send").disabled = true;
  setStatus("the agent is answering…");
  try {
    const body = { text, event_id: crypto.randomUUID() };
    if (choice) body.choice = choice;
    const turn = await api("POST", `/sessions/${enc(sessionId)}/messages`, body);
    showReply(sessionId, turn);
    setStatus("");
    await afterChatTurn(sessionId, turn); // handoffs.js: a person's messages, while they have it
  } catch (error) {
    addLine("error", `the turn failed: ${error.message}`);
    fail(error);
  } finally {
    input.disabled = false;
    $("#chat-send").disabled = false;
    input.focus();
  }
}

function showReply(sessionId, turn) {
  const reply = turn.reply;
  const parts = [];
  const options = (reply && reply.options) || [];
  if (options.length) {
    const buttons = options.map((option) =>
      el("button", {
        type: "button",
        class: "option",
        "data-choice": option.id,
        text: option.label,
        onclick: (event) => {
          for (const b of event.target.parentElement.children) b.disabled = true;
          sendMessage(option.label, option.id);
        },
      }),
    );
    parts.push(el("div", { class: "options" }, buttons));
  }
  for (const action of viewActions(reply && reply.view)) {
    parts.push(el("div", { class: "actions" },
      el("a", { href: action.url, target: "_blank", rel: "noopener noreferrer", text: action.label })));
  }
  parts.push(el("span", { class: "meta" },
    el("a", {
      href: "#",
      class: "inspect",
      "data-turn": turn.turn_id,
      text: `inspect turn ${turn.turn_id}`,
      onclick: (event) => {
        event.preventDefault();
        openTurn(sessionId, turn.turn_id).catch(fail);
      },
    })));
  addLine("agent", reply ? reply.text || "" : "(no reply this turn)", parts);
}

// An interrupter's view (a form to open) as links: only http(s) addresses are ever linked.
function viewActions(view) {
  if (!view || typeof view !== "object") return [];
  const found = [];
  const add = (label, url) => {
    if (typeof url !== "string") return;
    let parsed;
    try {
      parsed = new URL(url, location.href);
    } catch (_) {
      return;
    }
    if (parsed.protocol === "http:" || parsed.protocol === "https:") {
      found.push({ label: String(label || "Open"), url: parsed.href });
    }
  };
  add(view.label || view.title || "Open the form", view.url || view.link || view.href);
  for (const action of Array.isArray(view.actions) ? view.actions : []) {
    if (action && typeof action === "object") add(action.label || action.title, action.url);
  }
  return found;
}

// ---- sessions ----------------------------------------------------------------------------------

async function loadSessions(reset) {
  if (reset) {
    studio.sessionsCursor = null;
    $("#sessions-table tbody").replaceChildren();
  }
  const query = new URLSearchParams({ limit: "25" });
  if (studio.agent) query.set("agent", studio.agent);
  if (studio.sessionsCursor) query.set("cursor", studio.sessionsCursor);
  const page = await api("GET", `/sessions?${query}`);
  for (const s of page.sessions) {
    $("#sessions-table tbody").append(el("tr", {
      class: "clickable",
      "data-session": s.session_id,
      onclick: () => openSession(s.session_id).catch(fail),
    },
    el("td", { text: s.session_id }), el("td", { text: s.agent_id }), el("td", { text: s.channel }),
    el("td", { text: when(s.last_activity) }), el("td", { text: s.mode }), el("td", { text: s.status }),
    el("td", { text: s.active_journeys.join(", ") || "—" }), el("td", { text: s.events })));
  }
  studio.sessionsCursor = page.cursor;
  $("#sessions-more").hidden = !page.cursor;
}

// A session's events in order, up to 2,000 (the API pages further).
async function sessionEvents(sessionId) {
  const events = [];
  let after = -1;
  for (let page = 0; page < 20; page++) {
    const batch = (await api("GET", `/sessions/${enc(sessionId)}/events?after=${after}`)).events;
    events.push(...batch);
    if (batch.length < 100) break;
    after = batch[batch.length - 1].offset;
  }
  return events;
}

async function openSession(sessionId) {
  const detail = $("#session-detail");
  detail.replaceChildren(el("p", { class: "muted", text: "loading…" }));
  const state = await api("GET", `/sessions/${enc(sessionId)}`);
  const events = await sessionEvents(sessionId);
  const turns = (await api("GET", `/sessions/${enc(sessionId)}/turns`)).turns;
  detail.replaceChildren(
    el("h2", { text: `Session ${state.id}` }),
    el("p", {}, `agent ${state.agent_id} (version ${state.agent_version || "—"}${state.pinned ? ", pinned" : ""}) · `,
      `channel ${state.channel} · ${state.events} events · journeys in flight: `,
      state.active_journeys.join(", ") || "none"),
    el("p", {}, state.mode === "human"
      ? el("a", { href: "#", id: "session-handoff", text: "With a person: open its handoff",
        onclick: (event) => { event.preventDefault(); show("handoffs"); openHandoff(sessionId).catch(fail); } })
      : handToPersonForm(sessionId)),
    el("h3", { text: "Turns" }),
    el("table", { id: "turns-table" },
      el("thead", {}, el("tr", {}, el("th", { text: "Turn" }), el("th", { text: "Time" }),
        el("th", { text: "Customer said" }))),
      el("tbody", {}, turns.map((t) => el("tr", {
        class: "clickable", "data-turn": t.turn_id,
        onclick: () => openTurn(sessionId, t.turn_id).catch(fail),
      }, el("td", { text: t.turn_id }), el("td", { text: when(t.at) }),
      el("td", { text: t.customer_text || "" }))))),
    el("h3", { text: "Events" }),
    el("div", { id: "events" }, events.map((e) => el("div", { class: "event" },
      el("span", { class: "muted", text: `#${e.offset} ${when(e.created_at)} ${e.source} ${e.kind} ` }),
      e.text || (Object.keys(e.data || {}).length ? JSON.stringify(e.data) : ""),
      e.turn_id ? el("span", { class: "muted", text: ` · ${e.turn_id}` }) : null))),
  );
}

// ---- wiring ------------------------------------------------------------------------------------

function start() {
  readConnection();
  for (const tab of document.querySelectorAll("#tabs .tab")) {
    tab.addEventListener("click", () => show(tab.dataset.view));
  }
  $("#connection").addEventListener("submit", (event) => {
    event.preventDefault();
    try {
      connectionFromForm();
    } catch (error) {
      fail(error);
      return;
    }
    connect().catch(fail);
  });
  $("#chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("#chat-input").value.trim();
    if (!text) return;
    $("#chat-input").value = "";
    sendMessage(text).catch(fail);
  });
  $("#chat-reset").addEventListener("click", resetChat);
  $("#sessions-refresh").addEventListener("click", () => loadSessions(true).catch(fail));
  $("#sessions-more").addEventListener("click", () => loadSessions(false).catch(fail));
  // A link with a new fragment (another key; another stack, asked about first) reconnects
  // without a reload.
  window.addEventListener("hashchange", () => {
    if (!location.hash) return;
    readConnection();
    connect().catch(fail);
  });
  show("chat");
  connect().catch(fail);
}

// Check the key with one cheap read (and learn the served agent from it); the chat's session is
// made with the first message, so opening the page leaves no empty session behind.
async function connect() {
  studio.agents.clear();
  studio.graphRoute = true;
  resetChat();
  if (!studio.key) {
    setStatus("Enter the management API key (waypoint serve prints it) and connect.");
    return;
  }
  const query = new URLSearchParams({ limit: "1" });
  if (studio.agent) query.set("agent", studio.agent);
  const page = await api("GET", `/sessions?${query}`);
  if (!studio.agent && page.sessions.length) studio.agent = page.sessions[0].agent_id;
  setStatus(`connected to ${studio.base}`);
}

function resetChat() {
  studio.chatSession = null;
  if (typeof resetChatHandoff === "function") resetChatHandoff(); // handoffs.js, loaded after
  $("#transcript").replaceChildren();
  $("#chat-session").textContent = "a new session starts with your first message";
}

start();
