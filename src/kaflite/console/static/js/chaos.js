// Chaos (kaflite clusters): kill, stop, restart and isolate brokers; move a leader or a
// coordinator; inject an error, a delay or a throttle. The recovery shows as it happens.
import { ROUTES, act, api, clear, el, field, formData, poll, stream } from "./core.js";
import { withFeature } from "./feature.js";
import { brokerState } from "./cluster.js";
import { recoveryFeed } from "./recovery.js";
import { clientRecovery } from "./clientrecovery.js";

const num = (v) => (v === undefined ? undefined : Number.isNaN(Number(v)) ? v : Number(v));

export function mount(root) {
  const err = el("div.error-text");
  const brokersBox = el("div#chaos-brokers");
  const feed = recoveryFeed();
  const perClient = clientRecovery();
  const faultsBox = el("div#faults");

  function form(id, title, fields, submit) {
    const f = el(`form.inline#${id}`, null, ...fields, el("button", { type: "submit", text: title }));
    f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const data = formData(f);
      if (await act(title, () => submit(data), err)) refreshFaults();
    });
    return f;
  }
  const input = (name, placeholder, size = 10) => el("input", { name, placeholder, size });
  const scope = () => [field("topic", input("topic", "", 10)), field("partition", input("partition", "", 4)),
    field("group", input("group", "", 10)), field("client id", input("client_id", "", 10)), field("broker", input("broker", "", 4))];
  const scoped = (d) => ({ topic: d.topic, partition: num(d.partition), group: d.group, client_id: d.client_id, broker: num(d.broker) });

  const forms = [
    el("h3", { text: "Move a leader" }),
    form("move-leader", "Move leader", [field("topic", input("topic", "orders")), field("partition", input("partition", "0", 4)),
      field("to broker (empty: next in ISR)", input("to", "", 4))],
      (d) => api("POST", ROUTES.moveLeader, { topic: d.topic ?? "", partition: num(d.partition) ?? null, to: num(d.to) ?? null })),
    el("h3", { text: "Move a coordinator" }),
    form("move-coordinator", "Move coordinator", [field("group or transactional id", input("key", "my-group", 14)),
      field("type", el("select", { name: "type" }, el("option", { value: "group", text: "group" }), el("option", { value: "transaction", text: "transaction" }))),
      field("to broker", input("to", "", 4))],
      (d) => api("POST", ROUTES.moveCoordinator, { key: d.key ?? "", type: d.type, to: num(d.to) ?? null })),
    el("h3", { text: "Inject an error" }),
    form("inject-error", "Inject error", [field("API", input("api", "Produce")), field("error", input("error", "NOT_LEADER_OR_FOLLOWER", 22)),
      field("count", input("count", "1", 4)), ...scope()],
      (d) => api("POST", ROUTES.fault("error"), { api: d.api, error: d.error ?? "", count: num(d.count) ?? 1, ...scoped(d) })),
    el("h3", { text: "Delay requests" }),
    form("inject-delay", "Inject delay", [field("API", input("api", "Fetch")), field("ms", input("ms", "500", 6)),
      field("count (empty: until cleared)", input("count", "", 4)), ...scope()],
      (d) => api("POST", ROUTES.fault("delay"), { api: d.api, ms: num(d.ms) ?? null, count: num(d.count) ?? null, ...scoped(d) })),
    el("h3", { text: "Throttle" }),
    form("inject-throttle", "Throttle", [field("ms", input("ms", "1000", 6)), field("API", input("api", "")),
      field("count (empty: until cleared)", input("count", "", 4)), field("client id", input("client_id", "", 10)), field("broker", input("broker", "", 4))],
      (d) => api("POST", ROUTES.fault("throttle"), { ms: num(d.ms) ?? null, api: d.api, count: num(d.count) ?? null, client_id: d.client_id, broker: num(d.broker) })),
  ];

  root.append(el("div.row", null,
    el("div.grow", null,
      el("section.card", null, el("h2", { text: "Brokers" }), brokersBox, err),
      el("section.card", null, el("h2", { text: "Faults" }), ...forms),
      el("section.card", null, el("h2", { text: "Active fault rules" }), faultsBox)),
    el("section.card.grow", null, el("h2", { text: "Recovery, as it happens" }), feed.root)),
    el("section.card#client-recovery-card", null, el("h2", { text: "Recovery per client" }), perClient.root));

  function brokerAction(id, action, body) {
    return async () => {
      await act(`broker ${id} ${action}`, () => api("POST", ROUTES.broker(id, action), body), err);
      refreshBrokers();
    };
  }

  async function refreshBrokers() {
    const c = await api("GET", ROUTES.cluster);
    const tbody = el("tbody");
    for (const b of c.brokers) {
      const state = brokerState(b);
      tbody.append(el("tr", { "data-broker": b.id, "data-state": state },
        el("td", { text: `broker ${b.id}` }), el(`td.state-${state}`, { text: state }),
        el("td", { text: b.id === c.controller ? "controller" : "" }),
        el("td", null,
          el("button.danger", { type: "button", "data-action": "kill", onclick: brokerAction(b.id, "kill") }, "kill"), " ",
          el("button.secondary", { type: "button", "data-action": "stop", onclick: brokerAction(b.id, "stop") }, "stop"), " ",
          el("button", { type: "button", "data-action": "restart", onclick: brokerAction(b.id, "restart") }, "restart"), " ",
          el("button.secondary", { type: "button", "data-action": "isolate", onclick: brokerAction(b.id, "isolate", { isolated: !b.isolated }) },
            b.isolated ? "heal" : "isolate"))));
    }
    clear(brokersBox).append(el("table.plain", null, tbody));
    root.dataset.ready = "1";
  }

  async function refreshFaults() {
    const rules = await api("GET", ROUTES.faults);
    const clearAll = el("button.secondary#clear-faults", { type: "button", text: "clear all",
      onclick: async () => { await act("clear faults", () => api("DELETE", ROUTES.faults), err); refreshFaults(); } });
    const tbody = el("tbody");
    for (const r of rules) {
      const { id, ...rest } = r;
      tbody.append(el("tr", { "data-rule": id }, el("td", { text: id }),
        el("td", { text: Object.entries(rest).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ") }),
        el("td", null, el("button.secondary", { type: "button", text: "remove",
          onclick: async () => { await act(`remove rule ${id}`, () => api("DELETE", `${ROUTES.faults}/${id}`), err); refreshFaults(); } }))));
    }
    clear(faultsBox).append(rules.length ? el("table.plain", null, tbody) : el("div.muted", { text: "no rules" }), clearAll);
  }

  function onChange(ev) {
    feed.add(ev);
    if (ev.change === "broker") refreshBrokers().catch(() => {});
  }

  const stop = withFeature(root, { feature: "chaos", id: "no-chaos", title: "Chaos",
    message: "Chaos needs a kaflite cluster (kaflite up); this console talks to another Kafka." }, () => {
    const stops = [poll(refreshBrokers, 2000), poll(refreshFaults, 5000), poll(perClient.refresh, 2000), stream({ cluster: onChange, open: () => { feed.root.dataset.live = "1"; } })];
    return () => stops.forEach((s) => s());
  });
  return () => {
    feed.stop();
    stop();
  };
}
