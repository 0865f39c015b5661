// The recall view: the query's items with the paths that found them and their component scores
// as bars, what the relevance floor and the budget cut, the trace, and the prompt block.
//
// Safety rule for every module of the inspector: data from the API (memory content, ids, reasons,
// cues, errors) is only ever written with textContent / text nodes / form values / numeric SVG
// attributes, never parsed as HTML. There is no innerHTML, insertAdjacentHTML, document.write or
// eval, and no data goes into an href or src (the one link, Flower's, is the server's setting and
// is shown only when it is an http(s) URL). The Content-Security-Policy admits only these scripts
// and the stylesheet.

import { $, ApiError, api, clearError, el, fieldRow, num, showError, state } from "./dom.js";
import { bars } from "./charts.js";

// The components drawn as bars, in this order; each bar is scaled to the largest value of its
// component in this answer, so the bars compare the items with one another.
const COMPONENTS = [
  ["cue_score", "cues"],
  ["vector_score", "vector"],
  ["keyword_score", "keywords"],
  ["turn_vector_score", "log vector"],
  ["turn_keyword_score", "log keywords"],
  ["turn_alone_score", "log turn alone"],
  ["half_life_score", "half-life"],
  ["relevance", "relevance"],
  ["rerank_score", "rerank"],
];

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
    if (k === "paths" || k === "matched_cues" || k === "moved_by" || k === "features") continue;
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
    fieldRow(
      "moved most by",
      (ex.moved_by || []).map((m) => `${m.feature} ${m.logit >= 0 ? "+" : ""}${num(m.logit, 3)}`).join(", ") || "—",
      "moved-by",
    ),
    ex.features ? fieldRow("features", keyValues(ex.features, "features"), "features") : null,
    Object.keys(other).length ? fieldRow("other", keyValues(other)) : null,
  );
}

function componentBars(item, top) {
  const ex = item.explanation || {};
  const rows = COMPONENTS.filter(([key]) => typeof ex[key] === "number").map(([key, label]) => ({ key, label, value: ex[key] }));
  const drawn = el("div", { class: "components" });
  for (const r of rows) drawn.append(bars([r], { max: top[r.key], cls: "component" }));
  return drawn;
}

function recallItem(item, top) {
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
    el("ul", { class: "paths-found" }, ((item.explanation || {}).paths || []).map((p) => el("li", { class: `path path-${p}`, text: p }))),
    componentBars(item, top),
    el("details", { class: "explained" }, el("summary", { text: "explanation" }), explanationNode(item.explanation)),
  );
}

function largest(items) {
  const top = {};
  for (const item of items) {
    for (const [key] of COMPONENTS) {
      const v = (item.explanation || {})[key];
      if (typeof v === "number") top[key] = Math.max(top[key] || 0, Math.abs(v));
    }
  }
  return top;
}

// The items the floor left out of the answer they would have been in, best first: what recall
// saw just below its cut, so that "left out nothing" is only said when nothing was.
function belowCut(floor) {
  const below = floor.below_cut || [];
  if (!below.length) return null;
  return el(
    "ol",
    { class: "below-cut" },
    below.map((b) =>
      el(
        "li",
        { class: "below-item", dataset: { id: b.id } },
        el("span", { class: "badge type", text: b.type }),
        el("span", { class: "metric", text: ` relevance ${num(b.relevance, 3)} ` }),
        el("span", { class: "reason", text: b.why || b.reason }),
        el("p", { class: "content", text: b.content }),
      ),
    ),
  );
}

function cutNode(trace) {
  const floor = trace.floor || {};
  const cut = Object.entries(floor.cut || {});
  const budget = trace.budget;
  const minimum = typeof floor.min_relevance === "number" ? ` (minimum relevance ${num(floor.min_relevance, 3)})` : "";
  return el(
    "div",
    { class: "cuts" },
    el(
      "p",
      { class: "floor-cut" },
      cut.length
        ? `The relevance floor${minimum} left out ${cut.reduce((a, [, n]) => a + n, 0)}: ` + cut.map(([r, n]) => `${n} ${(floor.cut_reasons || {})[r] || r}`).join(", ")
        : `The relevance floor${minimum} left out nothing.`,
    ),
    belowCut(floor),
    budget
      ? el("p", { class: "budget-cut", text: `Budget ${budget.tokens} tokens: kept ${budget.kept}, cut ${budget.dropped}.` })
      : el("p", { class: "hint budget-cut", text: "No token budget: the top k are returned." }),
  );
}

export async function runRecall() {
  const out = $("recall-result");
  clearError();
  if (!state.user) {
    showError(new ApiError(0, "invalid_input", "pick a user first", [{ field: "user_id", problem: "must not be empty" }]));
    return;
  }
  const k = Number.parseInt($("recall-k").value, 10);
  const budget = Number.parseInt($("recall-budget").value, 10);
  try {
    const result = await api("POST", "recall", {
      body: {
        user_id: state.user,
        query: $("query").value,
        k: Number.isFinite(k) ? k : 5,
        include_history: $("include-history").checked,
        reinforce: false,
        budget_tokens: budget > 0 ? budget : undefined,
      },
    });
    const top = largest(result.items);
    const trace = result.trace || {};
    out.replaceChildren(
      el("p", { class: "stage" }, "Stage: ", el("strong", { class: "stage-name", text: result.stage })),
      result.items.length
        ? el("ol", { class: "recall-items" }, result.items.map((item) => recallItem(item, top)))
        : el("p", { class: "hint", text: "Nothing recalled." }),
      cutNode(trace),
      el("h3", { text: "The prompt block, as the model sees it" }),
      el("pre", { class: "prompt-block", text: result.prompt || "" }),
      el(
        "details",
        { class: "trace" },
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
    );
  } catch (err) {
    out.replaceChildren();
    showError(err);
  }
}
