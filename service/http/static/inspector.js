// The cuemem memory inspector: plain JS over the /v1 JSON API, no build step, no dependencies.
//
// Safety rule for this file: data from the API (memory content, ids, reasons, cues, errors) is
// only ever written with textContent / text nodes / form values, never parsed as HTML. There is
// no innerHTML, insertAdjacentHTML, document.write or eval here, and no data goes into an href or
// src. The page's Content-Security-Policy only admits this script and the stylesheet.

const API = new URL("../v1/", document.baseURI); // the page lives at <root>/inspector/
const KEY_STORE = "cuemem.inspector.key";
const USER_STORE = "cuemem.inspector.user";
const PAGE_SIZE = 50;
const USERS_PAGE = 100;
const CURRENT = "pending,active,superseded,archived,expired"; // everything but forgotten
const EDITABLE = new Set(["active", "archived", "superseded", "expired"]);
const INVALIDATABLE = new Set(["active", "archived"]);
const RESTORABLE = new Set(["archived", "superseded", "expired", "forgotten"]);

const state = {
  key: "",
  user: "",
  offset: 0,
  total: 0,
  usersOffset: 0,
  historyOf: null, // memory id whose history is open
  busy: 0,
  listing: 0, // the latest listing request: an older answer arriving later is dropped
};

const $ = (id) => document.getElementById(id);

// --- DOM helpers (text only) -------------------------------------------------------------------

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = String(value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "value" || name === "checked" || name === "disabled" || name === "hidden") node[name] = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function when(iso) {
  if (!iso) return "—";
  return String(iso).replace("T", " ").replace(/\.\d+/, "");
}

function num(value, digits = 3) {
  if (typeof value !== "number" || !Number.isFinite(value)) return String(value);
  return Number.isInteger(value) ? String(value) : value.toFixed(digits).replace(/0+$/, "").replace(/\.$/, "");
}

function fieldRow(label, value, cls) {
  return [el("dt", { text: label }), el("dd", { class: cls }, value === null || value === undefined || value === "" ? "—" : value)];
}

// --- the API -----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message, fields) {
    super(message);
    this.status = status;
    this.code = code;
    this.fields = Array.isArray(fields) ? fields : [];
  }
}

async function api(method, path, { body, params } = {}) {
  const url = new URL(path, API);
  for (const [name, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, String(value));
  }
  const headers = { Accept: "application/json" };
  if (state.key) headers.Authorization = `Bearer ${state.key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  state.busy += 1;
  document.body.dataset.busy = String(state.busy);
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (exc) {
    throw new ApiError(0, "unreachable", `the API is unreachable: ${exc.message}`, []);
  } finally {
    state.busy -= 1;
    document.body.dataset.busy = String(state.busy);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && typeof data === "object" ? data.error : null;
    if (error && typeof error.message === "string") {
      throw new ApiError(response.status, error.code || "error", error.message, error.fields);
    }
    throw new ApiError(response.status, `http_${response.status}`, text.slice(0, 300) || response.statusText, []);
  }
  return data;
}

const seg = encodeURIComponent;
const memoryPath = (id, suffix = "") => `users/${seg(state.user)}/memories/${seg(id)}${suffix}`;

// --- messages ----------------------------------------------------------------------------------

function errorNodes(err) {
  const status = err instanceof ApiError && err.status ? `${err.status} ` : "";
  const code = err instanceof ApiError ? err.code : "error";
  const nodes = [el("p", { class: "error-message" }, el("strong", { text: `Error ${status}${code}: ` }), err.message)];
  const fields = err instanceof ApiError ? err.fields : [];
  if (fields.length) {
    nodes.push(
      el(
        "ul",
        { class: "error-fields" },
        fields.map((f) => el("li", {}, el("code", { text: String(f.field) }), `: ${f.problem}`)),
      ),
    );
  }
  return nodes;
}

function showError(err, where = $("error")) {
  where.replaceChildren(...errorNodes(err));
  where.hidden = false;
  if (where === $("error")) where.scrollIntoView({ block: "nearest" });
}

function clearError(where = $("error")) {
  where.replaceChildren();
  where.hidden = true;
}

function notify(message) {
  $("notice").textContent = message;
}

// --- key and users -----------------------------------------------------------------------------

function useKey(key) {
  state.key = key.trim();
  if (state.key) sessionStorage.setItem(KEY_STORE, state.key);
  else sessionStorage.removeItem(KEY_STORE);
  notify(state.key ? "Key set for this tab." : "No key: works only when the server runs with --no-auth.");
}

async function loadUsers(more = false) {
  clearError();
  const offset = more ? state.usersOffset : 0;
  try {
    const page = await api("GET", "users", { params: { limit: USERS_PAGE, offset } });
    const items = page.items.map((u) =>
      el(
        "li",
        {},
        el(
          "button",
          {
            type: "button",
            class: "user",
            dataset: { user: u.user_id },
            title: `open ${u.user_id}`,
            onclick: () => openUser(u.user_id),
          },
          el("span", { class: "mono", text: u.user_id }),
          el("span", { class: "hint", text: ` ${u.active} active / ${u.memories}` }),
        ),
      ),
    );
    if (more) append($("user-list"), items);
    else $("user-list").replaceChildren(...items);
    state.usersOffset = offset + page.items.length;
    $("users-count").textContent = page.total
      ? `${state.usersOffset} of ${page.total} users with memories`
      : "No user of this tenant has memories yet.";
    $("more-users").hidden = state.usersOffset >= page.total;
  } catch (err) {
    showError(err);
  }
}

function openUser(user) {
  const id = user.trim();
  if (!id) {
    showError(new ApiError(0, "invalid_input", "enter a user id", [{ field: "user_id", problem: "must not be empty" }]));
    return;
  }
  state.user = id;
  state.offset = 0;
  sessionStorage.setItem(USER_STORE, id);
  $("user-id").value = id;
  $("current-user").textContent = `of ${id}`;
  for (const b of document.querySelectorAll("#user-list button.user")) {
    b.classList.toggle("selected", b.dataset.user === id);
  }
  closeHistory();
  $("recall-result").replaceChildren();
  loadMemories();
}

// --- memories ----------------------------------------------------------------------------------

function statusParam() {
  const chosen = $("status-filter").value;
  return chosen === "current" ? CURRENT : chosen;
}

async function loadMemories() {
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
    list.replaceChildren(...page.items.map(memoryCard));
    const first = page.items.length ? state.offset + 1 : 0;
    $("memory-count").textContent = page.total
      ? `${first}–${state.offset + page.items.length} of ${page.total} memories`
      : "No memories match these filters.";
    $("prev-page").disabled = state.offset === 0;
    $("next-page").disabled = state.offset + page.items.length >= page.total;
  } catch (err) {
    if (ticket !== state.listing) return;
    list.replaceChildren();
    $("memory-count").textContent = "";
    showError(err);
  } finally {
    if (ticket === state.listing) list.setAttribute("aria-busy", "false");
  }
}

function sourceItem(source) {
  const parts = [];
  if (source.session_id) parts.push(`session ${source.session_id}`);
  if (source.seq !== undefined && source.seq !== null) parts.push(`#${source.seq}`);
  if (source.at) parts.push(`at ${when(source.at)}`);
  return el(
    "li",
    {},
    parts.join(" "),
    source.event_id ? el("span", { class: "hint mono", text: ` event ${source.event_id}` }) : null,
  );
}

