// A user's timeline: their turns by session (one lane each) over time, the memories made from
// them below, linked to their source turns; an edge from each superseded memory to the memory
// that replaced it; superseded, archived and forgotten memories marked. Readable at any range: a
// session's turns closer than a few pixels are one mark with their count, and zooming onto the
// session (click that mark or the session's name) spreads them; "Zoom in" narrows around the turn
// nearest the middle, so that it lands where the data is; "Earlier" and "Later" jump to the next
// turns out of view; every mark says what it is on hover or keyboard focus. All times are in one
// zone (zones.js): the user's, the offset of their latest turn, unless another is picked.
//
// Safety rule for every module of the inspector: data from the API is only ever written with
// textContent / text nodes / numeric SVG attributes, never parsed as HTML (see dom.js).

import { $, api, clearError, el, request, seg, showError, state, svg } from "./dom.js";
import { arrowDefs, shorten, timeScale } from "./charts.js";
import {
  ARROW_ID,
  EDGE_ROOM,
  MEM_ROW_H,
  actionable,
  clusterMark,
  diamond,
  edgePath,
  fit,
  groupTurns,
  labelRoom,
  makeTip,
  memoryTimes,
  ms,
  placeMemories,
  successorEdges,
  withTip,
} from "./timeline_marks.js";
import { chooseZone, dayBound, offsetOf, offsetZone, stamp, stampIso, zoneName, zoneTicks } from "./zones.js";

const WIDTH = 1000;
const LABEL_W = 130;
const RIGHT = 30; // room for the last tick label
const X0 = LABEL_W;
const X1 = WIDTH - RIGHT;
const TOP = 22;
const MIN_SPAN_MS = 10_000;

// The loaded data, the range in view [start, end] and the range of the data [lo, hi] (ms).
const view = { data: null, user: "", start: 0, end: 0, lo: 0, hi: 0, zone: null };

function extent(data) {
  const times = data.turns.map((t) => ms(t.at));
  if (!times.length) return [Date.now() - 86_400_000, Date.now()];
  const lo = Math.min(...times);
  const hi = Math.max(...times);
  const pad = Math.max((hi - lo) * 0.03, MIN_SPAN_MS);
  return [lo - pad, hi + pad];
}

const zoneMode = () => $("timeline-zone").value || "user";

export async function loadTimeline() {
  const out = $("timeline-chart");
  if (!state.user) {
    out.replaceChildren(el("p", { class: "hint", text: "Pick a user to see their timeline." }));
    $("timeline-list").replaceChildren();
    return;
  }
  clearError();
  // The dates are days of the zone the chart shows (before the first answer: this browser's).
  const zone = view.user === state.user && view.zone ? view.zone : chooseZone(zoneMode(), []);
  const since = $("timeline-since").value;
  const until = $("timeline-until").value;
  try {
    const data = await api("GET", `users/${seg(state.user)}/timeline`, {
      params: { since: since ? dayBound(since, false, zone) : "", until: until ? dayBound(until, true, zone) : "", limit: 1000 },
    });
    view.data = data;
    view.user = state.user;
    view.zone = chooseZone(zoneMode(), data.turns);
    [view.lo, view.hi] = extent(data);
    [view.start, view.end] = [view.lo, view.hi];
    render();
  } catch (err) {
    out.replaceChildren();
    showError(err);
  }
}

// The zone picked again: the same range, drawn in it.
export function rezone() {
  if (!view.data) return;
  view.zone = chooseZone(zoneMode(), view.data.turns);
  render();
}

// Show [start, end], kept within the data's range (the whole of it when wider).
function setView(start, end) {
  const span = Math.max(MIN_SPAN_MS, end - start);
  if (span >= view.hi - view.lo) {
    [view.start, view.end] = [view.lo, view.hi];
  } else {
    view.start = Math.min(Math.max(start, view.lo), view.hi - span);
    view.end = view.start + span;
  }
  render();
}

function focusOn(t0, t1) {
  const pad = Math.max((t1 - t0) * 0.1, MIN_SPAN_MS / 2);
  setView(t0 - pad, t1 + pad);
}

function nearestTurn(t) {
  let best = null;
  for (const turn of view.data.turns) {
    const at = ms(turn.at);
    if (best === null || Math.abs(at - t) < Math.abs(best - t)) best = at;
  }
  return best;
}

// ``factor`` times the span. In: around the turn nearest the middle, so that the narrower range
// holds data (around the middle itself it fell between sessions); out: around the middle.
export function zoom(factor) {
  if (!view.data) return;
  const span = (view.end - view.start) * factor;
  let mid = (view.start + view.end) / 2;
  if (factor < 1) mid = nearestTurn(mid) ?? mid;
  setView(mid - span / 2, mid + span / 2);
}

export function zoomAll() {
  if (!view.data) return;
  setView(view.lo, view.hi);
}

