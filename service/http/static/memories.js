// The memories list of a user: cards with every field, edit / invalidate / restore / forget, and
// the history table of one memory.
//
// Safety rule for every module of the inspector: data from the API (memory content, ids, reasons,
// cues, errors) is only ever written with textContent / text nodes / form values / numeric SVG
// attributes, never parsed as HTML. There is no innerHTML, insertAdjacentHTML, document.write or
// eval, and no data goes into an href or src (the one link, Flower's, is the server's setting and
// is shown only when it is an http(s) URL). The Content-Security-Policy admits only these scripts
// and the stylesheet.

import { $, ApiError, api, append, clearError, el, fieldRow, memoryPath, notify, num, request, seg, showError, state, when } from "./dom.js";
import { userZone } from "./zones.js";

export const PAGE_SIZE = 50;
const CURRENT = "pending,active,superseded,archived,expired"; // everything but forgotten
const EDITABLE = new Set(["active", "archived", "superseded", "expired"]);
const INVALIDATABLE = new Set(["active", "archived"]);
const RESTORABLE = new Set(["archived", "superseded", "expired", "forgotten"]);
// The listed user's zone (the API's user_offset_s): every time of the cards and the history.
let zone = userZone(null);

// --- memories ----------------------------------------------------------------------------------

function statusParam() {
  const chosen = $("status-filter").value;
  return chosen === "current" ? CURRENT : chosen;
}

export async function loadMemories() {
  if (!state.user) return;
  clearError();
  const list = $("memory-list");
  const ticket = ++state.listing;
  list.setAttribute("aria-busy", "true");
  try {
    const page = await api("GET", `users/${seg(state.user)}/memories`, {
      params: { status: statusParam(), type: $("type-filter").value, limit: PAGE_SIZE, offset: state.offset },
    });
    if (ticket !== state.listing) return;
    if (page.items.length === 0 && state.offset > 0 && page.total > 0) {
      state.offset = Math.max(0, state.offset - PAGE_SIZE); // the last page emptied: step back
      return loadMemories();
    }
    state.total = page.total;
    zone = userZone(page.user_offset_s);
    list.replaceChildren(...page.items.map(memoryCard));
    const first = page.items.length ? state.offset + 1 : 0;
    $("memory-count").textContent = page.total
      ? `${first}–${state.offset + page.items.length} of ${page.total} memories`
      : "No memories match these filters.";
    $("memory-zone").textContent = `Times in ${zone.label}, the user's zone (the offset of their latest turn).`;
    $("prev-page").disabled = state.offset === 0;
    $("next-page").disabled = state.offset + page.items.length >= page.total;
  } catch (err) {
    if (ticket !== state.listing) return;
    list.replaceChildren();
    $("memory-count").textContent = "";
    $("memory-zone").textContent = "";
    showError(err);
  } finally {
    if (ticket === state.listing) list.setAttribute("aria-busy", "false");
  }
}

function sourceItem(source) {
  const parts = [];
  if (source.session_id) parts.push(`session ${source.session_id}`);
  if (source.seq !== undefined && source.seq !== null) parts.push(`#${source.seq}`);
  if (source.at) parts.push(`at ${when(source.at, zone)}`);
  return el(
    "li",
    {},
    parts.join(" "),
    source.event_id ? el("span", { class: "hint mono", text: ` event ${source.event_id}` }) : null,
  );
}

// What a memory's card and its page both open with: its badges and its text.
export function memoryHead(m) {
  return [memoryBadges(m), el("p", { class: "content", text: m.content })];
}

// The first facts of a memory's card and of its page: the time it held, in ``zone``.
export function validityRows(m, zone) {
  return [
    fieldRow("valid from", when(m.valid_from, zone), "valid-from"),
    fieldRow("valid to", when(m.valid_to, zone), "valid-to"),
  ];
}

// A memory's type, status, score, importance and uses.
function memoryBadges(m) {
  return el(
    "div",
    { class: "badges" },
    el("span", { class: "badge type", text: m.type }),
    el("span", { class: `badge status status-${m.status}`, text: m.status }),
    el("span", { class: "metric", text: `score ${num(m.score)}` }),
    el("span", { class: "metric", text: `importance ${num(m.importance)}` }),
    el("span", { class: "metric", text: `used ${m.access_count}×` }),
  );
}

function memoryCard(m) {
  const errorSlot = el("div", { class: "error card-error", role: "alert", hidden: true });
  const panel = el("div", { class: "card-panel" });
  const card = el(
    "article",
    { class: `memory status-${m.status}`, dataset: { id: m.id, status: m.status } },
    memoryHead(m),
    el(
      "dl",
      { class: "facts" },
      validityRows(m, zone),
      fieldRow("created", when(m.created_at, zone), "created"),
      fieldRow("updated", when(m.updated_at, zone)),
      m.tags.length ? fieldRow("tags", m.tags.join(", ")) : null,
      m.entities.length ? fieldRow("entities", m.entities.join(", ")) : null,
      m.slot ? fieldRow("slot", m.slot) : null,
      m.status_reason ? fieldRow("status reason", m.status_reason, "status-reason") : null,
      m.superseded_by ? fieldRow("superseded by", m.superseded_by, "mono") : null,
      m.due_at ? fieldRow("due", when(m.due_at, zone), "due") : null,
      fieldRow("id", m.id, "mono"),
    ),
    el(
      "details",
      { class: "sources" },
      el("summary", { text: `sources (${m.sources.length})` }),
      el("ul", {}, m.sources.map(sourceItem)),
    ),
    el(
      "div",
      { class: "actions row" },
      el("button", { type: "button", class: "act-page", onclick: () => request("open-memory", m.id) }, "Page"),
      el("button", { type: "button", class: "act-history", onclick: () => openHistory(m.id, { reveal: true }) }, "History"),
      EDITABLE.has(m.status)
        ? el("button", { type: "button", class: "act-edit", onclick: () => editPanel(m, panel, errorSlot) }, "Edit")
        : null,
      INVALIDATABLE.has(m.status)
        ? el(
            "button",
            { type: "button", class: "act-invalidate", onclick: () => invalidatePanel(m, panel, errorSlot) },
            "Invalidate",
          )
        : null,
      RESTORABLE.has(m.status)
        ? el("button", { type: "button", class: "act-restore", onclick: () => restore(m, errorSlot) }, "Restore")
        : null,
      m.status !== "forgotten" && m.status !== "pending" // pending: still the pipeline's (409)
        ? el("button", { type: "button", class: "act-forget", onclick: () => forgetPanel(m, panel, errorSlot) }, "Forget")
        : null,
    ),
    panel,
    errorSlot,
  );
  return card;
}

