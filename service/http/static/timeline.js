// A user's timeline: their turns by session (one lane each) over time, the memories made from
// them below, linked to their source turns; superseded, archived and forgotten memories marked.
// Zoom with the buttons (around the middle) or fetch a date range from the API.
//
// Safety rule for every module of the inspector: data from the API is only ever written with
// textContent / text nodes / numeric SVG attributes, never parsed as HTML (see dom.js).

import { $, api, clearError, el, request, seg, showError, state, svg, when } from "./dom.js";
import { shorten, timeScale, timeTicks } from "./charts.js";

const WIDTH = 1000;
const LABEL_W = 130;
const RIGHT = 40; // room for the last tick label
const LANE_H = 24;
const MEM_ROW_H = 18;
const MIN_SPAN_MS = 60_000;

const view = { data: null, start: 0, end: 0 };

function ms(iso) {
  return Date.parse(iso);
}

function bounds(data) {
  const times = data.turns.map((t) => ms(t.at));
  if (!times.length) return [Date.now() - 86_400_000, Date.now()];
  const lo = Math.min(...times);
  const hi = Math.max(...times);
  const pad = Math.max((hi - lo) * 0.03, MIN_SPAN_MS);
  return [lo - pad, hi + pad];
}

export async function loadTimeline() {
  const out = $("timeline-chart");
  if (!state.user) {
    out.replaceChildren(el("p", { class: "hint", text: "Pick a user to see their timeline." }));
    $("timeline-list").replaceChildren();
    return;
  }
  clearError();
  const since = $("timeline-since").value;
  const until = $("timeline-until").value;
  try {
    const data = await api("GET", `users/${seg(state.user)}/timeline`, {
      params: {
        since: since ? `${since}T00:00:00+00:00` : "",
        until: until ? `${until}T23:59:59+00:00` : "",
        limit: 1000,
      },
    });
    view.data = data;
    [view.start, view.end] = bounds(data);
    render();
  } catch (err) {
    out.replaceChildren();
    showError(err);
  }
}

export function zoom(factor) {
  if (!view.data) return;
  const mid = (view.start + view.end) / 2;
  const half = Math.max(MIN_SPAN_MS, ((view.end - view.start) * factor) / 2);
  view.start = mid - half;
  view.end = mid + half;
  render();
}

export function zoomAll() {
  if (!view.data) return;
  [view.start, view.end] = bounds(view.data);
  render();
}

function lanesOf(turns) {
  const first = new Map();
  for (const t of turns) if (!first.has(t.session_id)) first.set(t.session_id, ms(t.at));
  return [...first.entries()].sort((a, b) => a[1] - b[1]).map(([s]) => s);
}

