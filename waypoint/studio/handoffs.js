// Waypoint studio: human handoff. The sessions handed to a person (GET /handoffs), and for one of
// them what a person does: take it, write to the customer, hand it back to the agent. A session
// someone else has is refused by the API with who has it (409); the page then offers to take it
// over, which the API records. The chat shows a person's messages while its session is with one.
//
// Loaded after studio.js: it uses its helpers (el, $, api, enc, when, sessionEvents, setStatus,
// fail, show, addLine) and its state (`studio`). Everything from the API is put on the page as text.
"use strict";

const handoffs = {
  open: null, // the session whose handoff is shown
  polling: false, // a chat poll is in flight
  turn: Promise.resolve(), // the last of the actions and redraws, which run one at a time
  seen: -1, // the open session's last event offset on the page
  polls: 0,
  pending: null, // {session, text, id}: a message whose send failed keeps its event id for a retry
  chatPolled: -1, // the chat session's last event offset read by the person-message poll
  chatWithPerson: false, // the chat's session is handed off: poll for a person's messages
};
const PERSON_KEY = "waypoint-studio-person";
const POLL_MS = 3000;
const LIST_EVERY = 4;

function person() {
  const name = $("#handoff-person").value.trim();
  if (!name) throw new Error("enter your name first (Handoffs: “You”): the API records who acts");
  localStorage.setItem(PERSON_KEY, name);
  return name;
}

// ---- the list ----------------------------------------------------------------------------------

async function loadHandoffs() {
  const query = new URLSearchParams();
  if (studio.agent) query.set("agent_id", studio.agent);
  const status = $("#handoff-status").value;
  if (status) query.set("status", status);
  const listed = (await api("GET", `/handoffs?${query}`)).sessions;
  $("#handoffs-table tbody").replaceChildren(
    ...listed.map((h) => el("tr", {
      class: "clickable",
      "data-session": h.session_id,
      onclick: () => openHandoff(h.session_id).catch(fail),
    },
    el("td", { text: h.session_id }), el("td", { text: h.channel }),
    el("td", { text: h.customer_id }), el("td", { class: `handoff-${h.status}`, text: h.status }),
    el("td", { text: h.assignee || "—" }), el("td", { text: h.reason }),
    el("td", { text: when(h.since) }))),
  );
  $("#handoffs-empty").hidden = listed.length > 0;
}

// ---- one session -------------------------------------------------------------------------------

// Show a session's handoff (from the list, Sessions or a hand-over), in turn with the rest.
function openHandoff(sessionId) {
  return oneAtATime(() => drawHandoff(sessionId));
}

async function drawHandoff(sessionId) {
  handoffs.open = sessionId;
  const state = await api("GET", `/sessions/${enc(sessionId)}`);
  const events = await sessionEvents(sessionId); // studio.js
  const messages = events.filter((e) => e.kind === "message" || isHandoffStatus(e));
  handoffs.seen = events.length ? events[events.length - 1].offset : -1;
  const h = state.handoff;
  const detail = $("#handoff-detail");
  const withPerson = state.mode === "human" && h;
  detail.replaceChildren(
    el("h2", { text: `Session ${state.id}` }),
    el("p", { id: "handoff-summary" }, withPerson
      ? [`${h.assignee ? `with ${h.assignee}` : "waiting for a person"} · why: ${h.reason} · `,
        `since ${when(h.since)} · channel ${state.channel}, customer ${state.customer_id}`]
      : `with the agent (not handed off) · channel ${state.channel}`),
    el("ol", { id: "handoff-conversation", class: "conversation" },
      messages.map((e) => conversationLine(e))),
    withPerson ? handoffActions(sessionId, h) : handToPersonForm(sessionId),
    el("p", { id: "handoff-result", class: "muted" }),
  );
  const last = $("#handoff-conversation li:last-child");
  if (last) last.scrollIntoView({ block: "nearest" });
}

function isHandoffStatus(event) {
  const status = event.kind === "status" && event.data && event.data.status;
  return status === "mode_changed" || status === "handoff_taken" || status === "handoff_ticket";
}

function conversationLine(event) {
  if (event.kind !== "message") {
    return el("li", { class: "note", text: statusText(event.data) });
  }
  const who = event.source === "human" ? (event.data && event.data.person) || "a person" : event.source;
  return el("li", { class: event.source },
    el("span", { class: "who", text: `${who} · ${when(event.created_at)}` }), event.text || "");
}

