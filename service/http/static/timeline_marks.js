// The timeline's marks: a session's turns (one dot each, or one mark with their count where they
// are closer than a few pixels), the memories (diamonds, labelled where there is room), the links
// from turns to the memories made from them, the edges from a superseded memory to the one that
// replaced it, and the label every mark shows on hover or keyboard focus.
//
// Safety rule for every module of the inspector: data from the API is only ever written with
// textContent / text nodes / numeric SVG attributes, never parsed as HTML (see dom.js). The hover
// label is an element whose lines are text nodes; its place is set through the CSSOM.

import { el, svg } from "./dom.js";
import { shorten } from "./charts.js";

export const TURN_GAP = 10; // px: a session's turns closer than this are one mark with their count
const MEM_GAP = 14; // px: memory marks closer than this go on separate rows
export const MEM_ROW_H = 18;
export const EDGE_ROOM = 40; // px under the memory rows, where successor edges curve
export const ARROW_ID = "timeline-arrow";

export const ms = (iso) => Date.parse(iso);

// A session's turns in view, left to right, grouped while each is closer than TURN_GAP to the
// previous: [{session, turns, x0, x1}].
export function groupTurns(shown, x) {
  const bySession = new Map();
  for (const t of shown) {
    if (!bySession.has(t.session_id)) bySession.set(t.session_id, []);
    bySession.get(t.session_id).push(t);
  }
  const groups = [];
  for (const [session, turns] of bySession) {
    turns.sort((a, b) => ms(a.at) - ms(b.at) || a.seq - b.seq);
    let group = null;
    for (const t of turns) {
      const px = x(ms(t.at));
      if (group && px - group.x1 < TURN_GAP) {
        group.turns.push(t);
        group.x1 = px;
      } else {
        group = { session, turns: [t], x0: px, x1: px };
        groups.push(group);
      }
    }
  }
  return groups;
}

// When each memory was said: its earliest source turn in the data, else when it holds from.
export function memoryTimes(data) {
  const turnAt = new Map(data.turns.map((t) => [t.event_id, ms(t.at)]));
  const out = new Map();
  for (const m of data.memories) {
    const times = m.event_ids.map((e) => turnAt.get(e)).filter((t) => t !== undefined);
    out.set(m.id, times.length ? Math.min(...times) : ms(m.valid_from || m.created_at));
  }
  return out;
}

// The memories in view on rows, so that no two marks of a row are closer than MEM_GAP:
// [{m, t, px, row}] in time order.
export function placeMemories(data, times, x, inView) {
  const placed = [];
  const rowEnds = [];
  const order = data.memories.filter((m) => inView(times.get(m.id))).sort((a, b) => times.get(a.id) - times.get(b.id));
  for (const m of order) {
    const t = times.get(m.id);
    const px = x(t);
    let row = rowEnds.findIndex((end) => end <= px - MEM_GAP);
    if (row < 0) row = rowEnds.length;
    rowEnds[row] = px;
    placed.push({ m, t, px, row });
  }
  return placed;
}

// About how wide ``text`` is at the chart's 11px: CJK characters a full em, others about half.
function textWidth(text) {
  let w = 0;
  for (const ch of text) w += ch.codePointAt(0) >= 0x2e80 ? 11 : 6.2;
  return w;
}

// ``text`` cut to fit ``width`` px, or "" when not even a few characters fit.
export function fit(text, width) {
  const s = String(text ?? "").replace(/\s+/g, " ").trim();
  if (textWidth(s) <= width) return s;
  let out = "";
  for (const ch of s) {
    if (textWidth(`${out}${ch}…`) > width) break;
    out += ch;
  }
  return out.length >= 2 ? `${out}…` : "";
}

// How much room each placed memory has for its label: up to the next mark on its row.
export function labelRoom(placed, right) {
  const rows = new Map();
  for (const p of placed) {
    if (!rows.has(p.row)) rows.set(p.row, []);
    rows.get(p.row).push(p);
  }
  const room = new Map();
  for (const row of rows.values()) {
    row.forEach((p, i) => {
      const next = row[i + 1];
      room.set(p.m.id, (next ? next.px - 16 : right) - (p.px + 9));
    });
  }
  return room;
}

// A curve from (x1, y1) to (x2, y2) that dips under ``floor`` (the lowest memory mark), the
// further apart its ends the lower, so that edges cross the rows below them, not through them.
export function edgePath(x1, y1, x2, y2, floor) {
  const yb = floor + 10 + Math.min(EDGE_ROOM - 16, Math.abs(x2 - x1) * 0.05);
  const f = (v) => v.toFixed(1);
  return `M ${f(x1)} ${f(y1)} C ${f(x1)} ${f(yb)}, ${f(x2)} ${f(yb)}, ${f(x2)} ${f(y2)}`;
}

