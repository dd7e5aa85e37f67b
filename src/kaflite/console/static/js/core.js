// The page's plumbing: DOM helpers, the JSON API (with the token), live streams, messages.
// Every route the page calls is named in ROUTES, so the contract lives in one place.

export const ROUTES = {
  info: "/api/info",
  cluster: "/api/cluster",
  partitions: "/api/partitions",
  topics: "/api/topics",
  topic: (t) => `/api/topics/${enc(t)}`,
  topicConfigs: (t) => `/api/topics/${enc(t)}/configs`,
  topicPartitions: (t) => `/api/topics/${enc(t)}/partitions`,
  messages: (t) => `/api/topics/${enc(t)}/messages`,
  produce: "/api/produce",
  groups: "/api/groups",
  group: (g) => `/api/groups/${enc(g)}`,
  groupReset: (g) => `/api/groups/${enc(g)}/reset`,
  lagHistory: (g) => `/api/groups/${enc(g)}/lag-history`,
  sharePartitions: (g) => `/api/groups/${enc(g)}/share-partitions`,
  users: "/api/users",
  user: (u) => `/api/users/${enc(u)}`,
  acls: "/api/acls",
  aclDelete: "/api/acls/delete",
  quotas: "/api/quotas",
  connections: "/api/connections",
  clients: "/api/clients",
  fanout: "/api/fanout",
  events: "/api/events",
  series: "/api/series",
  stream: "/api/stream",
  health: "/api/health",
  recovery: "/api/recovery",
  // chaos (kaflite backend), as in cluster/http.py
  faults: "/faults",
  fault: (kind) => `/faults/${kind}`,
  broker: (id, action) => `/brokers/${id}/${action}`,
  moveLeader: "/leaders/move",
  moveCoordinator: "/coordinators/move",
};

export const enc = encodeURIComponent;

// el("tag.class#id", {attrs}, ...children): a small hyperscript.
export function el(spec, attrs, ...children) {
  const m = /^([a-z0-9]+)((?:[.#][\w-]+)*)$/i.exec(spec);
  const node = document.createElement(m ? m[1] : spec);
  if (m && m[2]) {
    for (const part of m[2].match(/[.#][\w-]+/g)) {
      if (part[0] === ".") node.classList.add(part.slice(1));
      else node.id = part.slice(1);
    }
  }
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k === "text") node.textContent = v;
      else if (k === "value") node.value = v;
      else node.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

// -- the token ---------------------------------------------------------------------------
// `kaflite up` / `kaflite console` print a URL with ?token=...; the page keeps it for the
// session and sends it with every request that changes state.
const TOKEN_KEY = "kaflite-console-token";

export function token() {
  const fromUrl = new URLSearchParams(location.search).get("token");
  if (fromUrl) sessionStorage.setItem(TOKEN_KEY, fromUrl);
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// The token box takes the console token, or a user of the cluster as user:password (a
// cluster with SASL users: sent as HTTP Basic and checked against its credential store).
// A console token never holds a colon.
function authorization(t) {
  if (!t.includes(":")) return `Bearer ${t}`;
  const bytes = new TextEncoder().encode(t);
  return `Basic ${btoa(String.fromCharCode(...bytes))}`;
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function api(method, path, body, query) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
    }
    const s = q.toString();
    if (s) url += (url.includes("?") ? "&" : "?") + s;
  }
  const headers = { Accept: "application/json" };
  const t = token();
  if (t && method !== "GET") headers.Authorization = authorization(t);
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(url, init);
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!resp.ok) {
    const msg = data && typeof data === "object" && data.error ? data.error : String(text || resp.statusText);
    throw new ApiError(resp.status, msg);
  }
  return data;
}

// -- messages --------------------------------------------------------------------------------
export function notify(text, kind = "info") {
  const box = document.getElementById("notices");
  const note = el(`div.notice.${kind}`, { role: kind === "error" ? "alert" : "status", text });
  box.prepend(note);
  while (box.children.length > 5) box.lastChild.remove();
  setTimeout(() => note.remove(), kind === "error" ? 15000 : 5000);
}

// Run an action from a form or button: show its error inline (and as a notice), its result
// as a notice. Returns the result or undefined.
export async function act(label, fn, errorBox) {
  if (errorBox) errorBox.textContent = "";
  try {
    const result = await fn();
    notify(`${label}: done`, "ok");
    return result;
  } catch (err) {
    const msg = err instanceof ApiError ? `${label} refused (${err.status}): ${err.message}` : `${label} failed: ${err.message}`;
    if (errorBox) errorBox.textContent = msg;
    notify(msg, "error");
    return undefined;
  }
}

// -- live data -------------------------------------------------------------------------------
// ?snapshot: the page draws its panel once and then keeps still: no event stream, no
// polling. A headless `chromium --screenshot --virtual-time-budget=…` (CI thumbnails, a
// scripted check with --dump-dom) then finishes: virtual time stands still while any
// request is open, and a live page always has one (its stream).
export const SNAPSHOT = new URLSearchParams(location.search).has("snapshot");

// stream({kind: handler}): one Server-Sent-Events connection for the kinds named, each event
// handed to its handler as parsed JSON. Returns a stop function.
export function stream(handlers) {
  if (SNAPSHOT) return () => {};
  const kinds = Object.keys(handlers).filter((k) => k !== "open");
  const source = new EventSource(`${ROUTES.stream}?kinds=${kinds.join(",")}`);
  source.addEventListener("hello", () => {
    setStatus("live");
    if (handlers.open) handlers.open();
  });
  for (const kind of kinds) {
    source.addEventListener(kind, (ev) => handlers[kind](JSON.parse(ev.data)));
  }
  source.onerror = () => setStatus("reconnecting…");
  return () => source.close();
}

// poll(fn, interval): call fn now and then every interval ms after each call ends
// (interval may be a function, asked each time).
export function poll(fn, interval) {
  let stopped = false;
  let timer = null;
  const tick = async () => {
    if (stopped) return;
    try {
      await fn();
      setStatus(`${SNAPSHOT ? "snapshot" : "updated"} ${new Date().toISOString().slice(11, 19)} UTC`);
    } catch (err) {
      setStatus(`offline: ${err.message}`);
    }
    if (!stopped && !SNAPSHOT) timer = setTimeout(tick, typeof interval === "function" ? interval() : interval);
  };
  tick();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

// The console's /api/info, fetched once.
let infoPromise = null;
export function info() {
  if (!infoPromise) infoPromise = api("GET", ROUTES.info).catch(() => ({ backend: "unknown", features: {} }));
  return infoPromise;
}

export function setStatus(text) {
  const s = document.getElementById("status");
  if (s && s.textContent !== text) s.textContent = text;
}

// -- formatting --------------------------------------------------------------------------------
export function fmtBytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}

export function fmtTime(ms) {
  if (ms === null || ms === undefined || ms < 0) return "";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}

export function fmtNum(n) {
  return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US");
}

// A <form>'s fields as an object (empty strings left out).
export function formData(form) {
  const out = {};
  for (const [k, v] of new FormData(form).entries()) {
    if (typeof v === "string" && v.trim() !== "") out[k] = v.trim();
  }
  return out;
}

export function field(label, input) {
  return el("label.field", null, el("span", { text: label }), input);
}
