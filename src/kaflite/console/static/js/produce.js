// Produce: a form, then what the client did, step by step (seed 003's produce panel, real).
import { ROUTES, act, api, clear, el, field, fmtTime, formData } from "./core.js";
import { parsePairs } from "./topics.js";

export function mount(root) {
  const err = el("div.error-text#produce-error");
  const out = el("div#produce-result");
  const topics = el("datalist#produce-topics");
  const form = el("form.inline#produce", null,
    field("topic", el("input", { name: "topic", required: true, list: "produce-topics" })),
    field("key (empty: no key)", el("input", { name: "key" })),
    field("value", el("textarea", { name: "value", rows: 2, cols: 40 })),
    field("headers (name=value per line)", el("textarea", { name: "headers", rows: 2, cols: 24 })),
    field("partition (empty: the partitioner)", el("input", { name: "partition", style: "width:6em" })),
    el("button", { type: "submit", text: "Produce" }));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = formData(form);
    const result = await act("produce", () => {
      const headers = Object.entries(parsePairs(f.headers, "headers"));
      return api("POST", ROUTES.produce, {
        topic: f.topic ?? "",
        key: f.key ?? null,
        value: form.elements.value.value,
        headers,
        partition: f.partition === undefined ? null : Number.isNaN(Number(f.partition)) ? f.partition : Number(f.partition),
      });
    }, err);
    if (result) clear(out).append(trace(result));
  });
  root.append(el("section.card", null, el("h2", { text: "Produce a record" }), form, topics, err),
    el("section.card", null, el("h2", { text: "What the client did" }), out));
  api("GET", ROUTES.topics).then((list) => {
    for (const t of list) topics.append(el("option", { value: t.name }));
    root.dataset.ready = "1";
  }).catch(() => { root.dataset.ready = "1"; });
  return () => {};
}

export function trace(r) {
  return el("div", { "data-offset": r.offset, "data-partition": r.partition },
    el("div.kv", null,
      el("span.muted", { text: "topic" }), el("span", { text: r.topic }),
      el("span.muted", { text: "partition" }), el("span#produced-partition", { text: r.partition }),
      el("span.muted", { text: "offset" }), el("span#produced-offset", { text: r.offset }),
      el("span.muted", { text: "timestamp" }), el("span", { text: fmtTime(r.timestamp_ms) }),
      el("span.muted", { text: "latency" }), el("span", { text: `${Number(r.latency_ms).toFixed(2)} ms` })),
    el("ol.trace", null, ...(r.steps || []).map((s) =>
      el("li", { "data-step": s.step },
        el("span.step", { text: s.step }), " ", el("span", { text: s.detail }),
        el("span.ms", { text: `+${Number(s.t_ms).toFixed(2)} ms` })))));
}
