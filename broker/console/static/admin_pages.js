// pybroker console: the admin pages (ACLs, SCRAM users, quotas, transactions, KIP-848 groups, the broker,
// the schema registry's subjects).
// Loaded after app.js, whose helpers (h, api, table, num, bytes, notice, confirmDialog, route) it uses and
// whose page registry (PAGES) it extends. Every value from the broker is put in the page as text, never as
// HTML. Each removal asks for a confirmation first; a password typed here is sent once and never shown.
"use strict";

(() => {
  const RESOURCE_TYPES = ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"];
  const OPERATIONS = ["ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT"];
  const QUOTA_KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
    "connection_creation_rate"];

  const options = (id, values, selected) =>
    h("select", { id }, values.map(v => h("option", { value: v, selected: v === selected }, v)));
  const field = (label, input) => h("label", {}, label, input);
  const card = (label, value, id) =>
    h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: "value", id }, value));
  const duration = ms => {
    if (ms === null || ms === undefined) return "–";
    const s = Math.floor(ms / 1000), d = Math.floor(s / 86400), hr = Math.floor(s % 86400 / 3600);
    const m = Math.floor(s % 3600 / 60);
    return d ? `${d}d ${hr}h ${m}m` : hr ? `${hr}h ${m}m ${s % 60}s` : m ? `${m}m ${s % 60}s` : `${s}s`;
  };
  const when = ms => (ms === null || ms === undefined || ms < 0 ? "–" : new Date(ms).toISOString());

  // A page whose read the broker refused shows why, in words, instead of a broken page.
  function refusal(page, title, needs, err) {
    const denied = /AUTHORIZATION_FAILED/.test(err.message);
    const who = session ? session.user : "this user";
    page.replaceChildren(h("h2", {}, title), h("section", { id: denied ? "not-authorized" : "page-error", class: "error" },
      h("p", {}, denied ? `Not authorized: ${who} may not see this page (it needs ${needs}).` : "This page could not be loaded."),
      h("p", { class: "muted" }, err.message)));
  }

  // `needs`: the ACL the page's read needs, said when the broker refuses it
  function guarded(title, needs, fn) {
    return async (page, arg, query) => {
      try { await fn(page, arg, query); } catch (err) { refusal(page, title, needs, err); }
    };
  }

  async function change(path, body, done) {
    try { await api(path, body); notice(done); route(); } catch (err) { notice(err.message, true); }
  }

  // -- ACLs ------------------------------------------------------------------------------------------
  async function aclsPage(page) {
    const r = await api("acls");
    const f = {
      resource_type: options("acl-resource-type", RESOURCE_TYPES, "TOPIC"),
      resource_name: h("input", { id: "acl-resource-name", placeholder: "orders" }),
      pattern_type: options("acl-pattern-type", ["LITERAL", "PREFIXED"], "LITERAL"),
      principal: h("input", { id: "acl-principal", placeholder: "User:alice" }),
      host: h("input", { id: "acl-host", value: "*", size: "10" }),
      operation: options("acl-operation", OPERATIONS, "READ"),
      permission: options("acl-permission", ["ALLOW", "DENY"], "ALLOW"),
    };
    // the cluster resource has one name, Kafka's
    f.resource_type.addEventListener("change", () => { if (f.resource_type.value === "CLUSTER") f.resource_name.value = "kafka-cluster"; });
    const form = h("form", { class: "row", id: "acl-create", onsubmit: async e => {
      e.preventDefault();
      const body = Object.fromEntries(Object.entries(f).map(([k, el]) => [k, el.value.trim()]));
      const what = `${body.permission} ${body.principal} ${body.operation} on ${body.resource_type} ${body.resource_name} (${body.pattern_type}) from ${body.host}`;
      if (!await confirmDialog("Add ACL", `Add: ${what}?`)) return;
      await change("acls/create", body, "ACL added.");
    } }, field("Resource type", f.resource_type), field("Resource name", f.resource_name), field("Pattern", f.pattern_type),
    field("Principal", f.principal), field("Host", f.host), field("Operation", f.operation), field("Permission", f.permission),
    h("button", { type: "submit", id: "acl-create-submit" }, "Add ACL"));
    const remove = row => h("button", { class: "danger", onclick: async () => {
      const what = `${row.permission} ${row.principal} ${row.operation} on ${row.resource_type} ${row.resource_name}`;
      if (!await confirmDialog("Remove ACL", `Remove: ${what}?`)) return;
      await change("acls/delete", row, "ACL removed.");
    } }, "Remove");
    page.replaceChildren(h("h2", {}, "ACLs"),
      r.enabled ? h("section", {}, h("h3", {}, "Add an ACL"), form)
        : h("p", { class: "muted", id: "acls-disabled" }, "The broker runs no authorizer (authorizer.class.name is empty): ACLs are not enforced and cannot be added."),
      h("section", {}, h("h3", {}, `Bindings (${r.acls.length})`), table([
        { title: "Resource", value: x => x.resource_type }, { title: "Name", value: x => x.resource_name },
        { title: "Pattern", value: x => x.pattern_type }, { title: "Principal", value: x => x.principal },
        { title: "Host", value: x => x.host }, { title: "Operation", value: x => x.operation },
        { title: "Permission", value: x => h("span", { class: x.permission === "DENY" ? "offline" : "online" }, x.permission) },
        { title: "", value: remove }], r.acls, "acls")));
  }

  // -- SCRAM users -----------------------------------------------------------------------------------
  async function usersPage(page) {
    const rows = await api("users");
    const user = h("input", { id: "user-name", placeholder: "alice", autocomplete: "off" });
    const password = h("input", { id: "user-password", type: "password", autocomplete: "new-password" });
    const mechanism = options("user-mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"], "SCRAM-SHA-512");
    const iterations = h("input", { id: "user-iterations", type: "number", min: "4096", max: "16384", value: "4096" });
    const form = h("form", { class: "row", id: "user-upsert", onsubmit: async e => {
      e.preventDefault();
      const body = { user: user.value.trim(), password: password.value, mechanism: mechanism.value, iterations: Number(iterations.value) };
      password.value = "";
      if (!await confirmDialog("Set password", `Add ${body.user} or change their ${body.mechanism} password?`)) return;
      await change("users/upsert", body, `User ${body.user} saved.`);
    } }, field("User", user), field("Password", password), field("Mechanism", mechanism), field("Iterations", iterations),
    h("button", { type: "submit", id: "user-upsert-submit" }, "Add user / set password"));
    const flat = rows.flatMap(u => u.credentials.map(c => ({ user: u.user, ...c })));
    page.replaceChildren(h("h2", {}, "SCRAM users"),
      h("section", {}, h("h3", {}, "Add a user or change a password"), form,
        h("p", { class: "muted" }, "The password is salted and hashed by the broker; it is never stored, shown or logged.")),
      h("section", {}, h("h3", {}, `Credentials (${flat.length})`), table([
        { title: "User", value: x => x.user }, { title: "Mechanism", value: x => x.mechanism },
        { title: "Iterations", num: true, value: x => num(x.iterations) },
        { title: "", value: x => h("button", { class: "danger", onclick: async () => {
          if (!await confirmDialog("Remove user", `Remove the ${x.mechanism} credential of ${x.user}? They can no longer log in with it.`)) return;
          await change("users/delete", { user: x.user, mechanism: x.mechanism }, `${x.mechanism} credential of ${x.user} removed.`);
        } }, "Remove") }], flat, "users")));
  }

  // -- quotas ----------------------------------------------------------------------------------------
  async function quotasPage(page) {
    const rows = await api("quotas");
    const type = options("quota-type", ["user", "client-id", "ip"], "user");
    const name = h("input", { id: "quota-name", placeholder: "name (empty: the default)" });
    const key = options("quota-key", QUOTA_KEYS, "producer_byte_rate");
    const value = h("input", { id: "quota-value", type: "number", min: "0", step: "any" });
    const form = h("form", { class: "row", id: "quota-set", onsubmit: async e => {
      e.preventDefault();
      const entity = [{ type: type.value, name: name.value.trim() || null }];
      const shown = `${type.value}=${name.value.trim() || "<default>"}`;
      if (!await confirmDialog("Set quota", `Set ${key.value}=${value.value} for ${shown}?`)) return;
      await change("quotas/alter", { entity, key: key.value, value: Number(value.value) }, `Quota set for ${shown}.`);
    } }, field("Entity type", type), field("Entity name", name), field("Quota", key), field("Value", value),
    h("button", { type: "submit", id: "quota-set-submit" }, "Set quota"));
    const flat = rows.flatMap(r => Object.entries(r.values).map(([k, v]) => ({ entity: r.entity, key: k, value: v })));
    const entityText = entity => entity.map(e => `${e.type}=${e.name === null ? "<default>" : e.name}`).join(", ");
    page.replaceChildren(h("h2", {}, "Client quotas"),
      h("section", {}, h("h3", {}, "Set a quota"), form),
      h("section", {}, h("h3", {}, `Quotas (${flat.length})`), table([
        { title: "Entity", value: x => entityText(x.entity) }, { title: "Quota", value: x => x.key },
        { title: "Value", num: true, value: x => num(x.value) },
        { title: "", value: x => h("button", { class: "danger", onclick: async () => {
          if (!await confirmDialog("Remove quota", `Remove ${x.key} of ${entityText(x.entity)}?`)) return;
          await change("quotas/alter", { entity: x.entity, key: x.key, value: null }, "Quota removed.");
        } }, "Remove") }], flat, "quotas")));
  }

  // -- transactions ----------------------------------------------------------------------------------
  async function transactionsPage(page, query) {
    const listed = await api("transactions");
    const topic = h("input", { id: "hanging-topic", placeholder: "all topics", value: query.get("topic") || "" });
    const minutes = h("input", { id: "hanging-minutes", type: "number", min: "0", value: query.get("minutes") || "15" });
    const found = h("div", { id: "hanging-result" }, h("p", { class: "muted" }, "Search to list hanging transactions."));
    const search = async () => {
      const q = new URLSearchParams({ older_than_ms: String(Math.round(Number(minutes.value) * 60000)) });
      if (topic.value.trim()) q.set("topic", topic.value.trim());
      try {
        const r = await api("transactions/hanging?" + q);
        found.replaceChildren(h("p", { class: "muted", id: "hanging-status" },
          `${r.hanging.length} hanging in ${num(r.searched_partitions)} partitions searched`),
        table([
          { title: "Partition", value: x => `${x.topic}-${x.partition}` }, { title: "Start offset", num: true, value: x => num(x.start_offset) },
          { title: "Producer", num: true, value: x => x.producer_id }, { title: "Epoch", num: true, value: x => x.producer_epoch },
          { title: "Transactional id", value: x => x.transactional_id || "(none)" },
          { title: "Open for", value: x => duration(x.age_ms) },
          { title: "", value: x => h("button", { class: "danger", onclick: async () => {
            const text = `Write an ABORT marker for producer ${x.producer_id}'s transaction starting at offset ${x.start_offset} of ${x.topic}-${x.partition}? Its records will never be read by read_committed consumers.`;
            if (!await confirmDialog("Abort hanging transaction", text)) return;
            try {
              await api("transactions/abort", { topic: x.topic, partition: x.partition, start_offset: x.start_offset });
              notice(`Transaction at ${x.topic}-${x.partition} offset ${x.start_offset} aborted.`);
              search();
            } catch (err) { notice(err.message, true); }
          } }, "Abort") }], r.hanging, "hanging"));
      } catch (err) { notice(err.message, true); }
    };
    const form = h("form", { class: "row", id: "hanging-search", onsubmit: e => { e.preventDefault(); search(); } },
      field("Topic", topic), field("Open for at least (minutes)", minutes),
      h("button", { type: "submit", id: "hanging-submit" }, "Find hanging transactions"));
    page.replaceChildren(h("h2", {}, "Transactions"),
      h("section", {}, h("h3", {}, `Transactional ids (${listed.shown} of ${listed.total})`), table([
        { title: "Transactional id", value: x => x.transactional_id },
        { title: "State", value: x => h("span", { class: "tag" }, x.error || x.state) },
        { title: "Producer", num: true, value: x => x.producer_id }, { title: "Epoch", num: true, value: x => x.producer_epoch },
        { title: "Timeout", value: x => duration(x.timeout_ms) }, { title: "Started", value: x => when(x.start_time_ms) },
        { title: "Open for", value: x => duration(x.duration_ms) }, { title: "Partitions", value: x => x.partitions.join(", ") }],
      listed.transactions, "transactions")),
      h("section", {}, h("h3", {}, "Hanging transactions"),
        h("p", { class: "muted" }, "Open in a partition, with no coordinator that will finish them: they hold back read_committed consumers until aborted."),
        form, found));
    if (query.get("search") === "1") await search();
  }

  // -- KIP-848 consumer groups -----------------------------------------------------------------------
  async function consumerGroupsPage(page) {
    const rows = await api("consumer-groups");
    page.replaceChildren(h("h2", {}, "KIP-848 consumer groups"),
      h("p", { class: "muted" }, "Groups on the consumer rebalance protocol (group.protocol=consumer), with the server-side assignor. Classic groups are under Consumer groups."),
      h("section", {}, table([
        { title: "Group", value: x => h("a", { href: "#/consumer-group/" + encodeURIComponent(x.group) }, x.group) },
        { title: "State", value: x => h("span", { class: "tag" }, x.error || x.state) },
        { title: "Group epoch", num: true, value: x => num(x.group_epoch) },
        { title: "Assignment epoch", num: true, value: x => num(x.assignment_epoch) },
        { title: "Assignor", value: x => x.assignor }, { title: "Members", num: true, value: x => num(x.members) },
        { title: "Reconciling", num: true, value: x => num(x.pending_members) }], rows, "consumer-groups")));
  }

  async function consumerGroupPage(page, id) {
    const g = await api("consumer-group?id=" + encodeURIComponent(id));
    const list = items => items.length ? items.join(", ") : "–";
    page.replaceChildren(h("h2", {}, "KIP-848 group ", h("span", { id: "cg-name" }, g.group)),
      h("div", { class: "cards" }, card("State", g.state, "cg-state"), card("Group epoch", num(g.group_epoch), "cg-group-epoch"),
        card("Assignment epoch", num(g.assignment_epoch), "cg-assignment-epoch"), card("Assignor", g.assignor || "–", "cg-assignor"),
        card("Members", num(g.members.length), "cg-members")),
      ...(g.assignment_pending ? [h("p", { class: "muted", id: "cg-pending" }, "A new assignment is being reconciled: members move towards their target assignment.")] : []),
      h("section", {}, h("h3", {}, "Members"), g.members.length ? table([
        { title: "Member", value: x => x.member_id }, { title: "Client", value: x => x.client_id }, { title: "Host", value: x => x.host },
        { title: "Epoch", num: true, value: x => num(x.member_epoch) },
        { title: "Subscribed", value: x => x.subscribed_regex ? `regex ${x.subscribed_regex}` : list(x.subscribed_topics) },
        { title: "Assignment", value: x => list(x.assignment) },
        { title: "Target", value: x => x.pending ? list(x.target_assignment) : "(same)" },
        { title: "Instance / rack", value: x => [x.instance_id, x.rack_id].filter(v => v).join(" / ") || "–" },
        { title: "Type", value: x => x.member_type }], g.members, "cg-member-table") : h("p", { class: "muted" }, "No members.")),
      h("p", {}, h("a", { href: "#/group/" + encodeURIComponent(g.group), id: "cg-offsets-link" }, "Offsets and lag of this group")));
  }

  // -- the broker ------------------------------------------------------------------------------------
  async function brokerPage(page) {
    const b = await api("broker");
    const sections = [
      h("div", { class: "cards" }, card("Version", `pybroker ${b.version}`, "broker-version"), card("Uptime", duration(b.uptime_ms), "broker-uptime"),
        card("Node id", b.node_id, "broker-node"), card("Cluster id", b.cluster_id, "broker-cluster"), card("You are", b.principal, "broker-principal")),
      h("section", {}, h("h3", {}, "Features"), table([
        { title: "Feature", value: x => x.name }, { title: "Finalized level", num: true, value: x => x.level === undefined ? "–" : x.level },
        { title: "Supported", value: x => x.supported ? `${x.supported.min}–${x.supported.max}` : "–" }],
      b.features.supported.map(s => ({ name: s.name, supported: s, level: (b.features.finalized.find(f => f.name === s.name) || {}).level })),
      "features"), h("p", { class: "muted" }, `Finalized features epoch ${b.features.finalized_epoch}; ${b.apis.length} APIs served.`)),
      h("section", {}, h("h3", {}, "Your operations on the cluster"),
        h("p", { id: "broker-operations" }, b.cluster_operations.length ? b.cluster_operations.join(", ") : "none")),
    ];
    if (b.cluster_details) {
      const s = b.security;
      sections.push(
        h("section", {}, h("h3", {}, "Listeners"), table([
          { title: "Name", value: x => x.name }, { title: "Security", value: x => x.security_protocol }, { title: "Bound", value: x => x.bind },
          { title: "Advertised", value: x => x.advertised }, { title: "TLS client auth", value: x => x.client_auth || "–" },
          { title: "SASL mechanisms", value: x => x.sasl_mechanisms.join(", ") || "–" }], b.listeners, "broker-listeners")),
        h("section", {}, h("h3", {}, "Security"), table([{ title: "Setting", value: x => x[0] }, { title: "Value", value: x => x[1] }], [
          ["Authorizer", s.authorizer || "none (every principal may do everything)"],
          ["Super users", s.super_users.join(", ") || "none"],
          ["Allow everyone if no ACL found", s.allow_everyone_if_no_acl_found ? "yes" : "no"],
          ["SASL listeners", s.sasl_listeners.join(", ") || "none"],
          ["Console login", s.console_login ? "required (broker users)" : "none (acts as User:ANONYMOUS)"]], "broker-security")),
        h("section", {}, h("h3", {}, "Log dirs"), table([
          { title: "Path", value: x => x.path },
          { title: "Status", value: x => h("span", { class: x.online ? "online" : "offline" }, x.online ? "online" : x.error || "offline") },
          { title: "Free", num: true, value: x => bytes(x.usable_bytes) }, { title: "Total", num: true, value: x => bytes(x.total_bytes) }],
        b.log_dirs, "broker-log-dirs")));
    } else {
      sections.push(h("p", { class: "muted", id: "broker-details-hidden" },
        "Listeners, security settings and log dirs are shown to principals that may DESCRIBE the cluster."));
    }
    page.replaceChildren(h("h2", {}, "Broker"), ...sections);
  }

  // -- schema registry -------------------------------------------------------------------------------
  async function schemasPage(page) {
    const r = await api("schemas");
    if (!r.enabled) {
      page.replaceChildren(h("h2", {}, "Schemas"), h("p", { class: "muted", id: "schemas-off" },
        "This broker serves no schema registry (set schema.registry.port)."));
      return;
    }
    const latest = s => s.versions.filter(v => !v.deleted).slice(-1)[0] || s.versions.slice(-1)[0];
    page.replaceChildren(h("h2", {}, "Schemas"),
      h("p", { class: "muted" }, `Global compatibility ${r.compatibility}, mode ${r.mode}.` +
        (r.more ? " Only the first subjects are listed." : "")),
      table([
        { title: "Subject", value: s => h("a", { href: `#/schema/${encodeURIComponent(s.subject)}?version=${latest(s).version}` }, s.subject) },
        { title: "Versions", num: true, value: s => s.versions.filter(v => !v.deleted).length },
        { title: "Latest id", num: true, value: s => latest(s).id },
        { title: "Type", value: s => latest(s).type },
        { title: "Compatibility", value: s => s.compatibility }, { title: "Mode", value: s => s.mode },
        { title: "Deleted", value: s => s.versions.some(v => !v.deleted) ? "–" : "soft-deleted" }],
      r.subjects, "schemas-table"));
  }

  async function schemaPage(page, subject, query) {
    const listed = await api("schemas");
    const row = (listed.subjects || []).find(s => s.subject === subject);
    const version = query.get("version") || (row ? row.versions.slice(-1)[0].version : 1);
    const v = await api("schema?subject=" + encodeURIComponent(subject) + "&version=" + encodeURIComponent(version));
    let text = v.schema;
    try { text = JSON.stringify(JSON.parse(v.schema), null, 2); } catch (e) { /* Protobuf: shown as sent */ }
    page.replaceChildren(h("h2", {}, "Subject ", subject),
      h("div", { class: "cards" }, card("Version", v.version, "schema-version"), card("Id", v.id, "schema-id"),
        card("Type", v.schemaType, "schema-type"), card("Referenced by", v.referenced_by.length, "schema-refs")),
      row ? h("p", {}, "Versions: ", ...row.versions.map(x => h("a", {
        href: `#/schema/${encodeURIComponent(subject)}?version=${x.version}`, class: x.deleted ? "muted" : "" },
      ` ${x.version}${x.deleted ? " (deleted)" : ""} `))) : "",
      h("pre", { id: "schema-text" }, text));
  }

  const CLUSTER = what => `${what} on the cluster`;
  PAGES.push(
    [/^#\/acls$/, guarded("ACLs", CLUSTER("DESCRIBE"), aclsPage), "acls"],
    [/^#\/users$/, guarded("SCRAM users", CLUSTER("DESCRIBE"), usersPage), "users"],
    [/^#\/quotas$/, guarded("Client quotas", CLUSTER("DESCRIBE_CONFIGS"), quotasPage), "quotas"],
    [/^#\/transactions$/, guarded("Transactions", "DESCRIBE on the transactional ids", transactionsPage), "transactions"],
    [/^#\/consumer-groups$/, guarded("KIP-848 consumer groups", "DESCRIBE on the groups", consumerGroupsPage), "consumer-groups"],
    [/^#\/consumer-group\/(.+)$/, guarded("KIP-848 group", "DESCRIBE on the group", consumerGroupPage), "consumer-groups"],
    [/^#\/broker$/, guarded("Broker", "nothing beyond a login", brokerPage), "broker"],
    [/^#\/schemas$/, guarded("Schemas", "DESCRIBE on the subjects' topics", schemasPage), "schemas"],
    [/^#\/schema\/([^?]+)$/, guarded("Schema", "DESCRIBE on the subject's topic", schemaPage), "schemas"]);
})();
