// A memory's page: its history chain drawn as a graph (what it superseded, what superseded it,
// merges, consolidation sources), its half-life score over time with reinforcements marked, its
// source turns and what happened to it.
//
// Safety rule for every module of the inspector: data from the API is only ever written with
// textContent / text nodes / numeric SVG attributes, never parsed as HTML (see dom.js).

import { $, api, clearError, el, fieldRow, memoryPath, num, showError, state, svg, when } from "./dom.js";
import { arrowDefs, lineChart, shorten } from "./charts.js";
import { memoryHead, validityRows } from "./memories.js";
import { userZone } from "./zones.js";

// History actions drawn as edges, from the older memory to the newer one. Their mirror entries
// (supersedes, merged, consolidated) name the same link from the other side.
const EDGES = { superseded: "superseded by", merged_into: "merged into", consolidated_into: "consolidated into" };
const MIRRORS = { supersedes: "superseded", merged: "merged_into", consolidated: "consolidated_into" };
const NODE_W = 180;
const NODE_H = 46;
const GAP_X = 110;
const GAP_Y = 16;

export async function openMemoryPage(id) {
  state.pageOf = id;
  const out = $("memory-page-body");
  $("memory-page-of").textContent = id;
  clearError();
  try {
    const page = await api("GET", memoryPath(id, "/page"));
    if (state.pageOf !== id) return;
    // Every time of the page in the user's zone (the offset of their latest turn), named.
    const zone = userZone(page.user_offset_s);
    out.replaceChildren(
      summary(page.memory, zone),
      el("p", { class: "hint page-zone", text: `Times in ${zone.label}, the user's zone (the offset of their latest turn).` }),
      el("h3", { text: "History chain" }),
      chainGraph(page.chain, id, zone),
      el("h3", { text: "Score over time" }),
      scoreChart(page.score, zone),
      el("h3", { text: `Source turns (${page.source_turns.length})` }),
      sourceTurns(page, zone),
      el("h3", { text: "What happened" }),
      historyTable(page.chain.history, zone),
    );
  } catch (err) {
    out.replaceChildren();
    showError(err);
  }
}

function summary(m, zone) {
  return el(
    "div",
    { class: `memory-summary status-${m.status}`, dataset: { id: m.id, status: m.status } },
    memoryHead(m),
    el(
      "dl",
      { class: "facts" },
      validityRows(m, zone),
      m.due_at ? fieldRow("due", when(m.due_at, zone), "due") : null,
      m.status_reason ? fieldRow("status reason", m.status_reason) : null,
      fieldRow("id", m.id, "mono"),
    ),
  );
}

// Edges older -> newer from the history entries and superseded_by, each link once.
function edgesOf(chain) {
  const ids = new Set(chain.memories.map((m) => m.id));
  const edges = new Map();
  const add = (from, to, action) => {
    if (!from || !to || from === to || !ids.has(from) || !ids.has(to)) return;
    const key = `${from}>${to}`;
    if (!edges.has(key)) edges.set(key, { from, to, label: EDGES[action] });
  };
  for (const h of chain.history) {
    if (EDGES[h.action]) add(h.memory_id, h.related_id, h.action);
    else if (MIRRORS[h.action]) add(h.related_id, h.memory_id, MIRRORS[h.action]);
  }
  for (const m of chain.memories) if (m.superseded_by) add(m.id, m.superseded_by, "superseded");
  return [...edges.values()];
}

// Layers by longest path from a memory nothing points to: sources left, what they became right.
function layers(chain, edges) {
  const depth = new Map(chain.memories.map((m) => [m.id, 0]));
  for (let round = 0; round < chain.memories.length; round += 1) {
    let moved = false;
    for (const e of edges) {
      if (depth.get(e.to) < depth.get(e.from) + 1) {
        depth.set(e.to, depth.get(e.from) + 1);
        moved = true;
      }
    }
    if (!moved) break;
  }
  const columns = [];
  for (const m of chain.memories) (columns[depth.get(m.id)] ||= []).push(m);
  return columns.filter(Boolean);
}

