// The inspector's shared parts: state, DOM and SVG helpers (text only), the API, messages.
//
// Safety rule for every module of the inspector: data from the API (memory content, ids, reasons,
// cues, errors) is only ever written with textContent / text nodes / form values / numeric SVG
// attributes, never parsed as HTML. There is no innerHTML, insertAdjacentHTML, document.write or
// eval, and no data goes into an href or src (the one link, Flower's, is the server's setting and
// is shown only when it is an http(s) URL). The Content-Security-Policy admits only these scripts
// and the stylesheet.

import { stampIso } from "./zones.js";

export const API = new URL("../v1/", document.baseURI); // the page lives at <root>/inspector/
export const KEY_STORE = "cuemem.inspector.key";
export const USER_STORE = "cuemem.inspector.user";

export const state = {
  key: "",
  user: "",
  offset: 0,
  total: 0,
  usersOffset: 0,
  historyOf: null, // memory id whose history is open
  busy: 0,
  listing: 0, // the latest listing request: an older answer arriving later is dropped
};

export const $ = (id) => document.getElementById(id);
// --- DOM helpers (text only) -------------------------------------------------------------------

export function el(tag, props = {}, ...children) {
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

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// An ISO time from the API as a person reads it: in ``zone`` (zones.js; the user's, userZone) and
// named, "2026-10-14 15:00 UTC+08:00"; without a zone (a tenant's views), as sent, in UTC.
export function when(iso, zone) {
  if (!iso) return "—";
  if (zone) return `${stampIso(iso, zone)} ${zone.label}`;
  return String(iso).replace("T", " ").replace(/\.\d+/, "");
}

export function num(value, digits = 3) {
  if (typeof value !== "number" || !Number.isFinite(value)) return String(value);
  return Number.isInteger(value) ? String(value) : value.toFixed(digits).replace(/0+$/, "").replace(/\.$/, "");
}

export function fieldRow(label, value, cls) {
  return [el("dt", { text: label }), el("dd", { class: cls }, value === null || value === undefined || value === "" ? "—" : value)];
}

// --- the API -----------------------------------------------------------------------------------

export class ApiError extends Error {
  constructor(status, code, message, fields) {
    super(message);
    this.status = status;
    this.code = code;
    this.fields = Array.isArray(fields) ? fields : [];
  }
}

export async function api(method, path, { body, params } = {}) {
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

export const seg = encodeURIComponent;
export const memoryPath = (id, suffix = "") => `users/${seg(state.user)}/memories/${seg(id)}${suffix}`;

// --- messages ----------------------------------------------------------------------------------

export function errorNodes(err) {
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
  if (err instanceof ApiError && err.status === 401) {
    nodes.push(
      el(
        "p",
        { class: "error-help" },
        "Paste a key of this tenant under API key. To make one: ",
        el("code", { text: "cuemem keys create --tenant default --name inspector" }),
        "; on your own machine ",
        el("code", { text: "cuemem serve --no-auth" }),
        " needs none.",
      ),
    );
  }
  return nodes;
}

export function showError(err, where = $("error")) {
  where.replaceChildren(...errorNodes(err));
  where.hidden = false;
  if (where === $("error")) where.scrollIntoView({ block: "nearest" });
}

export function clearError(where = $("error")) {
  where.replaceChildren();
  where.hidden = true;
}

export function notify(message) {
  $("notice").textContent = message;
}

const SVG_NS = "http://www.w3.org/2000/svg";

// An SVG element: attributes are numbers or fixed names; text only through ``text``.
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else if (name === "class") node.setAttribute("class", value);
    else if (name === "dataset") for (const [k, v] of Object.entries(value)) node.dataset[k] = String(v);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Ask another view to open something (a memory's page, a tab) without importing it.
export function request(name, detail) {
  document.dispatchEvent(new CustomEvent(`inspector:${name}`, { detail }));
}