function statusText(data) {
  if (data.status === "mode_changed") {
    const why = data.why ? ` (${data.why})` : "";
    return data.mode === "human"
      ? `handed to a person by ${data.by}${why}`
      : `handed back to the agent by ${data.by}${why}`;
  }
  if (data.status === "handoff_taken") {
    return data.from ? `${data.by} took it over from ${data.from}` : `${data.by} took it`;
  }
  return `ticket ${data.ticket_id || ""}`.trim();
}

function handoffActions(sessionId, h) {
  const text = el("textarea", { id: "handoff-text", rows: 3, maxlength: 4000,
    placeholder: "Write to the customer as yourself…" });
  const note = el("input", { id: "handoff-note", size: 30, maxlength: 500,
    placeholder: "note for the agent (optional)" });
  return el("div", { class: "handoff-actions" },
    el("div", { class: "toolbar" },
      h.assignee ? null : el("button", { id: "handoff-take", type: "button", text: "Take it",
        onclick: () => act(sessionId, "take", {}).catch(fail) }),
      note,
      el("button", { id: "handoff-release", type: "button", text: "Hand back to the agent",
        onclick: () => act(sessionId, "release", { note: note.value.trim() }).catch(fail) })),
    el("form", { id: "handoff-form", onsubmit: (event) => {
      event.preventDefault();
      sendAsPerson(sessionId, text).catch(fail);
    } }, text, el("button", { id: "handoff-send", type: "submit", text: "Send" })));
}

function handToPersonForm(sessionId) {
  const reason = el("input", { class: "handoff-reason", size: 40, maxlength: 500,
    "aria-label": "why", value: "taken over from the studio" });
  return el("div", { class: "toolbar" }, reason,
    el("button", { class: "handoff-start", type: "button", text: "Hand to a person",
      onclick: () => handToPerson(sessionId, reason.value.trim()).catch(fail) }));
}

// The open session drawn again with what was typed, and what the last action said, kept (a
// poll found news, or a refusal).
async function refreshHandoff() {
  const sessionId = handoffs.open;
  const kept = {};
  for (const id of ["handoff-text", "handoff-note"]) {
    const box = document.getElementById(id);
    if (box) kept[id] = box.value;
  }
  const said = [...$("#handoff-result").childNodes]; // moved back with their listeners
  const focused = document.activeElement && document.activeElement.id;
  await drawHandoff(sessionId);
  for (const [id, value] of Object.entries(kept)) {
    const box = document.getElementById(id);
    if (box) box.value = value;
  }
  $("#handoff-result").replaceChildren(...said);
  if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
}

// While the view is open: the shown session follows what the customer and colleagues do, and
// the list follows new handoffs (every POLL_MS, the list every LIST_EVERY polls).
async function pollHandoffs() {
  if (handoffs.open) {
    await oneAtATime(async () => {
      const sessionId = handoffs.open;
      const news = (await api("GET",
        `/sessions/${enc(sessionId)}/events?after=${handoffs.seen}`)).events;
      if (news.length && sessionId === handoffs.open) await refreshHandoff();
    });
  }
  handoffs.polls = (handoffs.polls + 1) % LIST_EVERY;
  if (handoffs.polls === 0) await loadHandoffs();
}

// Actions and redraws of the open session run one after another, so a poll's redraw never
// lands between an action's redraw and what it reports (nor throws away what was just typed).
function oneAtATime(task) {
  const run = handoffs.turn.then(task, task);
  handoffs.turn = run.catch(() => {});
  return run;
}

// take / release / messages, with the 409 "someone else has it" turned into a take-over offer.
// `report(result)` says on the page what the action did, in the same turn as its redraw.
function act(sessionId, action, body, takeOver, report) {
  return oneAtATime(async () => {
    const payload = { ...body, person: person() };
    if (takeOver) payload.take_over = true;
    let result;
    try {
      result = await api("POST", `/sessions/${enc(sessionId)}/handoff/${action}`, payload);
    } catch (error) {
      if (error.status !== 409 || takeOver) throw error;
      await refreshHandoff(); // who has it now, and what happened meanwhile
      offerTakeOver(error.message, () => act(sessionId, action, body, true, report));
      return;
    }
    setStatus("");
    await Promise.all([drawHandoff(sessionId), loadHandoffs()]);
    if (report) report(result);
  });
}

