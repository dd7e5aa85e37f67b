// Light and dark: the page follows the system's colour scheme (prefers-color-scheme) until
// the header's switch picks one, which is remembered (localStorage). console.css gives
// every colour as a custom property with light-dark(); data-theme on <html> fixes the
// scheme. Canvas drawings (the charts) read the colours through themeColor and redraw on
// the "kaflite-theme" event.
const KEY = "kaflite-console-theme";
const CHOICES = ["system", "light", "dark"];
const media = window.matchMedia("(prefers-color-scheme: dark)");
const cache = new Map();
let probe = null;

function stored() {
  try {
    const v = localStorage.getItem(KEY);
    return CHOICES.includes(v) ? v : "system";
  } catch {
    return "system";   // storage refused (a locked-down profile): follow the system
  }
}

function remember(choice) {
  try {
    if (choice === "system") localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, choice);
  } catch {
    // not remembered; the page still switches
  }
}

function changed() {
  cache.clear();
  document.documentElement.dataset.scheme = currentScheme();
  window.dispatchEvent(new CustomEvent("kaflite-theme", { detail: currentScheme() }));
}

// The scheme shown now: "light" or "dark".
export function currentScheme() {
  const chosen = document.documentElement.dataset.theme;
  if (chosen === "light" || chosen === "dark") return chosen;
  return media.matches ? "dark" : "light";
}

export function setTheme(choice) {
  const root = document.documentElement;
  if (choice === "light" || choice === "dark") root.dataset.theme = choice;
  else delete root.dataset.theme;
  remember(CHOICES.includes(choice) ? choice : "system");
  changed();
}

// A colour of the theme (a custom property's name, e.g. "--fg") as the browser resolves it.
export function themeColor(name) {
  if (!cache.has(name)) {
    if (!probe) {
      probe = document.createElement("span");
      probe.setAttribute("aria-hidden", "true");
      probe.style.display = "none";
      document.body.append(probe);
    }
    probe.style.color = `var(${name})`;
    cache.set(name, getComputedStyle(probe).color);
  }
  return cache.get(name);
}

// The header's <select>: system, light or dark.
export function initTheme(select) {
  const choice = stored();
  setTheme(choice);
  if (!select) return;
  select.value = choice;
  select.addEventListener("change", () => setTheme(select.value));
  media.addEventListener("change", () => {
    if (!document.documentElement.dataset.theme) changed();
  });
}
