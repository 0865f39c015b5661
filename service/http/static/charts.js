// Small charts drawn as SVG or plain elements: bars, columns, a line with markers, time axes.
// No library: each chart is a few shapes, and every label is text.
//
// Safety rule for every module of the inspector: data from the API is only ever written with
// textContent / text nodes / numeric SVG attributes, never parsed as HTML (see dom.js).

import { el, num, svg } from "./dom.js";
import { stamp } from "./zones.js";

const DAY_MS = 86_400_000;

// Horizontal bars, one per row: [{key, label, value, title?}], scaled to ``max`` (default: the
// largest value). The fill's width is set through the CSSOM (allowed by the page's CSP).
export function bars(rows, { max, cls = "", format = (v) => num(v, 4) } = {}) {
  const top = max ?? Math.max(0, ...rows.map((r) => r.value));
  return el(
    "ul",
    { class: `bars ${cls}` },
    rows.map((r) => {
      const fill = el("span", { class: "fill" });
      fill.style.width = `${top > 0 ? Math.max(0, Math.min(1, r.value / top)) * 100 : 0}%`;
      return el(
        "li",
        { dataset: { key: r.key }, title: r.title || `${r.label}: ${format(r.value)}` },
        el("span", { class: "bar-label", text: r.label }),
        el("span", { class: "bar" }, fill),
        el("span", { class: "bar-value", text: format(r.value) }),
      );
    }),
  );
}

// One bar split into segments: [{key, value}] in the given order, each a share of ``total``.
export function stacked(segments, total) {
  const bar = el("span", { class: "bar stacked" });
  for (const s of segments) {
    if (!s.value) continue;
    const part = el("span", { class: `seg seg-${s.key}`, title: `${s.key}: ${s.value}` });
    part.style.width = `${total > 0 ? (s.value / total) * 100 : 0}%`;
    bar.append(part);
  }
  return bar;
}

// Columns: [{label, value, title?}] left to right, with the largest value on the y axis and
// every ``labelEvery``-th label under its column.
export function columns(data, { width = 640, height = 160, cls = "", labelEvery = 1 } = {}) {
  const pad = { left: 34, right: 6, top: 8, bottom: 22 };
  const w = width - pad.left - pad.right;
  const h = height - pad.top - pad.bottom;
  const top = Math.max(1, ...data.map((d) => d.value));
  const step = data.length ? w / data.length : w;
  const chart = svg("svg", { class: `chart columns ${cls}`, viewBox: `0 0 ${width} ${height}`, role: "img" });
  chart.append(
    svg("line", { class: "axis", x1: pad.left, y1: pad.top + h, x2: pad.left + w, y2: pad.top + h }),
    svg("text", { class: "tick", x: pad.left - 4, y: pad.top + 8, "text-anchor": "end", text: String(top) }),
    svg("text", { class: "tick", x: pad.left - 4, y: pad.top + h, "text-anchor": "end", text: "0" }),
  );
  data.forEach((d, i) => {
    const bh = (d.value / top) * h;
    const x = pad.left + i * step;
    chart.append(
      svg(
        "rect",
        { class: "col", x: x + step * 0.1, y: pad.top + h - bh, width: Math.max(1, step * 0.8), height: bh, dataset: { label: d.label, value: d.value } },
        svg("title", { text: d.title || `${d.label}: ${d.value}` }),
      ),
    );
    if (i % labelEvery === 0) {
      chart.append(svg("text", { class: "tick", x: x + step / 2, y: height - 6, "text-anchor": "middle", text: d.label }));
    }
  });
  return chart;
}

// A time scale over [start, end] (ms) onto [x0, x1] pixels.
export function timeScale(start, end, x0, x1) {
  const span = Math.max(1, end - start);
  return (t) => x0 + ((t - start) / span) * (x1 - x0);
}

// Tick labels for a time axis: about ``count`` moments, as dates (or date and hour when the span
// is under three days), in ``zone`` (zones.js) when given, else in UTC.
export function timeTicks(start, end, count = 6, zone = null) {
  const span = Math.max(1, end - start);
  // Hours shown when the ticks are less than two days apart, so that no two ticks read alike.
  const short = span / count < 2 * DAY_MS;
  const out = [];
  for (let i = 0; i <= count; i += 1) {
    const t = start + (span * i) / count;
    const text = zone ? stamp(t, zone) : new Date(t).toISOString().slice(0, 16).replace("T", " ");
    out.push({ t, label: short ? text.slice(5, 16) : text.slice(0, 10) });
  }
  return out;
}

// A line over time: points [{t, v}] (t in ms), markers [{t, v, label, cls}] drawn as dots on it,
// and optional horizontal ``guides`` [{v, label}]; the time axis in ``zone`` (zones.js), else UTC.
export function lineChart(points, { markers = [], guides = [], width = 720, height = 220, cls = "", zone = null } = {}) {
  const pad = { left: 40, right: 10, top: 10, bottom: 26 };
  const chart = svg("svg", { class: `chart line ${cls}`, viewBox: `0 0 ${width} ${height}`, role: "img" });
  if (!points.length) return chart;
  const start = points[0].t;
  const end = points[points.length - 1].t;
  const top = Math.max(1e-9, ...points.map((p) => p.v), ...guides.map((g) => g.v)) * 1.08;
  const x = timeScale(start, end, pad.left, width - pad.right);
  const y = (v) => pad.top + (1 - v / top) * (height - pad.top - pad.bottom);
  const base = height - pad.bottom;
  chart.append(svg("line", { class: "axis", x1: pad.left, y1: base, x2: width - pad.right, y2: base }));
  chart.append(svg("line", { class: "axis", x1: pad.left, y1: pad.top, x2: pad.left, y2: base }));
  for (const v of [0, top / 2, top / 1.08]) {
    chart.append(svg("text", { class: "tick", x: pad.left - 4, y: y(v) + 4, "text-anchor": "end", text: num(v, 2) }));
  }
  for (const tick of timeTicks(start, end, 5, zone)) {
    chart.append(svg("text", { class: "tick", x: x(tick.t), y: height - 8, "text-anchor": "middle", text: tick.label }));
  }
  for (const g of guides) {
    chart.append(
      svg("line", { class: "guide", x1: pad.left, y1: y(g.v), x2: width - pad.right, y2: y(g.v) }),
      svg("text", { class: "tick guide-label", x: width - pad.right - 2, y: y(g.v) - 3, "text-anchor": "end", text: g.label }),
    );
  }
  const d = points.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
  chart.append(svg("path", { class: "series", d }));
  for (const m of markers) {
    chart.append(
      svg(
        "circle",
        { class: `marker ${m.cls || ""}`, cx: x(m.t), cy: y(m.v), r: 5, dataset: { at: new Date(m.t).toISOString() } },
        svg("title", { text: m.label }),
      ),
    );
  }
  return chart;
}

// An arrowhead marker for graph edges, defined once per SVG.
export function arrowDefs(id) {
  return svg(
    "defs",
    {},
    svg(
      "marker",
      { id, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }),
    ),
  );
}

export function shorten(text, n) {
  const s = String(text ?? "");
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