// The same span moved to the next turns out of view, earlier (-1) or later (+1), however far.
export function pan(direction) {
  if (!view.data) return;
  const span = view.end - view.start;
  const times = view.data.turns.map((t) => ms(t.at));
  const beyond = direction > 0 ? times.filter((t) => t > view.end) : times.filter((t) => t < view.start);
  if (!beyond.length) return;
  const next = direction > 0 ? Math.min(...beyond) : Math.max(...beyond);
  const start = direction > 0 ? next - 0.1 * span : next - 0.9 * span;
  setView(start, start + span);
}

function focusSession(session) {
  const times = view.data.turns.filter((t) => t.session_id === session).map((t) => ms(t.at));
  if (times.length) focusOn(Math.min(...times), Math.max(...times));
}

// Sessions in the order of their first turn.
function lanesOf(turns) {
  const first = new Map();
  for (const t of turns) if (!first.has(t.session_id)) first.set(t.session_id, ms(t.at));
  return [...first.entries()].sort((a, b) => a[1] - b[1]).map(([s]) => s);
}

// "2026-10-05 20:03 UTC+08:00" in the chart's zone.
function at(t) {
  return `${stamp(t, view.zone)} ${zoneName(t, view.zone)}`;
}

function turnLines(t) {
  const lines = [
    { text: `session ${shorten(t.session_id, 40)} #${t.seq} · ${t.role}`, cls: "tip-head" },
    { text: at(ms(t.at)), cls: "tip-time" },
  ];
  const own = offsetOf(t.at);
  if (own !== null && own !== view.zone.offsetAt(ms(t.at))) {
    const zone = offsetZone(own);
    lines.push({ text: `sent at ${stamp(ms(t.at), zone)} ${zoneName(ms(t.at), zone)}`, cls: "tip-time" });
  }
  lines.push({ text: shorten(t.content, 300) });
  return lines;
}

function memoryLines(m, t, byId, replaced) {
  const lines = [
    { text: `${m.type} · ${m.status}`, cls: "tip-head" },
    { text: shorten(m.content, 300) },
    { text: `said ${at(t)}`, cls: "tip-time" },
  ];
  if (m.due_at) lines.push({ text: `due ${at(ms(m.due_at))}`, cls: "tip-time" });
  if (m.valid_to) lines.push({ text: `held until ${at(ms(m.valid_to))}`, cls: "tip-time" });
  if (m.superseded_by) {
    const next = byId.get(m.superseded_by);
    lines.push({ text: `superseded by: ${next ? shorten(next.content, 120) : `${m.superseded_by} (made outside this range)`}`, cls: "tip-link" });
  }
  for (const old of replaced.get(m.id) || []) lines.push({ text: `replaced: ${shorten(old.content, 120)}`, cls: "tip-link" });
  if (m.status_reason) lines.push({ text: shorten(m.status_reason, 160), cls: "tip-time" });
  return lines;
}

