// pybroker console: a small single-page front end over /console/api (no framework, no build step).
// Every value from the broker is put in the page as text (textContent), never as HTML.
"use strict";

const API = "/console/api/";
let session = null;
let timers = [];

// -- helpers -------------------------------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function svg(tag, attrs) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  return el;
}

async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", "X-Console-Token": session ? session.csrf_token : "" },
  };
  const response = await fetch(API + path, options);
  let data;
  try { data = await response.json(); } catch (e) { data = { error: response.statusText }; }
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function bytes(n) {
  if (n === null || n === undefined || n < 0) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? Math.round(n) : n.toFixed(1)) + " " + units[i];
}

function num(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }

function notice(message, isError) {
  const el = document.getElementById("notice");
  el.textContent = message;
  el.className = isError ? "error" : "";
  el.hidden = false;
}

function clearNotice() { document.getElementById("notice").hidden = true; }

// table(columns, rows, id, rowClass): `rowClass(row)` (optional) names a class for a row's <tr>
function table(columns, rows, id, rowClass) {
  return h("table", { id },
    h("thead", {}, h("tr", {}, columns.map(c => h("th", { class: c.num ? "num" : null }, c.title)))),
    h("tbody", {}, rows.map(r => h("tr", { class: rowClass ? rowClass(r) : null }, columns.map(c => {
      const v = c.value(r);
      return h("td", { class: c.num ? "num" : null }, v instanceof Node ? v : (v === null || v === undefined ? "–" : String(v)));
    })))));
}

function every(ms, fn) { fn(); timers.push(setInterval(fn, ms)); }

function confirmDialog(title, body, expected) {
  return new Promise(resolve => {
    const box = document.getElementById("confirm");
    document.getElementById("confirm-title").textContent = title;
    const content = document.getElementById("confirm-body");
    content.replaceChildren(body instanceof Node ? body : h("p", {}, body));
    const label = document.getElementById("confirm-type-label");
    const typed = document.getElementById("confirm-type");
    label.hidden = !expected;
    typed.value = "";
    document.getElementById("confirm-expected").textContent = expected || "";
    box.hidden = false;
    const ok = document.getElementById("confirm-ok");
    const cancel = document.getElementById("confirm-cancel");
    const done = value => { box.hidden = true; ok.onclick = cancel.onclick = null; resolve(value); };
    ok.onclick = () => {
      if (expected && typed.value !== expected) { typed.focus(); return; }
      done(expected ? typed.value : true);
    };
    cancel.onclick = () => done(false);
  });
}

function line(points, width, height, max) {
  return points.map((v, i) => {
    const x = points.length < 2 ? 0 : (i / (points.length - 1)) * width;
    const y = height - (max > 0 ? ((v || 0) / max) * (height - 4) : 0) - 2;
    return x.toFixed(1) + "," + y.toFixed(1);
  }).join(" ");
}