function render() {
  const { data } = view;
  const lanes = lanesOf(data.turns);
  const lane = new Map(lanes.map((s, i) => [s, i]));
  const x = timeScale(view.start, view.end, LABEL_W, WIDTH - RIGHT);
  const inView = (t) => t >= view.start && t <= view.end;
  const turnAt = new Map(data.turns.map((t) => [t.event_id, t]));
  const lanesH = 20 + lanes.length * LANE_H;

  // Memories sit under their earliest source turn; rows are stacked so that none overlaps.
  const placed = [];
  const rowEnds = [];
  for (const m of data.memories) {
    const src = m.event_ids.map((e) => turnAt.get(e)).filter(Boolean);
    const t = src.length ? Math.min(...src.map((s) => ms(s.at))) : ms(m.valid_from || m.created_at);
    if (!inView(t)) continue;
    const px = x(t);
    let row = rowEnds.findIndex((end) => end < px - 12);
    if (row < 0) row = rowEnds.length;
    rowEnds[row] = px;
    placed.push({ m, px, row, src });
  }
  const memTop = lanesH + 22;
  const height = memTop + Math.max(1, rowEnds.length) * MEM_ROW_H + 30;
  const chart = svg("svg", { class: "chart timeline", viewBox: `0 0 ${WIDTH} ${height}`, role: "img" });
  chart.append(svg("title", { text: `Timeline of ${data.user_id}` }));

  lanes.forEach((s, i) => {
    const y = 20 + i * LANE_H;
    chart.append(
      svg("line", { class: "lane", x1: LABEL_W, y1: y, x2: WIDTH - RIGHT, y2: y }),
      svg("text", { class: "lane-label", x: LABEL_W - 6, y: y + 4, "text-anchor": "end", text: shorten(s, 18) }),
    );
  });
  chart.append(svg("text", { class: "lane-label", x: LABEL_W - 6, y: memTop + 4, "text-anchor": "end", text: "memories" }));
  for (const tick of timeTicks(view.start, view.end, 6)) {
    chart.append(
      svg("line", { class: "grid", x1: x(tick.t), y1: 10, x2: x(tick.t), y2: height - 24 }),
      svg("text", { class: "tick", x: x(tick.t), y: height - 8, "text-anchor": "middle", text: tick.label }),
    );
  }

  // Links first, so that the shapes are drawn over them.
  for (const p of placed) {
    for (const s of p.src) {
      const t = ms(s.at);
      if (!inView(t)) continue;
      chart.append(
        svg("line", { class: `link status-${p.m.status}`, x1: x(t), y1: 20 + lane.get(s.session_id) * LANE_H, x2: p.px, y2: memTop + p.row * MEM_ROW_H }),
      );
    }
  }
  for (const t of data.turns) {
    const at = ms(t.at);
    if (!inView(at)) continue;
    chart.append(
      svg(
        "circle",
        { class: `turn role-${t.role === "user" ? "user" : "other"}${t.memory_ids.length ? " remembered" : ""}`, cx: x(at), cy: 20 + lane.get(t.session_id) * LANE_H, r: 4.5, dataset: { eventId: t.event_id } },
        svg("title", { text: `${t.session_id} #${t.seq} ${when(t.at)} ${t.role}: ${shorten(t.content, 160)}` }),
      ),
    );
  }
  for (const p of placed) {
    const cx = p.px;
    const cy = memTop + p.row * MEM_ROW_H;
    chart.append(
      svg(
        "path",
        {
          class: `mem status-${p.m.status}`,
          d: `M ${cx} ${cy - 6} L ${cx + 6} ${cy} L ${cx} ${cy + 6} L ${cx - 6} ${cy} Z`,
          dataset: { id: p.m.id, status: p.m.status },
          onclick: () => request("open-memory", p.m.id),
        },
        svg("title", { text: `${p.m.type} · ${p.m.status}: ${shorten(p.m.content, 160)}` }),
      ),
    );
  }
  const shown = data.turns.filter((t) => inView(ms(t.at))).length;
  $("timeline-chart").replaceChildren(
    chart,
    el(
      "p",
      { class: "hint timeline-range" },
      `${when(new Date(view.start).toISOString())} – ${when(new Date(view.end).toISOString())}: `,
      `${shown} of ${data.turns.length} turns, ${placed.length} of ${data.memories.length} memories`,
      data.truncated ? " (the latest 1,000 turns of the range; narrow the dates for earlier ones)" : "",
    ),
    legend(),
  );
  renderList(lanes);
}

function legend() {
  return el(
    "ul",
    { class: "legend" },
    [
      ["turn role-user", "user turn"],
      ["turn role-other", "assistant turn"],
      ["mem status-active", "active memory"],
      ["mem status-superseded", "superseded"],
      ["mem status-archived", "archived"],
      ["mem status-forgotten", "forgotten"],
    ].map(([cls, label]) => el("li", { class: `key ${cls}` }, el("span", { class: "swatch" }), label)),
  );
}

function renderList(lanes) {
  const { data } = view;
  const mems = new Map(data.memories.map((m) => [m.id, m]));
  const inView = (t) => ms(t.at) >= view.start && ms(t.at) <= view.end;
  $("timeline-list").replaceChildren(
    ...lanes.map((s) =>
      el(
        "details",
        { class: "session", dataset: { session: s } },
        el("summary", {}, "session ", el("span", { class: "mono", text: s })),
        el(
          "ol",
          { class: "turns" },
          data.turns
            .filter((t) => t.session_id === s && inView(t))
            .map((t) =>
              el(
                "li",
                { class: `turn-row role-${t.role}`, dataset: { eventId: t.event_id } },
                el("span", { class: "hint", text: `#${t.seq} ${when(t.at)} ${t.role}` }),
                " ",
                el("span", { class: "content", text: t.content }),
                t.memory_ids.map((id) => {
                  const m = mems.get(id);
                  return el(
                    "button",
                    { type: "button", class: `mem-chip status-${m ? m.status : "active"}`, dataset: { id }, onclick: () => request("open-memory", id) },
                    m ? `${m.type} · ${m.status}: ${shorten(m.content, 40)}` : id,
                  );
                }),
              ),
            ),
        ),
      ),
    ),
  );
}