function render() {
  const { data, zone } = view;
  const x = timeScale(view.start, view.end, X0, X1);
  const inView = (t) => t >= view.start && t <= view.end;
  const shown = data.turns.filter((t) => inView(ms(t.at)));
  const inLanes = new Set(shown.map((t) => t.session_id));
  const lanes = lanesOf(data.turns).filter((s) => inLanes.has(s));
  const laneH = lanes.length > 14 ? 16 : 24;
  const laneY = new Map(lanes.map((s, i) => [s, TOP + i * laneH]));
  const groups = groupTurns(shown, x);
  const groupOf = new Map(groups.flatMap((g) => g.turns.map((t) => [t.event_id, g])));

  const times = memoryTimes(data);
  const placed = placeMemories(data, times, x, inView);
  const memTop = TOP + Math.max(0, lanes.length - 1) * laneH + 32;
  const rowY = (row) => memTop + row * MEM_ROW_H;
  const rows = Math.max(1, ...placed.map((p) => p.row + 1));
  const floor = rowY(rows - 1) + 6;
  const edges = successorEdges(data, times, placed, view, x, memTop, rowY, [X0, X1]);
  const height = floor + (edges.length ? EDGE_ROOM : 8) + 26;
  const byId = new Map(data.memories.map((m) => [m.id, m]));
  const replaced = new Map();
  for (const m of data.memories) {
    if (m.superseded_by) replaced.set(m.superseded_by, [...(replaced.get(m.superseded_by) || []), m]);
  }

  const tip = makeTip();
  const chart = svg("svg", {
    class: "chart timeline",
    viewBox: `0 0 ${WIDTH} ${height}`,
    // A group, not an image: its marks take focus and act.
    role: "group",
    "aria-label": `Timeline of ${data.user_id}`,
    dataset: { zone: zone.mode, start: new Date(view.start).toISOString(), end: new Date(view.end).toISOString() },
  });
  chart.append(svg("title", { text: `Timeline of ${data.user_id}` }), arrowDefs(ARROW_ID));

  for (const tick of zoneTicks(view.start, view.end, zone, 8)) {
    chart.append(
      svg("line", { class: "grid", x1: x(tick.t), y1: 10, x2: x(tick.t), y2: height - 22 }),
      svg("text", { class: "tick", x: x(tick.t), y: height - 8, "text-anchor": "middle", text: tick.label, dataset: { t: new Date(tick.t).toISOString() } }),
    );
  }
  for (const s of lanes) {
    const y = laneY.get(s);
    const count = data.turns.filter((t) => t.session_id === s).length;
    const label = svg("text", { class: "lane-label session-link", x: LABEL_W - 8, y: y + 4, "text-anchor": "end", text: shorten(s, 18), dataset: { session: s } });
    withTip(actionable(label, () => focusSession(s)), tip, () => [
      { text: `session ${shorten(s, 60)}`, cls: "tip-head" },
      { text: `${count} turns; click to zoom onto them`, cls: "tip-time" },
    ]);
    chart.append(svg("line", { class: "lane", x1: X0, y1: y, x2: X1, y2: y }), label);
  }
  chart.append(svg("text", { class: "lane-label", x: LABEL_W - 8, y: memTop + 4, "text-anchor": "end", text: "memories" }));

  // Links and edges first, so that the marks are drawn over them.
  for (const p of placed) {
    const from = new Set(p.m.event_ids.map((e) => groupOf.get(e)).filter(Boolean));
    for (const g of from) {
      chart.append(svg("line", { class: `link status-${p.m.status}`, x1: (g.x0 + g.x1) / 2, y1: laneY.get(g.session), x2: p.px, y2: rowY(p.row) }));
    }
  }
  for (const e of edges) {
    const path = svg("path", {
      class: `successor${e.outside ? " outside" : ""}`,
      d: edgePath(e.x1, e.y1, e.x2, e.y2, floor),
      "marker-end": `url(#${ARROW_ID})`,
      dataset: { from: e.from.id, to: e.toId },
    });
    chart.append(
      withTip(path, tip, () => [
        { text: "superseded by", cls: "tip-head" },
        { text: `${shorten(e.from.content, 120)} →`, cls: "tip-link" },
        { text: e.to ? shorten(e.to.content, 120) : `${e.toId} (made outside this range)`, cls: "tip-link" },
      ]),
    );
  }
  for (const g of groups) {
    const y = laneY.get(g.session);
    if (g.turns.length === 1) {
      const [t] = g.turns;
      const dot = svg("circle", {
        class: `turn role-${t.role === "user" ? "user" : "other"}${t.memory_ids.length ? " remembered" : ""}`,
        cx: g.x0,
        cy: y,
        r: 4.5,
        dataset: { eventId: t.event_id, session: t.session_id },
      });
      chart.append(withTip(dot, tip, () => turnLines(t)));
      continue;
    }
    const first = ms(g.turns[0].at);
    const last = ms(g.turns[g.turns.length - 1].at);
    chart.append(
      clusterMark(g, y, tip, () => [
        { text: `session ${shorten(g.session, 40)} · ${g.turns.length} turns`, cls: "tip-head" },
        { text: `${at(first)} – ${stamp(last, zone)}`, cls: "tip-time" },
        { text: shorten(g.turns[0].content, 160) },
        { text: "click to zoom onto them", cls: "tip-time" },
      ], () => focusOn(first, last)),
    );
  }
  const room = labelRoom(placed, WIDTH - 4);
  for (const p of placed) {
    const cy = rowY(p.row);
    const mark = svg("path", { class: `mem status-${p.m.status}`, d: diamond(p.px, cy), dataset: { id: p.m.id, status: p.m.status }, "aria-label": `${p.m.type} memory, ${p.m.status}` });
    chart.append(withTip(actionable(mark, () => request("open-memory", p.m.id)), tip, () => memoryLines(p.m, p.t, byId, replaced)));
    const label = fit(p.m.content, room.get(p.m.id));
    if (label) chart.append(svg("text", { class: "mem-label", x: p.px + 9, y: cy + 4, text: label, dataset: { id: p.m.id } }));
  }

  const box = el("div", { class: "timeline-box" }, chart, tip);
  $("timeline-chart").replaceChildren(
    box,
    el(
      "p",
      { class: "hint timeline-range" },
      `${stamp(view.start, zone)} – ${stamp(view.end, zone)} (times in ${zone.label}): `,
      `${shown.length} of ${data.turns.length} turns, ${placed.length} of ${data.memories.length} memories`,
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
      ["cluster", "turns too close to tell apart (count; click to zoom)"],
      ["mem status-active", "active memory"],
      ["mem status-superseded", "superseded"],
      ["mem status-archived", "archived"],
      ["mem status-forgotten", "forgotten"],
      ["successor", "superseded → its successor"],
    ].map(([cls, label]) => el("li", { class: `key ${cls}` }, el("span", { class: "swatch" }), label)),
  );
}

function renderList(lanes) {
  const { data, zone } = view;
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
                el("span", { class: "hint", text: `#${t.seq} ${stampIso(t.at, zone, { seconds: true })} ${t.role}` }),
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