function memoryCard(m) {
  const errorSlot = el("div", { class: "error card-error", role: "alert", hidden: true });
  const panel = el("div", { class: "card-panel" });
  const card = el(
    "article",
    { class: `memory status-${m.status}`, dataset: { id: m.id, status: m.status } },
    el(
      "div",
      { class: "badges" },
      el("span", { class: "badge type", text: m.type }),
      el("span", { class: `badge status status-${m.status}`, text: m.status }),
      el("span", { class: "metric", text: `score ${num(m.score)}` }),
      el("span", { class: "metric", text: `importance ${num(m.importance)}` }),
      el("span", { class: "metric", text: `used ${m.access_count}×` }),
    ),
    el("p", { class: "content", text: m.content }),
    el(
      "dl",
      { class: "facts" },
      fieldRow("valid from", when(m.valid_from), "valid-from"),
      fieldRow("valid to", when(m.valid_to), "valid-to"),
      fieldRow("created", when(m.created_at)),
      fieldRow("updated", when(m.updated_at)),
      m.tags.length ? fieldRow("tags", m.tags.join(", ")) : null,
      m.entities.length ? fieldRow("entities", m.entities.join(", ")) : null,
      m.slot ? fieldRow("slot", m.slot) : null,
      m.status_reason ? fieldRow("status reason", m.status_reason, "status-reason") : null,
      m.superseded_by ? fieldRow("superseded by", m.superseded_by, "mono") : null,
      m.due_at ? fieldRow("due", when(m.due_at)) : null,
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

function closeHistory() {
  state.historyOf = null;
  $("history").hidden = true;
  $("history-body").replaceChildren();
}

async function openHistory(id, { reveal = false } = {}) {
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
            el("td", { text: when(m.valid_from) }),
            el("td", { text: when(m.valid_to) }),
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
            el("td", { text: when(h.at) }),
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

// --- recall ------------------------------------------------------------------------------------

function keyValues(obj, cls) {
  const entries = Object.entries(obj || {});
  if (!entries.length) return el("span", { class: "hint", text: "—" });
  return el(
    "ul",
    { class: `kv ${cls || ""}` },
    entries.map(([k, v]) =>
      el("li", { dataset: { key: k } }, el("span", { class: "k", text: k }), " ", el("span", { class: "v", text: typeof v === "number" ? num(v, 4) : Array.isArray(v) ? v.join(", ") || "—" : JSON.stringify(v) })),
    ),
  );
}

function explanationNode(explanation) {
  const ex = explanation || {};
  const scores = {};
  const other = {};
  for (const [k, v] of Object.entries(ex)) {
    if (k === "paths" || k === "matched_cues") continue;
    if (typeof v === "number") scores[k] = v;
    else other[k] = v;
  }
  return el(
    "dl",
    { class: "explanation" },
    fieldRow("paths", (ex.paths || []).join(", "), "paths"),
    fieldRow(
      "matched cues",
      (ex.matched_cues || []).length ? el("ul", { class: "cues" }, ex.matched_cues.map((c) => el("li", { class: "mono", text: c }))) : "",
      "matched-cues",
    ),
    fieldRow("scores", keyValues(scores, "scores"), "scores"),
    Object.keys(other).length ? fieldRow("other", keyValues(other)) : null,
  );
}

function recallItem(item) {
  return el(
    "li",
    { class: "recall-item", dataset: { id: item.id } },
    el(
      "div",
      { class: "badges" },
      el("span", { class: "badge type", text: item.type }),
      el("span", { class: `badge status status-${item.status}`, text: item.status }),
      el("span", { class: "metric", text: `score ${num(item.score, 4)}` }),
    ),
    el("p", { class: "content", text: item.content }),
    explanationNode(item.explanation),
  );
}

async function runRecall() {
  const out = $("recall-result");
  clearError();
  if (!state.user) {
    showError(new ApiError(0, "invalid_input", "pick a user first", [{ field: "user_id", problem: "must not be empty" }]));
    return;
  }
  const k = Number.parseInt($("recall-k").value, 10);
  try {
    const result = await api("POST", "recall", {
      body: {
        user_id: state.user,
        query: $("query").value,
        k: Number.isFinite(k) ? k : 5,
        include_history: $("include-history").checked,
        reinforce: false,
      },
    });
    const trace = result.trace || {};
    out.replaceChildren(
      el("p", { class: "stage" }, "Stage: ", el("strong", { class: "stage-name", text: result.stage })),
      result.items.length
        ? el("ol", { class: "recall-items" }, result.items.map(recallItem))
        : el("p", { class: "hint", text: "Nothing recalled." }),
      el(
        "details",
        { class: "trace", open: true },
        el("summary", { text: "Trace" }),
        el(
          "dl",
          {},
          fieldRow("stage", trace.stage, "trace-stage"),
          fieldRow("candidates", keyValues(trace.candidates, "candidates"), "trace-candidates"),
          fieldRow("timings (ms)", keyValues(trace.timings_ms, "timings"), "trace-timings"),
          fieldRow("query cues", keyValues(trace.cues), "trace-cues"),
          fieldRow(
            "notes",
            (trace.notes || []).length ? el("ul", {}, trace.notes.map((n) => el("li", { text: n }))) : "",
            "trace-notes",
          ),
          trace.vector_backend ? fieldRow("vector backend", trace.vector_backend) : null,
          trace.embedding_model ? fieldRow("embedding model", trace.embedding_model) : null,
        ),
      ),
      el("details", { class: "prompt" }, el("summary", { text: "Prompt block" }), el("pre", { text: result.prompt || "" })),
    );
  } catch (err) {
    out.replaceChildren();
    showError(err);
  }
}

// --- wiring ------------------------------------------------------------------------------------

function start() {
  $("where").textContent = `API: ${API.href}`;
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    useKey($("api-key").value);
    loadUsers();
    if (state.user) loadMemories();
  });
  $("clear-key").addEventListener("click", () => {
    $("api-key").value = "";
    useKey("");
  });
  $("user-form").addEventListener("submit", (e) => {
    e.preventDefault();
    openUser($("user-id").value);
  });
  $("load-users").addEventListener("click", () => loadUsers());
  $("more-users").addEventListener("click", () => loadUsers(true));
  $("filter-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.offset = 0;
    loadMemories();
  });
  for (const id of ["status-filter", "type-filter"]) {
    $(id).addEventListener("change", () => {
      state.offset = 0;
      loadMemories();
    });
  }
  $("prev-page").addEventListener("click", () => {
    state.offset = Math.max(0, state.offset - PAGE_SIZE);
    loadMemories();
  });
  $("next-page").addEventListener("click", () => {
    state.offset += PAGE_SIZE;
    loadMemories();
  });
  $("close-history").addEventListener("click", closeHistory);
  $("recall-form").addEventListener("submit", (e) => {
    e.preventDefault();
    runRecall();
  });

  state.key = sessionStorage.getItem(KEY_STORE) || "";
  $("api-key").value = state.key;
  const user = sessionStorage.getItem(USER_STORE);
  if (state.key) loadUsers();
  if (user) openUser(user);
  document.body.dataset.ready = "true";
}

start();
