// The router: one panel at a time, chosen by the URL's #fragment; a panel is a module
// whose mount(root) draws it and returns a function that stops its live updates.
import { SNAPSHOT, clear, info, setToken, token } from "./core.js";
import { initTheme } from "./theme.js";

const PANELS = {
  cluster: () => import("./cluster.js"),
  topics: () => import("./topics.js"),
  produce: () => import("./produce.js"),
  groups: () => import("./groups.js"),
  security: () => import("./security.js"),
  connections: () => import("./connections.js"),
  fanout: () => import("./fanlive.js"),
  log: () => import("./log.js"),
  chaos: () => import("./chaos.js"),
  charts: () => import("./charts.js"),
  health: () => import("./health.js"),
};

let stop = null;
let generation = 0;

async function show() {
  const [name, arg] = (location.hash.slice(1) || "cluster").split("/", 2);
  const panel = PANELS[name] ? name : "cluster";
  const mine = ++generation;
  if (stop) stop();
  stop = null;
  const root = clear(document.getElementById("panel"));
  root.dataset.panel = panel;
  root.dataset.ready = "";
  for (const a of document.querySelectorAll("#tabs a")) {
    a.classList.toggle("active", a.dataset.panel === panel);
  }
  const mod = await PANELS[panel]();
  if (mine !== generation) return;
  stop = mod.mount(root, arg ? decodeURIComponent(arg) : undefined);
}

function initToken() {
  const input = document.getElementById("token");
  input.value = token();
  input.addEventListener("change", () => setToken(input.value.trim()));
  // Keep the token out of the address bar once it is stored (and ?snapshot in it).
  const query = new URLSearchParams(location.search);
  if (query.has("token")) {
    query.delete("token");
    const rest = query.toString();
    history.replaceState(null, "", location.pathname + (rest ? `?${rest}` : "") + location.hash);
  }
}

if (SNAPSHOT) document.documentElement.dataset.snapshot = "1";
window.addEventListener("hashchange", show);
initTheme(document.getElementById("theme"));
initToken();
info().then((i) => {
  const backend = document.getElementById("backend");
  backend.textContent = `${i.backend} · ${i.bootstrap ?? ""}`;
  backend.title = `what this console talks to: ${backend.textContent}`;
});
show();
