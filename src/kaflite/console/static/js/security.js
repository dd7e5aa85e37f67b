// Security: SCRAM users, ACLs and client quotas, each listed with a form to add and a
// button per row to remove, through the Kafka protocol (docs/console.md, "Security").
import { ROUTES, act, api, clear, el, field, formData, poll } from "./core.js";

const RESOURCE_TYPES = ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"];
const OPERATIONS = ["ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
  "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"];
const QUOTA_KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage",
  "controller_mutation_rate", "connection_creation_rate"];
const ACL_FIELDS = ["resource_type", "name", "pattern_type", "principal", "host", "operation", "permission_type"];

const select = (name, values) => el("select", { name }, ...values.map((v) => el("option", { value: v, text: v })));

function table(name, headers, rows) {
  return el("table.plain", { "data-table": name },
    el("thead", null, el("tr", null, ...headers.map((h) => el("th", { text: h })))),
    el("tbody", null, ...rows));
}

function removeButton(label, onClick) {
  const b = el("button.danger", { type: "button", text: "Remove", "aria-label": label });
  b.addEventListener("click", onClick);
  return b;
}

// "user 'alice'", "the default client-id", joined: a quota entity in words.
export function entityText(entity) {
  return Object.entries(entity).map(([t, n]) => (n === null ? `the default ${t}` : `${t} '${n}'`)).join(", ");
}

export function mount(root) {
  const users = el("div#users");
  const acls = el("div#acls");
  const quotas = el("div#quotas");
  const errors = { users: el("div.error-text"), acls: el("div.error-text"), quotas: el("div.error-text") };

  const userForm = el("form.inline#add-user", null,
    field("user", el("input", { name: "user", required: true, placeholder: "alice", autocomplete: "off" })),
    field("password", el("input", { name: "password", type: "password", required: true, autocomplete: "new-password" })),
    field("mechanism", select("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])),
    field("iterations", el("input", { name: "iterations", type: "number", value: "4096", style: "width:6em" })),
    el("button", { type: "submit", text: "Add user or set password" }));
  userForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = formData(userForm);
    const body = { user: f.user ?? "", password: userForm.elements.password.value, mechanism: f.mechanism,
      iterations: f.iterations === undefined ? 4096 : Number(f.iterations) };
    if (await act(`user ${body.user}`, () => api("POST", ROUTES.users, body), errors.users)) {
      userForm.elements.password.value = "";
      refresh();
    }
  });

  const aclForm = el("form.inline#add-acl", null,
    field("principal", el("input", { name: "principal", required: true, placeholder: "User:alice" })),
    field("permission", select("permission_type", ["ALLOW", "DENY"])),
    field("operation", select("operation", OPERATIONS)),
    field("resource", select("resource_type", RESOURCE_TYPES)),
    field("name (cluster: kafka-cluster)", el("input", { name: "name", required: true, placeholder: "orders" })),
    field("pattern", select("pattern_type", ["LITERAL", "PREFIXED"])),
    field("host", el("input", { name: "host", value: "*", size: 10 })),
    el("button", { type: "submit", text: "Add ACL" }));
  aclForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = formData(aclForm);
    const body = Object.fromEntries(ACL_FIELDS.map((k) => [k, f[k] ?? ""]));
    if (await act(`ACL for ${body.principal}`, () => api("POST", ROUTES.acls, body), errors.acls)) refresh();
  });

  const quotaForm = el("form.inline#set-quota", null,
    field("entity", select("entity_type", ["user", "client-id", "ip"])),
    field("name (empty: the default)", el("input", { name: "entity_name", size: 14 })),
    field("quota", el("select", { name: "key" }, ...QUOTA_KEYS.map((k) => el("option", { value: k, text: k })))),
    field("value (empty: remove)", el("input", { name: "value", size: 12, placeholder: "1048576" })),
    el("button", { type: "submit", text: "Set quota" }));
  quotaForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = formData(quotaForm);
    const entity = { [f.entity_type]: f.entity_name ?? null };
    const value = f.value === undefined ? undefined : Number.isNaN(Number(f.value)) ? f.value : Number(f.value);
    const body = value === undefined ? { entity, delete: [f.key] } : { entity, set: { [f.key]: value } };
    if (await act(`quota of ${entityText(entity)}`, () => api("POST", ROUTES.quotas, body), errors.quotas)) refresh();
  });

  root.append(
    el("section.card", null, el("h2", { text: "Users (SCRAM)" }), users, userForm, errors.users),
    el("section.card", null, el("h2", { text: "ACLs" }), acls, aclForm, errors.acls),
    el("section.card", null, el("h2", { text: "Client quotas" }), quotas, quotaForm, errors.quotas));

  function showUsers(data) {
    clear(users).append(data.users.length === 0 ? el("div.muted", { text: "no SCRAM users" }) :
      table("users", ["user", "mechanisms (iterations)", ""], data.users.map((u) => el("tr", { "data-user": u.user },
        el("td", { text: u.user }),
        el("td", { text: u.credentials.map((c) => `${c.mechanism} (${c.iterations})`).join(", ") }),
        el("td", null, removeButton(`remove user ${u.user}`, async () => {
          if (!window.confirm(`Remove user ${u.user}?`)) return;
          if (await act(`remove user ${u.user}`, () => api("DELETE", ROUTES.user(u.user)), errors.users)) refresh();
        }))))));
  }

  function showAcls(data) {
    if (!data.enabled) {
      clear(acls).append(el("div.muted#acls-off", { text: data.note }));
      aclForm.hidden = true;
      return;
    }
    aclForm.hidden = false;
    clear(acls).append(data.acls.length === 0 ? el("div.muted", { text: "no ACLs" }) :
      table("acls", ["principal", "permission", "operation", "resource", "name", "pattern", "host", ""],
        data.acls.map((a) => el("tr", { "data-principal": a.principal },
          ...["principal", "permission_type", "operation", "resource_type", "name", "pattern_type", "host"]
            .map((k) => el("td", { text: a[k] })),
          el("td", null, removeButton(`remove ACL ${a.operation} on ${a.name} for ${a.principal}`, async () => {
            const row = { ...a };
            if (await act(`remove ACL for ${a.principal}`, () => api("POST", ROUTES.aclDelete, row), errors.acls)) refresh();
          }))))));
  }

  function showQuotas(data) {
    clear(quotas).append(data.quotas.length === 0 ? el("div.muted", { text: "no client quotas" }) :
      table("quotas", ["entity", "quotas"], data.quotas.map((q) => el("tr", null,
        el("td", { text: entityText(q.entity) }),
        el("td", { text: Object.entries(q.values).map(([k, v]) => `${k}=${v}`).join(", ") })))));
  }

  async function refresh() {
    const [u, a, q] = await Promise.all([api("GET", ROUTES.users), api("GET", ROUTES.acls), api("GET", ROUTES.quotas)]);
    showUsers(u);
    showAcls(a);
    showQuotas(q);
    root.dataset.ready = "1";
  }
  return poll(refresh, 5000);
}