function sparkline(points) {
  const width = 120, height = 24;
  const box = svg("svg", { class: "spark", viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none" });
  if (points.length > 1) {
    box.append(svg("polyline", { points: line(points, width, height, Math.max(...points, 1)), fill: "none",
      stroke: "#2f6fdf", "stroke-width": "1.5" }));
  }
  return box;
}

function linesToPairs(text) {
  const out = [];
  for (const raw of text.split("\n")) {
    const lineText = raw.trim();
    if (!lineText) continue;
    const at = lineText.indexOf("=");
    if (at <= 0) throw new Error(`expected key=value, got "${lineText}"`);
    out.push([lineText.slice(0, at).trim(), lineText.slice(at + 1).trim()]);
  }
  return out;
}

// -- pages ---------------------------------------------------------------------------------------
async function overviewPage(page) {
  const o = await api("overview");
  const g = Object.entries(o.groups).map(([k, v]) => `${v} ${k}`).join(", ") || "none";
  const card = (label, value, id) => h("div", { class: "card", id }, h("div", { class: "label" }, label), h("div", { class: "value" }, value));
  const charts = h("section", { id: "charts" });
  page.replaceChildren(
    h("h2", {}, "Overview"),
    h("div", { class: "cards" },
      card("Node id", o.broker.node_id, "card-node"), card("Cluster id", o.broker.cluster_id, "card-cluster"),
      card("Topics", num(o.topics), "card-topics"), card("Partitions", num(o.partitions), "card-partitions"),
      card("Consumer groups", g, "card-groups"), card("Connections", num(o.connections), "card-connections")),
    h("section", {}, h("h3", {}, "Listeners"), table([
      { title: "Name", value: r => r.name }, { title: "Security", value: r => r.security_protocol },
      { title: "Bound", value: r => r.bind }, { title: "Advertised", value: r => r.advertised }], o.listeners, "listeners")),
    h("section", {}, h("h3", {}, "Log dirs"), table([
      { title: "Path", value: r => r.path },
      { title: "Status", value: r => h("span", { class: r.online ? "online" : "offline" }, r.online ? "online" : "offline") },
      { title: "Free", num: true, value: r => bytes(r.usable_bytes) }, { title: "Total", num: true, value: r => bytes(r.total_bytes) },
      { title: "Partitions", num: true, value: r => num(r.partitions) }, { title: "Data", num: true, value: r => bytes(r.size_bytes) },
      { title: "Moving in", num: true, value: r => num(r.moving_in) }],
    o.log_dirs, "log-dirs")),
    charts);
  every(2000, async () => {
    if (charts.matches(":hover")) return;  // keep a hover readout still while someone reads it
    charts.replaceChildren(overviewCharts(await api("charts")));
  });
}

async function topicsPage(page, query) {
  const internal = query.get("internal") === "1";
  const rows = await api("topics" + (internal ? "?internal=1" : ""));
  const name = h("input", { id: "new-topic-name", placeholder: "orders", required: true });
  const partitions = h("input", { id: "new-topic-partitions", type: "number", min: "1", value: "1" });
  const configs = h("textarea", { id: "new-topic-configs", placeholder: "cleanup.policy=compact" });
  const create = h("form", { class: "row", id: "create-topic", onsubmit: async e => {
    e.preventDefault();
    try {
      const body = { name: name.value.trim(), partitions: Number(partitions.value),
        configs: Object.fromEntries(linesToPairs(configs.value)) };
      if (!await confirmDialog("Create topic", `Create topic "${body.name}" with ${body.partitions} partition(s)?`)) return;
      await api("topics/create", body);
      notice(`Topic ${body.name} created.`);
      route();
    } catch (err) { notice(err.message, true); }
  } },
  h("label", {}, "Name", name), h("label", {}, "Partitions", partitions), h("label", {}, "Configs (key=value lines)", configs),
  h("button", { type: "submit", id: "create-topic-submit" }, "Create topic"));
  page.replaceChildren(
    h("h2", {}, "Topics"),
    h("section", {}, h("h3", {}, "Create a topic"), create),
    h("section", {},
      h("div", { class: "row" }, h("a", { href: internal ? "#/topics" : "#/topics?internal=1", id: "toggle-internal" },
        internal ? "Hide internal topics" : "Show internal topics"), h("span", { class: "muted", id: "topic-count" }, `${rows.length} topics`)),
      table([
        { title: "Topic", value: r => h("a", { href: "#/topic/" + encodeURIComponent(r.name) }, r.name) },
        { title: "Partitions", num: true, value: r => num(r.partitions) },
        { title: "Messages", num: true, value: r => num(r.messages) },
        { title: "Size", num: true, value: r => bytes(r.size_bytes) },
        { title: "Per log dir", value: r => Object.entries(r.size_by_dir).map(([d, s]) => `${d}: ${bytes(s)}`).join("; ") }],
      rows, "topics")));
}

async function topicPage(page, name) {
  const t = await api("topic?name=" + encodeURIComponent(name));
  const del = h("button", { class: "danger", id: "delete-topic", onclick: async () => {
    const typed = await confirmDialog("Delete topic", `Delete topic "${name}" and all its messages? This cannot be undone.`, name);
    if (!typed) return;
    try { await api("topics/delete", { name, confirm: typed }); notice(`Topic ${name} deleted.`); location.hash = "#/topics"; }
    catch (err) { notice(err.message, true); }
  } }, "Delete topic");
  const key = h("input", { id: "config-key", placeholder: "retention.ms" });
  const value = h("input", { id: "config-value", placeholder: "value (empty: back to default)" });
  const alter = h("form", { class: "row", id: "alter-config", onsubmit: async e => {
    e.preventDefault();
    const k = key.value.trim(), v = value.value;
    const what = v === "" ? `Remove the override of ${k} on ${name}?` : `Set ${k}=${v} on ${name}?`;
    if (!await confirmDialog("Alter config", what)) return;
    try { await api("topics/alter-config", { name, key: k, value: v === "" ? null : v }); notice(`${k} changed.`); route(); }
    catch (err) { notice(err.message, true); }
  } }, h("label", {}, "Key", key), h("label", {}, "Value", value), h("button", { type: "submit", id: "alter-config-submit" }, "Alter config"));
  page.replaceChildren(
    h("h2", {}, "Topic ", h("span", { id: "topic-name" }, name)),
    h("div", { class: "row" }, h("a", { href: `#/messages?topic=${encodeURIComponent(name)}`, id: "browse-link" }, "Browse messages"),
      h("span", { class: "muted" }, `id ${t.topic_id}`), del),
    h("section", {}, h("h3", {}, "Partitions"), table([
      { title: "Partition", num: true, value: r => r.partition }, { title: "Start offset", num: true, value: r => num(r.start_offset) },
      { title: "End offset", num: true, value: r => num(r.end_offset) }, { title: "Messages", num: true, value: r => num(r.messages) },
      { title: "Size", num: true, value: r => bytes(r.size_bytes) }, { title: "Log dir", value: r => r.log_dir }], t.partitions, "partitions")),
    icebergSection(t.iceberg),
    h("section", {}, h("h3", {}, "Configs"), alter, h("div", { class: "table-scroll" }, configTable(t.configs, "topic-configs",
      async (k, v) => { await api("topics/alter-config", { name, key: k, value: v }); notice(`${k} ${v === null ? "back to its default" : "changed"}.`); route(); }))));
  document.querySelectorAll("#topic-configs tbody tr").forEach((tr, i) => {
    tr.addEventListener("click", () => { key.value = t.configs[i].name; value.value = t.configs[i].value || ""; });
  });
}

// icebergSection(status): an Iceberg topic's table as the worker last reported it (docs/iceberg.md); nothing
// for a topic without a table
function icebergSection(status) {
  if (!status) return h("span");
  const when = status.last_commit_ms ? new Date(status.last_commit_ms).toISOString() : "–";
  const rows = [["Table", status.table || "–"], ["Mode", status.mode], ["Rows", num(status.total_records || 0)],
    ["Snapshot", status.snapshot_id === null || status.snapshot_id === undefined ? "–" : String(status.snapshot_id)],
    ["Last commit", when], ["Offsets behind the log", num(status.lag_offsets || 0)], ["Error", status.error || "none"]];
  return h("section", { id: "iceberg-table" }, h("h3", {}, "Iceberg table"),
    table([{ title: "", value: r => r[0] }, { title: "", value: r => r[1] }], rows, "iceberg-status"));
}

// configTable(configs, id, save): values humanized (the raw value on hover), rows of a non-default source
// marked as overrides; with `save(key, value)` (value null: back to the default) a row that is not
// read-only is edited in place (Enter saves, Escape cancels); a refusal shows Kafka's words and keeps the edit
function configTable(configs, id, save) {
  const cells = new Map();
  const shownValue = r => r.sensitive ? "(hidden)" : r.display === null || r.display === undefined ? (r.value === null ? "–" : r.value) : r.display;
  const value = r => {
    const cell = h("span", { class: "cfg-value", title: r.sensitive ? null : r.value === null ? "not set" : `raw value: ${r.value}` }, shownValue(r));
    cells.set(r.name, cell);
    return cell;
  };
  const edit = r => {
    const cell = cells.get(r.name), before = Array.from(cell.childNodes);
    const input = h("input", { class: "cfg-input", value: r.sensitive || r.value === null ? "" : r.value, "aria-label": r.name,
      type: r.sensitive ? "password" : null, autocomplete: r.sensitive ? "new-password" : null });
    const go = async v => {
      try { await save(r.name, v); } catch (err) { notice(err.message, true); input.focus(); }
    };
    const cancel = () => { cell.replaceChildren(...before); cell.classList.remove("editing"); };
    input.addEventListener("keydown", e => {
      if (e.key === "Enter") { e.preventDefault(); go(input.value); }
      if (e.key === "Escape") cancel();
    });
    cell.classList.add("editing");
    cell.replaceChildren(input,
      h("button", { type: "button", class: "small cfg-save", onclick: () => go(input.value) }, "save"),
      r.override ? h("button", { type: "button", class: "secondary small cfg-reset", title: "remove the override", onclick: () => go(null) }, "default") : null,
      h("button", { type: "button", class: "secondary small cfg-cancel", onclick: cancel }, "cancel"));
    input.focus();
  };
  return table([
    { title: "Name", value: r => r.name },
    { title: "Value", value },
    { title: "Source", value: r => h("span", { class: r.override ? "tag override" : "tag", title: r.override ? "overrides the default" : null }, r.source) },
    { title: "", value: r => r.read_only || !save ? (r.read_only ? "read-only" : "") :
      h("button", { type: "button", class: "secondary small cfg-edit", title: `edit ${r.name}`, onclick: e => { e.stopPropagation(); edit(r); } }, "edit") }],
  configs, id, r => r.override ? "override" : null);
}

async function groupsPage(page) {
  const rows = await api("groups");
  page.replaceChildren(h("h2", {}, "Consumer groups"), h("section", {}, table([
    { title: "Group", value: r => h("a", { href: "#/group/" + encodeURIComponent(r.group) }, r.group) },
    { title: "State", value: r => h("span", { class: "tag" }, r.state) }, { title: "Members", num: true, value: r => num(r.members) },
    { title: "Partitions", num: true, value: r => num(r.partitions) }, { title: "Lag", num: true, value: r => num(r.lag) },
    { title: "Type", value: r => r.group_type }], rows, "groups")));
}

async function groupPage(page, id) {
  const g = await api("group?id=" + encodeURIComponent(id));
  const topic = h("input", { id: "reset-topic", placeholder: "all committed topics" });
  const to = h("select", { id: "reset-to" }, ["earliest", "latest", "offset", "timestamp"].map(v => h("option", { value: v }, v)));
  const value = h("input", { id: "reset-value", placeholder: "offset, or ms since the epoch" });
  const reset = h("form", { class: "row", id: "reset", onsubmit: async e => {
    e.preventDefault();
    const body = { group: id, to: to.value, topic: topic.value.trim() || null };
    if (to.value === "offset") body.offset = Number(value.value);
    if (to.value === "timestamp") body.timestamp = Number(value.value);
    try {
      const plan = await api("groups/reset-offsets", { ...body, preview: true });
      const shown = table([{ title: "Partition", value: r => `${r.topic}-${r.partition}` },
        { title: "Current", num: true, value: r => num(r.current_offset) }, { title: "New", num: true, value: r => num(r.new_offset) }], plan.plan, "reset-plan");
      if (!await confirmDialog(`Reset offsets of ${id}`, shown)) return;
      await api("groups/reset-offsets", body);
      notice(`Offsets of ${id} reset.`);
      route();
    } catch (err) { notice(err.message, true); }
  } }, h("label", {}, "Topic", topic), h("label", {}, "To", to), h("label", {}, "Offset / time", value),
  h("button", { type: "submit", id: "reset-submit" }, "Reset offsets…"));
  const share = g.group_type === "share";
  const total = (share ? g.share_partitions : g.offsets).reduce((a, r) => a + (r.lag || 0), 0);
  page.replaceChildren(
    h("h2", {}, "Group ", h("span", { id: "group-name" }, g.group)),
    h("div", { class: "cards" },
      h("div", { class: "card" }, h("div", { class: "label" }, "State"), h("div", { class: "value", id: "group-state" }, g.state)),
      h("div", { class: "card" }, h("div", { class: "label" }, "Members"), h("div", { class: "value", id: "group-members" }, num(g.members.length))),
      h("div", { class: "card" }, h("div", { class: "label" }, "Total lag"), h("div", { class: "value", id: "group-lag" }, num(total))),
      h("div", { class: "card" }, h("div", { class: "label" }, "Protocol"), h("div", { class: "value", id: "group-protocol" },
        g.group_type === "consumer" ? `consumer, epoch ${num(g.group_epoch)}` :
          g.group_type === "streams" ? `streams (${g.protocol || "?"}), epoch ${num(g.group_epoch)}, topology epoch ${g.topology_epoch ?? "none"}` :
            share ? `share (${g.protocol || "?"}), epoch ${num(g.group_epoch)}, assignment epoch ${num(g.assignment_epoch)}` : "classic"))),
    h("section", {}, h("h3", {}, "Members"), g.members.length ? table(g.group_type === "streams" ? [
      // a streams member runs tasks (subtopology_partition), grouped by the process (Kafka Streams instance) it is in
      { title: "Member", value: r => r.member_id }, { title: "Process", value: r => r.process_id },
      { title: "Client", value: r => r.client_id }, { title: "Host", value: r => r.host },
      { title: "Active tasks", value: r => r.active_tasks.join(", ") }, { title: "Standby tasks", value: r => r.standby_tasks.join(", ") },
      { title: "Warm-up tasks", value: r => r.warmup_tasks.join(", ") }, { title: "Epoch", num: true, value: r => num(r.member_epoch) },
      { title: "Topology epoch", num: true, value: r => num(r.topology_epoch) }] : share ? [
      // a share-partition may be assigned to several members at once: each reads records the others do not
      { title: "Member", value: r => r.member_id }, { title: "Client", value: r => r.client_id }, { title: "Host", value: r => r.host },
      { title: "Subscriptions", value: r => r.subscribed_topics.join(", ") }, { title: "Assignment", value: r => r.assignment.join(", ") },
      { title: "Epoch", num: true, value: r => num(r.member_epoch) }] : [
      { title: "Member", value: r => r.member_id }, { title: "Client", value: r => r.client_id }, { title: "Host", value: r => r.host },
      { title: "Assignment", value: r => r.assignment.join(", ") },
      ...(g.group_type === "consumer" ? [{ title: "Epoch", num: true, value: r => num(r.member_epoch) }] : [])],
      g.members, "members") : h("p", { class: "muted" }, "No members.")),
    ...(g.group_type === "streams" ? [h("section", {}, h("h3", {}, "Topology"), table([
      // what each subtopology reads and the internal topics the broker made for it (a task is a subtopology's partition)
      { title: "Subtopology", value: r => r.subtopology_id }, { title: "Source topics", value: r => r.source_topics.join(", ") },
      { title: "Repartition topics", value: r => r.repartition_source_topics.join(", ") },
      { title: "Changelog topics", value: r => r.changelog_topics.join(", ") }], g.subtopologies, "subtopologies"))] : []),
    ...(share ? [h("section", {}, h("h3", {}, "Share-partitions"), table([
      // the start offset: every record below it is done; past it, the records in flight by state
      { title: "Topic", value: r => r.topic }, { title: "Partition", num: true, value: r => r.partition },
      { title: "Start offset", num: true, value: r => r.error || num(r.start_offset) },
      { title: "Available", num: true, value: r => num(r.available) }, { title: "Acquired", num: true, value: r => num(r.acquired) },
      { title: "Acknowledged", num: true, value: r => num(r.acknowledged) }, { title: "Archived", num: true, value: r => num(r.archived) },
      { title: "Lag", num: true, value: r => num(r.lag) }], g.share_partitions, "share-partitions"))] : [
    h("section", {}, h("h3", {}, "Offsets and lag"), table([
      { title: "Topic", value: r => r.topic }, { title: "Partition", num: true, value: r => r.partition },
      { title: "Committed", num: true, value: r => num(r.committed_offset) }, { title: "End", num: true, value: r => num(r.end_offset) },
      { title: "Lag", num: true, value: r => num(r.lag) }, { title: "Recent lag", value: r => sparkline(r.lag_history || []) },
      { title: "Member", value: r => r.member_id || "" }], g.offsets, "offsets"))]),
    h("section", {}, h("h3", {}, "Reset offsets"),
      share ? h("p", { class: "muted", id: "reset-unavailable" }, "The console does not reset a share group's start offsets (pybroker share-groups reset-offsets does, while the group is Empty).") :
      g.group_type === "streams" ? h("p", { class: "muted", id: "reset-unavailable" }, "The console does not reset a streams group's offsets.") :
      g.state === "Empty" ? reset : h("p", { class: "muted", id: "reset-unavailable" }, `Offsets can be reset only while the group is Empty (it is ${g.state}).`)));
}

async function configsPage(page) {
  const configs = await api("broker-configs");
  const filter = h("input", { id: "config-filter", placeholder: "filter" });
  // a broker's dynamic configs are altered as kafka-configs --entity-type brokers --alter does
  const save = async (k, v) => {
    await api("broker-configs/alter", { key: k, value: v });
    notice(`${k} ${v === null ? "back to its default" : "changed"}.`);
    route();
  };
  const holder = h("div", { class: "table-scroll", id: "broker-configs-card" }, configTable(configs, "broker-configs", save));
  filter.addEventListener("input", () => {
    const f = filter.value.trim();
    holder.replaceChildren(configTable(configs.filter(c => c.name.includes(f)), "broker-configs", save));
  });
  page.replaceChildren(h("h2", {}, "Broker configs"), h("section", { id: "broker-configs-section" }, h("div", { class: "row" }, filter,
    h("span", { class: "muted" }, "Values are humanized (the raw value on hover); overrides are marked; dynamic configs can be edited.")), holder));
}

// -- router --------------------------------------------------------------------------------------
const ROUTES = [
  [/^#\/overview$/, overviewPage, "overview"], [/^#\/topics$/, topicsPage, "topics"], [/^#\/topic\/(.+)$/, topicPage, "topics"],
  [/^#\/messages$/, messagesPage, "messages"], [/^#\/groups$/, groupsPage, "groups"], [/^#\/group\/(.+)$/, groupPage, "groups"],
  [/^#\/configs$/, configsPage, "configs"],
];
// The page registry other scripts extend (admin_pages.js, loaded after this one): [pattern, page(page, match
// or query, query), nav id] rows, tried after ROUTES. Such a page may use h, api, table, num, bytes, notice,
// confirmDialog and route from here.
const PAGES = [];

async function route() {
  timers.forEach(clearInterval);
  timers = [];
  const [path, search] = (location.hash || "#/overview").split("?");
  const query = new URLSearchParams(search || "");
  const page = document.getElementById("page");
  for (const [pattern, fn, nav] of ROUTES.concat(PAGES)) {
    const m = path.match(pattern);
    if (!m) continue;
    document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active", a.id === "nav-" + nav));
    try {
      await fn(page, m[1] !== undefined ? decodeURIComponent(m[1]) : query, query);
    } catch (err) {
      page.replaceChildren(h("p", { class: "error", id: "page-error" }, err.message));
    }
    return;
  }
  location.hash = "#/overview";
}

window.addEventListener("hashchange", () => { clearNotice(); route(); });
window.addEventListener("DOMContentLoaded", async () => {
  try {
    session = await api("session");
    document.getElementById("who").textContent = session.user + " · node " + session.node_id;
  } catch (err) { notice(err.message, true); }
  route();
});