function offerTakeOver(message, retry) {
  setStatus(message, true); // the API's words, naming who has it
  $("#handoff-result").replaceChildren(
    el("span", { text: "Someone else has this session now (see above). " }),
    el("button", { id: "handoff-take-over", type: "button", text: "Take it over",
      onclick: () => retry().catch(fail) }));
}

async function sendAsPerson(sessionId, box) {
  const text = box.value.trim();
  if (!text) return;
  // The same words sent again after a failure reuse the event id: the API records them once.
  const same = handoffs.pending && handoffs.pending.session === sessionId
    && handoffs.pending.text === text;
  handoffs.pending = same ? handoffs.pending : { session: sessionId, text, id: crypto.randomUUID() };
  // Refused (409): the take-over offer is on the page, with the text kept for it.
  await act(sessionId, "messages", { text, event_id: handoffs.pending.id }, false, (sent) => {
    handoffs.pending = null;
    $("#handoff-result").textContent = sent.delivery === "queued"
      ? "sent: the worker delivers it on the customer's channel"
      : `recorded, not sent: ${sent.delivery_error}`;
  });
}

async function handToPerson(sessionId, reason) {
  await api("POST", `/sessions/${enc(sessionId)}/handoff`,
    { reason: reason || "taken over from the studio", by: person() });
  if (sessionId === studio.chatSession) handoffs.chatWithPerson = true;
  show("handoffs");
  await openHandoff(sessionId);
}

// ---- the chat, while its session is with a person ----------------------------------------------

// After each chat turn (studio.js): a turn that handed off, or that a person's session left
// unanswered, starts the poll for the person's messages.
async function afterChatTurn(sessionId, turn) {
  for (const e of turn.events || []) {
    if (e.kind === "status" && e.data && e.data.status === "mode_changed") {
      handoffs.chatWithPerson = e.data.mode === "human";
    }
  }
  if (!turn.reply) {
    const state = await api("GET", `/sessions/${enc(sessionId)}`);
    handoffs.chatWithPerson = state.mode === "human";
    if (handoffs.chatWithPerson) {
      addLine("note", state.handoff && state.handoff.assignee
        ? `${state.handoff.assignee} has this conversation: the agent does not answer`
        : "waiting for a person: the agent does not answer");
    }
  }
  if (handoffs.chatWithPerson) await pollChat();
}

async function pollChat() {
  const sessionId = studio.chatSession;
  if (!sessionId || !handoffs.chatWithPerson || handoffs.polling) return;
  handoffs.polling = true;
  try {
    const events = (await api("GET",
      `/sessions/${enc(sessionId)}/events?after=${handoffs.chatPolled}`)).events;
    if (sessionId !== studio.chatSession) return;
    for (const e of events) {
      handoffs.chatPolled = Math.max(handoffs.chatPolled, e.offset);
      if (e.kind === "message" && e.source === "human") {
        addLine("person", e.text || "",
          el("span", { class: "meta", text: (e.data && e.data.person) || "a person" }));
      } else if (isHandoffStatus(e)) {
        if (e.data.status === "mode_changed") handoffs.chatWithPerson = e.data.mode === "human";
        addLine("note", statusText(e.data));
      }
    }
  } finally {
    handoffs.polling = false;
  }
}

function resetChatHandoff() {
  handoffs.chatPolled = -1;
  handoffs.chatWithPerson = false;
}

// ---- wiring ------------------------------------------------------------------------------------

function startHandoffs() {
  $("#handoff-person").value = localStorage.getItem(PERSON_KEY) || "";
  $("#handoffs-refresh").addEventListener("click", () => loadHandoffs().catch(fail));
  $("#handoff-status").addEventListener("change", () => loadHandoffs().catch(fail));
  setInterval(() => {
    // Errors are left to the next action, which reports them: a poll never paints the status.
    if (!$("#view-chat").hidden) pollChat().catch(() => {});
    if (!$("#view-handoffs").hidden && studio.key) pollHandoffs().catch(() => {});
  }, POLL_MS);
}

startHandoffs();
