// A panel that needs what only a kaflite cluster has (/api/info's features: connections,
// chaos): started when the backend has it, else a card that says why.
import { clear, el, info } from "./core.js";

// withFeature(root, {feature, id, title, message}, start): start() (which returns a stop
// function) once /api/info says the feature is there; returns the panel's stop function.
export function withFeature(root, { feature, id, title, message }, start) {
  let stop = () => {};
  let alive = true;
  info().then((i) => {
    if (!alive) return;
    if (i.features && i.features[feature] === false) {
      clear(root).append(el(`section.card#${id}`, null, el("h2", { text: title }), el("div.muted", { text: message })));
      root.dataset.ready = "1";
      return;
    }
    stop = start();
  });
  return () => {
    alive = false;
    stop();
  };
}
