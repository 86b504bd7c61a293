// pybroker console: the message browser. Searches run in the broker (/console/api/search: key, value and
// header substrings, a time range), capped per request; the page pages older / newer from the edges of
// the window it shows, offers "continue" when a cap stopped a search, shows newest first (or oldest), and
// folds each record to one line (click to unfold; JSON is pretty printed when unfolded; hex per record).
// Loaded before app.js; uses its helpers at call time. Values go into the page as text only.
"use strict";

const WINDOW_MAX = 500;
const CAPS = { bytes: "bytes read", records: "records examined", time: "time" };

function oneLine(shown) {
  if (shown.format === "json" && !shown.truncated) {
    try { return JSON.stringify(JSON.parse(shown.text)); } catch (e) { /* cut JSON: its first line */ }
  }
  return shown.text.split("\n", 1)[0] + (shown.text.includes("\n") ? " …" : "");
}

function blob(shown, open) {
  if (shown === null || shown === undefined) return h("span", { class: "muted" }, "null");
  const text = open ? shown.text + (shown.truncated ? " …" : "") : oneLine(shown);
  return h("pre", { class: open ? "rec open" : "rec folded", title: `${shown.format}, ${shown.size} bytes${shown.note ? ", " + shown.note : ""}` }, text);
}

function headerText(headers, open) {
  if (!headers.length) return "";
  const parts = headers.map(x => `${x.key}=${x.value === null ? "null" : open ? x.value.text : oneLine(x.value)}`);
  return h("pre", { class: open ? "rec open" : "rec folded" }, parts.join(open ? "\n" : ", "));
}

function localMs(input) {
  return input.value ? String(new Date(input.value).getTime()) : "";
}