export function diamond(cx, cy) {
  return `M ${cx} ${cy - 6} L ${cx + 6} ${cy} L ${cx} ${cy + 6} L ${cx - 6} ${cy} Z`;
}

// The edges from superseded memories to their successors where either end is in view (or the
// range lies between them): [{from, to, toId, x1, y1, x2, y2, outside}]. An end out of view sits
// at the chart's edge on its side; a successor missing from the data (made from turns out of the
// loaded range) gets a short stub.
export function successorEdges(data, times, placed, view, x, memTop, rowY, bounds) {
  const at = new Map(placed.map((p) => [p.m.id, p]));
  const byId = new Map(data.memories.map((m) => [m.id, m]));
  const end = (id) => {
    const p = at.get(id);
    if (p) return { x: p.px, y: rowY(p.row) + 6 };
    const t = times.get(id);
    return { x: t < view.start ? bounds[0] : bounds[1], y: memTop + 6, off: true };
  };
  const edges = [];
  for (const m of data.memories) {
    if (!m.superseded_by || m.superseded_by === m.id) continue;
    const to = byId.get(m.superseded_by);
    const t1 = times.get(m.id);
    const t2 = to ? times.get(to.id) : t1;
    const visible = at.has(m.id) || (to && at.has(to.id)) || (Math.min(t1, t2) < view.start && Math.max(t1, t2) > view.end);
    if (!visible) continue;
    const a = end(m.id);
    const b = to ? end(to.id) : { x: Math.min(a.x + 34, bounds[1]), y: a.y };
    edges.push({ from: m, to, toId: m.superseded_by, x1: a.x, y1: a.y, x2: b.x, y2: b.y, outside: !to });
  }
  return edges;
}

// --- the hover label ---------------------------------------------------------------------------

// The label element of a chart: one per render, inside the chart's box.
export function makeTip() {
  return el("div", { id: "timeline-tip", class: "timeline-tip", role: "tooltip", hidden: true });
}

// Show ``lines()`` ([{text, cls}]) in ``tip`` by ``node`` while it is hovered or focused.
export function withTip(node, tip, lines) {
  const show = () => {
    tip.replaceChildren(...lines().map((line) => el("div", { class: line.cls || "tip-line", text: line.text })));
    tip.hidden = false;
    const box = tip.parentElement.getBoundingClientRect();
    const mark = node.getBoundingClientRect();
    const left = mark.left - box.left + mark.width / 2 - tip.offsetWidth / 2;
    tip.style.left = `${Math.max(0, Math.min(left, box.width - tip.offsetWidth))}px`;
    tip.style.top = `${mark.bottom - box.top + 6}px`;
    tip.dataset.for = node.dataset.id || node.dataset.eventId || node.dataset.session || "";
  };
  const hide = () => {
    tip.hidden = true;
  };
  node.addEventListener("mouseenter", show);
  node.addEventListener("focus", show);
  node.addEventListener("mouseleave", hide);
  node.addEventListener("blur", hide);
  return node;
}

// A mark that acts on click and on Enter or Space when focused.
export function actionable(node, action) {
  node.setAttribute("tabindex", "0");
  node.setAttribute("role", "button");
  node.addEventListener("click", action);
  node.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      action();
    }
  });
  return node;
}

export function clusterMark(group, y, tip, lines, onZoom) {
  const count = group.turns.length;
  const w = Math.max(group.x1 - group.x0 + 14, String(count).length * 6.5 + 12);
  const cx = (group.x0 + group.x1) / 2;
  const user = group.turns.some((t) => t.role === "user");
  const remembered = group.turns.some((t) => t.memory_ids.length);
  const g = svg(
    "g",
    {
      class: `turn-cluster${user ? " role-user" : " role-other"}${remembered ? " remembered" : ""}`,
      dataset: { session: group.session, count, first: group.turns[0].event_id },
      "aria-label": `${count} turns of session ${shorten(group.session, 40)}`,
    },
    svg("rect", { x: cx - w / 2, y: y - 7, width: w, height: 14, rx: 7 }),
    svg("text", { class: "cluster-count", x: cx, y: y + 4, "text-anchor": "middle", text: String(count) }),
  );
  return withTip(actionable(g, onZoom), tip, lines);
}
