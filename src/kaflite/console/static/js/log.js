// Client log: the live stream of control-plane events from the registry and from kaflite's
// own clients, filtered by client and by kind.
import { ROUTES, api, el, stream } from "./core.js";
import { VTable } from "./vtable.js";

const MAX_ROWS = 5000;
const time = (t) => new Date(t * 1000).toISOString().slice(11, 23);

const COLUMNS = [
  { key: "t", label: "time (UTC)", text: (e) => time(e.t), sort: (e) => e.id },
  { key: "source", label: "source", text: (e) => e.source },
  { key: "client", label: "client id", grow: 1, text: (e) => e.client_id ?? "" },
  { key: "broker", label: "broker", text: (e) => e.broker ?? "" },
  { key: "kind", label: "kind", text: (e) => e.kind, cls: (e) => (e.kind === "error" ? "state-down" : "") },
  { key: "message", label: "message", grow: 4, max: 48, text: (e) => e.message + (e.cause ? ` (cause: ${e.cause})` : "") },
];

export function mount(root) {
  const rows = [];
  const seen = new Set();
  const kinds = new Set();
  const clients = new Set();
  const table = new VTable(COLUMNS, { key: (e) => e.id, name: "log", height: "70vh" });
  const client = el("input#log-client", { type: "search", placeholder: "client id", list: "log-clients" });
  const clientList = el("datalist#log-clients");
  const kind = el("select#log-kind", null, el("option", { value: "", text: "every kind" }));
  const text = el("input#log-text", { type: "search", placeholder: "text…" });
  const follow = el("input", { type: "checkbox", checked: true });
  for (const input of [client, kind, text]) input.addEventListener("input", () => render());
  root.append(el("section.card", null, el("h2", { text: "Client log" }),
    el("div.toolbar", null, client, clientList, kind, text, el("label", null, follow, " follow"), table.count),
    table.root));

  let pending = 0;
  function render() {
    pending = 0;
    const c = client.value.trim();
    const k = kind.value;
    const view = rows.filter((e) => (!c || (e.client_id ?? "").includes(c)) && (!k || e.kind === k));
    table.setRows(view);
    table.setFilter(text.value);
    if (follow.checked) table.root.scrollTop = table.root.scrollHeight;
  }
  function add(e) {
    if (seen.has(e.id)) return;
    seen.add(e.id);
    rows.push(e);
    if (rows.length > MAX_ROWS) seen.delete(rows.shift().id);
    if (!kinds.has(e.kind)) {
      kinds.add(e.kind);
      kind.append(el("option", { value: e.kind, text: e.kind }));
    }
    if (e.client_id && !clients.has(e.client_id)) {
      clients.add(e.client_id);
      clientList.append(el("option", { value: e.client_id }));
    }
    if (!pending) pending = requestAnimationFrame(render);
  }
  let stop = () => {};
  let stopped = false;
  api("GET", ROUTES.events).then((list) => {
    list.forEach(add);
    render();
    root.dataset.ready = "1";
  }).finally(() => {
    if (!stopped) stop = stream({ log: add });
  });
  return () => {
    stopped = true;
    stop();
  };
}