function chainGraph(chain, focus, zone) {
  const edges = edgesOf(chain);
  const columns = layers(chain, edges);
  const tallest = Math.max(...columns.map((c) => c.length));
  const width = columns.length * (NODE_W + GAP_X) - GAP_X + 20;
  const height = tallest * (NODE_H + GAP_Y) - GAP_Y + 20;
  const at = new Map();
  columns.forEach((col, i) =>
    col.forEach((m, j) => {
      const offset = ((tallest - col.length) * (NODE_H + GAP_Y)) / 2;
      at.set(m.id, { x: 10 + i * (NODE_W + GAP_X), y: 10 + offset + j * (NODE_H + GAP_Y), m });
    }),
  );
  // Drawn at its natural size (scaled down only when wider than the page), so that its text
  // stays the size of the page's.
  const graph = svg("svg", { class: "chart chain-graph", viewBox: `0 0 ${width} ${height}`, width, height, role: "img" }, arrowDefs("arrow"));
  graph.append(svg("title", { text: `History chain of ${focus}: ${chain.memories.length} memories, ${edges.length} links` }));
  for (const e of edges) {
    const a = at.get(e.from);
    const b = at.get(e.to);
    const x1 = a.x + NODE_W;
    const y1 = a.y + NODE_H / 2;
    const x2 = b.x;
    const y2 = b.y + NODE_H / 2;
    graph.append(
      svg("path", { class: "edge", d: `M ${x1} ${y1} C ${x1 + GAP_X / 2} ${y1} ${x2 - GAP_X / 2} ${y2} ${x2} ${y2}`, "marker-end": "url(#arrow)", dataset: { from: e.from, to: e.to, label: e.label } }),
      // Near the source, where edges into one memory are still apart.
      svg("text", { class: "edge-label", x: x1 + 4, y: y1 - 5, text: e.label }),
    );
  }
  for (const { x, y, m } of at.values()) {
    graph.append(
      svg(
        "g",
        { class: `node status-${m.status}${m.id === focus ? " focus" : ""}`, dataset: { id: m.id, status: m.status }, onclick: () => m.id !== focus && openMemoryPage(m.id) },
        svg("rect", { x, y, width: NODE_W, height: NODE_H, rx: 5 }),
        svg("text", { class: "node-status", x: x + 6, y: y + 14, text: `${m.type} · ${m.status}` }),
        svg("text", { class: "node-content", x: x + 6, y: y + 32, text: shorten(m.content, 24) }),
        svg("title", { text: `${m.content}\n${m.status} · valid ${when(m.valid_from, zone)} – ${when(m.valid_to, zone)}` }),
      ),
    );
  }
  return el("div", { class: "graph-wrap" }, graph, el("p", { class: "hint", text: `${chain.memories.length} memories, ${edges.length} links; click a memory to open its page.` }));
}

function scoreChart(score, zone) {
  const points = score.points.map((p) => ({ t: Date.parse(p.at), v: p.score }));
  const valueAt = (t) => {
    let v = points.length ? points[0].v : 0;
    for (const p of points) if (p.t <= t) v = p.v;
    return v;
  };
  const markers = score.reinforcements.map((r) => {
    const t = Date.parse(r.at);
    return { t, v: valueAt(t), cls: `reinforcement ${r.source}`, label: `${when(r.at, zone)}: +${r.uses} use${r.uses > 1 ? "s" : ""} (${r.source === "repeat" ? `repeated by ${r.event_id || "a turn"}` : "recalled"})` };
  });
  const guides = score.archive_threshold > 0 ? [{ v: score.archive_threshold, label: `archive under ${num(score.archive_threshold)}` }] : [];
  return el(
    "div",
    { class: "score-wrap" },
    lineChart(points, { markers, guides, cls: "score-curve", zone }),
    el(
      "p",
      { class: "hint" },
      `R = S·γ^t + B·ln(1+N): importance S ${num(score.importance)}, γ ${score.gamma} per ${score.unit_hours} h, B ${score.base}; `,
      `${score.reinforcements.length} reinforcement${score.reinforcements.length === 1 ? "" : "s"} marked; stored score ${num(score.stored_score)}.`,
    ),
  );
}

function sourceTurns(page, zone) {
  if (!page.source_turns.length && !page.missing_sources.length) return el("p", { class: "hint", text: "No source turns (made by consolidation or the API)." });
  return el(
    "ol",
    { class: "turns source-turns" },
    page.source_turns.map((t) =>
      el(
        "li",
        { dataset: { eventId: t.event_id } },
        el("span", { class: "hint turn-at", text: `${t.session_id} #${t.seq} ${when(t.at, zone)} ${t.role} ` }),
        el("span", { class: "content", text: t.content }),
      ),
    ),
    page.missing_sources.map((e) => el("li", { class: "hint" }, "event ", el("span", { class: "mono", text: e }), " (no longer stored)")),
  );
}

function historyTable(history, zone) {
  return el(
    "table",
    { class: "entries" },
    el("thead", {}, el("tr", {}, ["at", "memory", "action", "related", "reason", "judge"].map((h) => el("th", { text: h })))),
    el(
      "tbody",
      {},
      history.map((h) =>
        el(
          "tr",
          { dataset: { action: h.action } },
          el("td", { class: "at", text: when(h.at, zone) }),
          el("td", { class: "mono", text: shorten(h.memory_id, 13) }),
          el("td", { class: "action", text: h.action }),
          el("td", { class: "mono", text: h.related_id ? shorten(h.related_id, 13) : "—" }),
          el("td", { class: "reason", text: h.reason || "" }),
          el("td", { text: h.judge || "" }),
        ),
      ),
    ),
  );
}
