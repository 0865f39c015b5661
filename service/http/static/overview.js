// The overview: a tenant's (or the selected user's) memories by type and status, per day and by
// importance; the pipeline's health: queue depths, events by stage, stalled events, dead letters
// with a replay button, and a link to Flower.
//
// Safety rule for every module of the inspector: data from the API is only ever written with
// textContent / text nodes / numeric SVG attributes, never parsed as HTML (see dom.js).

import { $, api, clearError, el, notify, showError, state, when } from "./dom.js";
import { bars, columns, stacked } from "./charts.js";

const STATUS_ORDER = ["active", "pending", "superseded", "archived", "expired", "forgotten"];

export async function loadOverview() {
  clearError();
  const mine = $("overview-user-only").checked && state.user;
  $("overview-scope").textContent = mine ? `user ${state.user}` : "the whole tenant";
  try {
    const [overview, pipeline] = await Promise.all([
      api("GET", "overview", { params: { user_id: mine ? state.user : "", days: $("overview-days").value } }),
      api("GET", "pipeline"),
    ]);
    renderOverview(overview);
    renderPipeline(pipeline);
  } catch (err) {
    showError(err);
  }
}

function card(title, value, cls) {
  return el("div", { class: `stat ${cls}` }, el("span", { class: "stat-value", text: String(value) }), el("span", { class: "stat-label", text: title }));
}

function renderOverview(o) {
  const m = o.memories;
  const types = Object.entries(m.by_type_status);
  const largest = Math.max(1, ...types.map(([, by]) => Object.values(by).reduce((a, b) => a + b, 0)));
  const days = fillDays(m.per_day, o.days);
  $("overview-body").replaceChildren(
    el(
      "div",
      { class: "stats" },
      card("memories", m.total, "memories-total"),
      card("active", m.by_status.active || 0, "memories-active"),
      card("events", o.events.total, "events-total"),
      card("stalled events", o.events.stalled, "events-stalled"),
    ),
    el("h3", { text: "By type and status" }),
    types.length
      ? el(
          "ul",
          { class: "bars type-status" },
          types.map(([type, by]) => {
            const total = Object.values(by).reduce((a, b) => a + b, 0);
            const holder = el("span", { class: "bar-track" }, stacked(STATUS_ORDER.map((s) => ({ key: s, value: by[s] || 0 })), total));
            holder.firstChild.style.width = `${(total / largest) * 100}%`;
            return el(
              "li",
              { dataset: { key: type }, title: STATUS_ORDER.filter((s) => by[s]).map((s) => `${s} ${by[s]}`).join(", ") },
              el("span", { class: "bar-label", text: type }),
              holder,
              el("span", { class: "bar-value", text: String(total) }),
            );
          }),
        )
      : el("p", { class: "hint", text: "No memories yet." }),
    el("ul", { class: "legend" }, STATUS_ORDER.map((s) => el("li", { class: `key seg-${s}` }, el("span", { class: "swatch" }), s))),
    el("h3", { text: `Memories made per day (last ${o.days} days)` }),
    columns(days, { cls: "per-day", labelEvery: Math.max(1, Math.ceil(days.length / 8)) }),
    el("h3", { text: "Importance" }),
    columns(
      m.importance.map((b) => ({ label: `${b.from}`, value: b.memories, title: `importance ${b.from}–${b.to}: ${b.memories}` })),
      { cls: "importance", width: 420 },
    ),
  );
}

// Every day of the window, empty days included, so that gaps show as gaps.
function fillDays(perDay, days) {
  const counts = new Map(perDay.map((d) => [d.day, d.memories]));
  const out = [];
  const today = new Date();
  for (let i = days - 1; i >= 0; i -= 1) {
    const day = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - i)).toISOString().slice(0, 10);
    out.push({ label: day.slice(5), value: counts.get(day) || 0, title: `${day}: ${counts.get(day) || 0}` });
  }
  return out;
}

function renderPipeline(p) {
  const queues = Object.entries(p.queues).map(([name, n]) => ({ key: name, label: name, value: n }));
  const stages = Object.entries(p.events.by_stage).map(([stage, n]) => ({ key: stage, label: stage, value: n }));
  const flower = typeof p.flower_url === "string" && /^https?:\/\//.test(p.flower_url) ? p.flower_url : null;
  $("pipeline-body").replaceChildren(
    el(
      "div",
      { class: "stats" },
      card("messages queued", queues.reduce((a, q) => a + q.value, 0), "queued-total"),
      card(`stalled (> ${p.stalled_after_s} s at one stage)`, p.events.stalled, "stalled"),
      card("dead letters waiting", p.dead_letters.waiting, "letters-waiting"),
    ),
    el("h3", { text: "Queue depths (the whole deployment)" }),
    queues.length ? bars(queues, { cls: "queues", format: String }) : el("p", { class: "hint", text: "No Redis broker to read." }),
    el("h3", { text: "Events by stage (this tenant)" }),
    stages.length ? bars(stages, { cls: "stages", format: String }) : el("p", { class: "hint", text: "No events yet." }),
    el("h3", { text: `Dead letters (${p.dead_letters.total})` }),
    letters(p.dead_letters.items),
    flower
      ? el("p", {}, "Tasks in detail: ", el("a", { href: flower, target: "_blank", rel: "noopener noreferrer", class: "flower-link", text: "open Flower" }))
      : el("p", { class: "hint", text: "Set CUEMEM_FLOWER_URL to link Flower here." }),
  );
}

function letters(items) {
  if (!items.length) return el("p", { class: "hint letters-none", text: "None: the pipeline gave up on nothing of this tenant." });
  return el(
    "table",
    { class: "letters" },
    el("thead", {}, el("tr", {}, ["id", "task", "event", "reason", "deliveries", "parked", "replayed", ""].map((h) => el("th", { text: h })))),
    el(
      "tbody",
      {},
      items.map((d) => {
        const slot = el("td", { class: "replay-cell" });
        const button = el("button", { type: "button", class: "replay", dataset: { id: d.id }, onclick: () => replay(d.id, button, slot) }, d.replayed_at ? "Replay again" : "Replay");
        slot.append(button);
        return el(
          "tr",
          { dataset: { id: d.id, task: d.task_name } },
          el("td", { class: "mono", text: String(d.id) }),
          el("td", { class: "mono", text: d.task_name }),
          el("td", { class: "mono", text: d.event_id || "—" }),
          el("td", { class: "reason", text: d.reason }),
          el("td", { text: String(d.deliveries) }),
          el("td", { text: when(d.created_at) }),
          el("td", { class: "replayed", text: when(d.replayed_at) }),
          slot,
        );
      }),
    ),
  );
}

async function replay(id, button, slot) {
  button.disabled = true;
  try {
    const letter = await api("POST", `dead-letters/${id}/replay`);
    notify(`Dead letter ${id} replayed (${letter.task_name}).`);
    await loadOverview();
  } catch (err) {
    button.disabled = false;
    showError(err);
    slot.dataset.failed = "true";
  }
}