async function messagesPage(page, query) {
  const topics = await api("topics");
  const field = (id, attrs) => h("input", { id, ...attrs });
  const topicSel = h("select", { id: "msg-topic" }, topics.map(t => h("option", { value: t.name }, t.name)));
  if (query.get("topic")) topicSel.value = query.get("topic");
  const partition = field("msg-partition", { value: query.get("partition") || "0", size: "5", title: "a partition number, or all" });
  const from = h("select", { id: "msg-from" }, ["latest", "earliest", "offset", "timestamp"].map(v => h("option", { value: v }, v)));
  const offset = field("msg-offset", { type: "number", min: "0", value: "0" });
  const when = field("msg-timestamp", { type: "datetime-local", step: "1" });
  const limit = field("msg-limit", { type: "number", min: "1", max: "500", value: "50" });
  const format = h("select", { id: "msg-format" }, (session && session.formats || ["auto", "text", "json", "hex"]).map(v => h("option", { value: v }, v)));
  const key = field("msg-key", { placeholder: "part of the key" });
  const value = field("msg-value", { placeholder: "part of the value" });
  const header = field("msg-header", { placeholder: "header name" });
  const headerValue = field("msg-header-value", { placeholder: "part of a header value" });
  const fromTs = field("msg-from-ts", { type: "datetime-local", step: "1" });
  const toTs = field("msg-to-ts", { type: "datetime-local", step: "1" });
  const tail = field("msg-tail", { type: "checkbox" });
  const status = h("span", { class: "muted", id: "msg-status" });
  const results = h("div", { id: "messages" });
  const older = h("button", { type: "button", class: "secondary", id: "msg-older", disabled: true }, "← Older");
  const newer = h("button", { type: "button", class: "secondary", id: "msg-newer", disabled: true }, "Newer →");
  const more = h("button", { type: "button", id: "msg-continue", hidden: true }, "Continue");
  const order = h("button", { type: "button", class: "secondary", id: "msg-order" }, "Newest first");
  let win = null, lastDirection = "older", newestFirst = true;
  const open = new Set(), hexed = new Map();
  const id = m => `${m.partition}:${m.offset}`;

  const sorted = () => win.messages.slice().sort((a, b) =>
    (newestFirst ? -1 : 1) * (a.timestamp - b.timestamp || a.partition - b.partition || a.offset - b.offset));
  const render = () => {
    const rows = win ? sorted() : [];
    results.replaceChildren(table([
      { title: "Partition", num: true, value: r => r.partition }, { title: "Offset", num: true, value: r => r.offset },
      { title: "Timestamp", value: r => new Date(r.timestamp).toISOString() },
      { title: "Key", value: r => blob((hexed.get(id(r)) || r).key, open.has(id(r))) },
      { title: "Value", value: r => blob((hexed.get(id(r)) || r).value, open.has(id(r))) },
      { title: "Headers", value: r => headerText((hexed.get(id(r)) || r).headers, open.has(id(r))) },
      { title: "", value: r => h("span", { class: "rec-actions" },
        h("button", { type: "button", class: "secondary small rec-toggle", title: "fold / unfold",
          onclick: () => { open.has(id(r)) ? open.delete(id(r)) : open.add(id(r)); render(); } }, open.has(id(r)) ? "fold" : "unfold"),
        h("button", { type: "button", class: "secondary small rec-hex", title: "show this record's bytes in hex",
          onclick: () => toggleHex(r) }, hexed.has(id(r)) ? "as shown" : "hex")) }],
    rows, "message-table"));
  };
  const toggleHex = async r => {
    if (hexed.has(id(r))) { hexed.delete(id(r)); render(); return; }
    try {
      const one = await api("messages?" + new URLSearchParams({ topic: win.topic, partition: r.partition, from: "offset",
        offset: r.offset, limit: "1", format: "hex" }));
      if (one.messages.length) { hexed.set(id(r), one.messages[0]); open.add(id(r)); render(); }
    } catch (err) { notice(err.message, true); }
  };
  const filters = p => {
    for (const [name, input] of [["key", key], ["value", value], ["header", header], ["header_value", headerValue]]) {
      if (input.value !== "") p.set(name, input.value);
    }
    if (fromTs.value) p.set("from_ts", localMs(fromTs));
    if (toTs.value) p.set("to_ts", localMs(toTs));
    return p;
  };
  const base = () => filters(new URLSearchParams({ topic: topicSel.value, partition: partition.value.trim(), limit: limit.value, format: format.value }));
  const describe = r => {
    const where = r.partition === "all" ? `from ${Object.keys(r.high_watermark).length} partitions` : `from partition ${r.partition}`;
    const offsets = win.messages.map(m => m.offset);
    const range = r.partition !== "all" && offsets.length ? ` (offsets ${Math.min(...offsets)}–${Math.max(...offsets)}, log ${r.log_start[r.partition]}–${r.high_watermark[r.partition]})` : "";
    const reached = r.partition !== "all" ? ` (${r.direction === "older" ? "back to" : "up to"} offset ${(r.direction === "older" ? r.older : r.newer).split(":")[1]})` : "";
    const cap = r.stopped ? ` — stopped at the ${CAPS[r.stopped] || r.stopped} cap of one request${reached}: continue to search further` : "";
    const end = r.at_end && !r.stopped ? (r.direction === "older" ? " — the oldest there is" : " — up to the newest") : "";
    status.textContent = `${win.messages.length} messages ${where}${range}${cap}${end}` + (r.error ? ` — ${r.error}` : "");
    more.hidden = !r.stopped;
    const edges = text => Object.fromEntries(text.split(",").filter(Boolean).map(e => e.split(":").map(Number)));
    const all = (text, bound, done) => Object.entries(edges(text)).every(([p, o]) => done(o, bound[p]));
    older.disabled = (r.direction === "older" && r.at_end && !r.stopped) || all(win.older, r.log_start, (o, b) => o <= b);
    newer.disabled = (r.direction === "newer" && r.at_end && !r.stopped) || all(win.newer, r.high_watermark, (o, b) => o >= b);
  };
  const run = async (p, mode) => {
    try {
      const r = await api("search?" + p);
      if (mode === "append" && win) {
        win.messages = win.messages.concat(r.messages);
        if (r.direction === "older") win.older = r.older; else win.newer = r.newer;
      } else {
        win = r; open.clear(); hexed.clear();
      }
      win.topic = r.topic;
      lastDirection = r.direction;
      describe(r); render(); clearNotice();
      return r;
    } catch (err) { notice(err.message, true); return null; }
  };
  const load = () => {
    const p = base();
    p.set("from", from.value);
    if (from.value === "offset") p.set("offset", offset.value);
    if (from.value === "timestamp") p.set("timestamp", localMs(when));
    return run(p, "replace");
  };
  const page_ = direction => {
    if (!win) return load();
    const p = base(); p.set("direction", direction); p.set("cursor", direction === "older" ? win.older : win.newer);
    return run(p, "replace");
  };
  older.addEventListener("click", () => page_("older"));
  newer.addEventListener("click", () => page_("newer"));
  more.addEventListener("click", () => {
    const p = base(); p.set("direction", lastDirection); p.set("cursor", lastDirection === "older" ? win.older : win.newer);
    run(p, "append");
  });
  order.addEventListener("click", () => {
    newestFirst = !newestFirst; order.textContent = newestFirst ? "Newest first" : "Oldest first";
    if (win) render();
  });
  const poll = async () => {
    if (!tail.checked || !win) return;
    const p = base(); p.set("direction", "newer"); p.set("cursor", win.newer);
    try {
      const r = await api("search?" + p);
      if (r.messages.length) {
        win.messages = win.messages.concat(r.messages).sort((a, b) => a.timestamp - b.timestamp).slice(-WINDOW_MAX);
        win.newer = r.newer; render();
        status.textContent = `live: ${win.messages.length} messages, newest at ${new Date(Math.max(...win.messages.map(m => m.timestamp))).toISOString()}`;
      }
    } catch (err) { notice(err.message, true); }
  };
  tail.addEventListener("change", () => { if (tail.checked) { from.value = "latest"; load(); } });
  timers.push(setInterval(poll, 1000));

  const produceKey = field("produce-key", { placeholder: "key (empty: null)" });
  const produceValue = h("textarea", { id: "produce-value", placeholder: "value" });
  const headers = h("textarea", { id: "produce-headers", placeholder: "header=value lines" });
  const valueFormat = h("select", { id: "produce-format" }, ["text", "json", "hex"].map(v => h("option", { value: v }, v)));
  const produced = h("span", { id: "produce-result", class: "muted" });
  const produce = h("form", { class: "row", id: "produce", onsubmit: async e => {
    e.preventDefault();
    try {
      const r = await api("produce", { topic: topicSel.value, partition: partition.value === "all" ? 0 : Number(partition.value),
        key: produceKey.value === "" ? null : produceKey.value, value: produceValue.value, value_format: valueFormat.value,
        headers: linesToPairs(headers.value) });
      produced.textContent = `Produced to ${r.topic}-${r.partition} at offset ${r.offset}`;
      if (!tail.checked) { from.value = "latest"; load(); }
    } catch (err) { notice(err.message, true); }
  } }, h("label", {}, "Key", produceKey), h("label", {}, "Value", produceValue), h("label", {}, "Value as", valueFormat),
  h("label", {}, "Headers", headers), h("button", { type: "submit", id: "produce-submit" }, "Produce"), produced);

  page.replaceChildren(
    h("h2", {}, "Messages"),
    h("section", {}, h("form", { class: "row", id: "browse", onsubmit: e => { e.preventDefault(); load(); } },
      h("label", {}, "Topic", topicSel), h("label", {}, "Partition (or all)", partition), h("label", {}, "From", from),
      h("label", {}, "Offset", offset), h("label", {}, "Time", when), h("label", {}, "Limit", limit), h("label", {}, "Show as", format),
      h("button", { type: "submit", id: "msg-load" }, "Load"), h("label", {}, "Live tail", tail)),
    h("form", { class: "row", id: "search", onsubmit: e => { e.preventDefault(); load(); } },
      h("label", {}, "Key contains", key), h("label", {}, "Value contains", value), h("label", {}, "Header", header),
      h("label", {}, "Header value contains", headerValue), h("label", {}, "From time", fromTs), h("label", {}, "To time", toTs),
      h("button", { type: "submit", id: "msg-search" }, "Search")),
    h("div", { class: "row" }, older, newer, order, more, status)),
    h("section", {}, h("h3", {}, "Produce a message"), produce),
    h("section", {}, results));
  if (topics.length) load();
}