async function act(errorSlot, run, done) {
  clearError(errorSlot);
  try {
    await run();
  } catch (err) {
    showError(err, errorSlot);
    return;
  }
  notify(done);
  await loadMemories();
  if (state.historyOf) await openHistory(state.historyOf);
}

function editPanel(m, panel, errorSlot) {
  const text = el("textarea", { class: "edit-content", rows: 3, "aria-label": "new content", value: m.content });
  const save = () =>
    act(
      errorSlot,
      () => api("PATCH", memoryPath(m.id), { body: { content: text.value } }),
      `Memory ${m.id} edited.`,
    );
  panel.replaceChildren(
    el(
      "form",
      { class: "edit-form", onsubmit: (e) => { e.preventDefault(); save(); } },
      text,
      el(
        "div",
        { class: "row" },
        el("button", { type: "submit", class: "save-edit" }, "Save"),
        el("button", { type: "button", onclick: () => panel.replaceChildren() }, "Cancel"),
      ),
    ),
  );
  text.focus();
}

function invalidatePanel(m, panel, errorSlot) {
  const reason = el("input", { type: "text", class: "invalidate-reason", "aria-label": "reason", placeholder: "why it is no longer true" });
  const confirm = () =>
    act(
      errorSlot,
      () => api("POST", memoryPath(m.id, "/invalidate"), { body: { reason: reason.value } }),
      `Memory ${m.id} invalidated.`,
    );
  panel.replaceChildren(
    el(
      "form",
      { class: "invalidate-form row", onsubmit: (e) => { e.preventDefault(); confirm(); } },
      el("label", {}, "Reason ", reason),
      el("button", { type: "submit", class: "confirm-invalidate" }, "Confirm invalidate"),
      el("button", { type: "button", onclick: () => panel.replaceChildren() }, "Cancel"),
    ),
  );
  reason.focus();
}

function forgetPanel(m, panel, errorSlot) {
  panel.replaceChildren(
    el(
      "div",
      { class: "row forget-confirm" },
      "Forget this memory? It stays in the audit and can be restored.",
      el(
        "button",
        {
          type: "button",
          class: "confirm-forget",
          onclick: () => act(errorSlot, () => api("DELETE", memoryPath(m.id)), `Memory ${m.id} forgotten.`),
        },
        "Yes, forget",
      ),
      el("button", { type: "button", onclick: () => panel.replaceChildren() }, "Cancel"),
    ),
  );
}

function restore(m, errorSlot) {
  return act(errorSlot, () => api("POST", memoryPath(m.id, "/restore")), `Memory ${m.id} restored.`);
}

// --- history -----------------------------------------------------------------------------------

export function closeHistory() {
  state.historyOf = null;
  $("history").hidden = true;
  $("history-body").replaceChildren();
}

export async function openHistory(id, { reveal = false } = {}) {
  state.historyOf = id;
  const section = $("history");
  $("history-of").textContent = id;
  section.hidden = false;
  if (reveal) section.scrollIntoView({ block: "start" });
  try {
    const chain = await api("GET", memoryPath(id, "/history"));
    const memories = el(
      "table",
      { class: "chain" },
      el("caption", { text: "Memories in the chain" }),
      el("thead", {}, el("tr", {}, ["id", "content", "status", "valid from", "valid to", "superseded by"].map((h) => el("th", { text: h })))),
      el(
        "tbody",
        {},
        chain.memories.map((m) =>
          el(
            "tr",
            { class: m.id === id ? "selected" : "" },
            el("td", { class: "mono", text: m.id }),
            el("td", { class: "content", text: m.content }),
            el("td", { text: m.status }),
            el("td", { text: when(m.valid_from, zone) }),
            el("td", { text: when(m.valid_to, zone) }),
            el("td", { class: "mono", text: m.superseded_by || "—" }),
          ),
        ),
      ),
    );
    const entries = el(
      "table",
      { class: "entries" },
      el("caption", { text: "What happened, oldest first" }),
      el("thead", {}, el("tr", {}, ["at", "memory", "action", "related", "reason", "judge", "event"].map((h) => el("th", { text: h })))),
      el(
        "tbody",
        {},
        chain.history.map((h) =>
          el(
            "tr",
            { dataset: { action: h.action } },
            el("td", { class: "at", text: when(h.at, zone) }),
            el("td", { class: "mono", text: h.memory_id }),
            el("td", { class: "action", text: h.action }),
            el("td", { class: "mono", text: h.related_id || "—" }),
            el("td", { class: "reason", text: h.reason || "" }),
            el("td", { text: h.judge || "" }),
            el("td", { class: "mono", text: h.event_id || "—" }),
          ),
        ),
      ),
    );
    $("history-body").replaceChildren(memories, entries);
  } catch (err) {
    $("history-body").replaceChildren(el("div", { class: "error", role: "alert" }, errorNodes(err)));
  }
}
