// The cuemem memory inspector: plain JS modules over the /v1 JSON API, no build step, no
// dependencies. This module wires the page: the key, the users, the tabs.
//
// Safety rule for every module of the inspector: data from the API (memory content, ids, reasons,
// cues, errors) is only ever written with textContent / text nodes / form values / numeric SVG
// attributes, never parsed as HTML. There is no innerHTML, insertAdjacentHTML, document.write or
// eval, and no data goes into an href or src (the one link, Flower's, is the server's setting and
// is shown only when it is an http(s) URL). The Content-Security-Policy admits only these scripts
// and the stylesheet.

import { $, API, ApiError, KEY_STORE, USER_STORE, api, append, clearError, el, notify, showError, state } from "./dom.js";
import { PAGE_SIZE, closeHistory, loadMemories } from "./memories.js";
import { openMemoryPage } from "./memory_page.js";
import { loadOverview } from "./overview.js";
import { runRecall } from "./recall.js";
import { loadTimeline, pan, rezone, zoom, zoomAll } from "./timeline.js";

const USERS_PAGE = 100;
const VIEWS = ["overview", "timeline", "memories", "memory", "recall"];
const VIEW_STORE = "cuemem.inspector.view";

// --- tabs --------------------------------------------------------------------------------------

// Show one view; the overview and the timeline are read again each time they are shown.
function show(view) {
  const chosen = VIEWS.includes(view) ? view : "memories";
  for (const v of VIEWS) {
    $(`view-${v}`).hidden = v !== chosen;
    $(`tab-${v}`).setAttribute("aria-selected", String(v === chosen));
  }
  sessionStorage.setItem(VIEW_STORE, chosen);
  document.body.dataset.view = chosen;
  if (chosen === "overview") loadOverview();
  if (chosen === "timeline") loadTimeline();
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
  const view = document.body.dataset.view;
  if (view === "timeline" || view === "overview") show(view);
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

  for (const v of VIEWS) $(`tab-${v}`).addEventListener("click", () => show(v));
  document.addEventListener("inspector:open-memory", (e) => {
    show("memory");
    openMemoryPage(e.detail);
  });
  $("timeline-form").addEventListener("submit", (e) => {
    e.preventDefault();
    loadTimeline();
  });
  $("zoom-in").addEventListener("click", () => zoom(0.5));
  $("zoom-out").addEventListener("click", () => zoom(2));
  $("zoom-all").addEventListener("click", zoomAll);
  $("pan-earlier").addEventListener("click", () => pan(-1));
  $("pan-later").addEventListener("click", () => pan(1));
  $("timeline-zone").addEventListener("change", rezone);
  $("overview-form").addEventListener("submit", (e) => {
    e.preventDefault();
    loadOverview();
  });
  $("overview-user-only").addEventListener("change", loadOverview);

  state.key = sessionStorage.getItem(KEY_STORE) || "";
  $("api-key").value = state.key;
  const user = sessionStorage.getItem(USER_STORE);
  if (state.key) loadUsers();
  if (user) openUser(user);
  const view = sessionStorage.getItem(VIEW_STORE) || "memories";
  show(view === "memory" ? "memories" : view);
  document.body.dataset.ready = "true";
}

start();
