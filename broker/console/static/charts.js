// pybroker console: line charts with axes (humanized units on y, clock times on x), a legend that tells
// the series apart by colour and dash, and a hover readout. Loaded before app.js; uses its `svg` and `h`
// at call time. Every label is set as text (textContent), never as HTML.
"use strict";

const CHART = { width: 640, height: 210, left: 70, right: 12, top: 10, bottom: 26, yTicks: 4, xTicks: 5 };
//: dash patterns by series position: the second series of a chart is dashed, so equal lines stay visible
const DASHES = ["", "7 4", "2 3", "10 3 2 3"];

// the top of the y axis: `ticks` steps of a round size (1, 2, 2.5 or 5 times a power of ten) that reach `max`
function niceCeiling(max, ticks) {
  if (!(max > 0)) return ticks;
  const raw = max / ticks, magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(m => m * magnitude).find(s => s >= raw);
  return step * ticks;
}

function clockTime(ms) {
  return new Date(ms).toLocaleTimeString("en-GB", { hour12: false });
}

function pathOf(points, x, y) {
  let d = "", pen = false;
  points.forEach((v, i) => {
    if (v === null || v === undefined) { pen = false; return; }
    d += (pen ? "L" : "M") + x(i).toFixed(1) + "," + y(v).toFixed(1);
    pen = true;
  });
  return d;
}

// chart(title, [{key, name, color, points}], unit, times): `unit` turns a value into its label ("1.5 KiB/s"),
// `times` are the samples' wall-clock ms (without them the x axis is unlabelled)
function chart(title, series, unit, times) {
  const { width, height, left, right, top, bottom } = CHART;
  const count = Math.max(0, ...series.map(s => s.points.length));
  const all = series.flatMap(s => s.points.filter(v => v !== null && v !== undefined));
  const max = niceCeiling(Math.max(0, ...all), CHART.yTicks);
  const plotW = width - left - right, plotH = height - top - bottom;
  const x = i => left + (count < 2 ? plotW : (i / (count - 1)) * plotW);
  const y = v => top + plotH - (v / max) * plotH;
  const box = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  const yAxis = svg("g", { class: "axis axis-y" });
  for (let t = 0; t <= CHART.yTicks; t++) {
    const v = (max * t) / CHART.yTicks, at = y(v);
    yAxis.append(svg("line", { x1: left, x2: width - right, y1: at, y2: at, class: t ? "grid" : "base" }));
    const label = svg("text", { x: left - 6, y: at + 4, "text-anchor": "end" });
    label.textContent = unit(v);
    yAxis.append(label);
  }
  const xAxis = svg("g", { class: "axis axis-x" });
  if (times && times.length) {
    const ticks = Math.min(CHART.xTicks, times.length);
    for (let t = 0; t < ticks; t++) {
      const i = ticks < 2 ? times.length - 1 : Math.round((t * (times.length - 1)) / (ticks - 1));
      const label = svg("text", { x: x(i), y: height - 8, "text-anchor": t === 0 && ticks > 1 ? "start" : t === ticks - 1 ? "end" : "middle" });
      label.textContent = clockTime(times[i]);
      xAxis.append(svg("line", { x1: x(i), x2: x(i), y1: top + plotH, y2: top + plotH + 4, class: "base" }), label);
    }
  }
  box.append(yAxis, xAxis);
  series.forEach((s, n) => {
    box.append(svg("path", { d: pathOf(s.points, x, y), fill: "none", stroke: s.color, "stroke-width": "2",
      "stroke-dasharray": s.dash !== undefined ? s.dash : DASHES[n % DASHES.length], class: "series series-" + s.key }));
  });
  if (!count) {
    const empty = svg("text", { x: left + plotW / 2, y: top + plotH / 2, "text-anchor": "middle", class: "empty" });
    empty.textContent = "no samples yet (one every 2 s)";
    box.append(empty);
  }
  const cursor = svg("line", { x1: 0, x2: 0, y1: top, y2: top + plotH, class: "cursor", visibility: "hidden" });
  const overlay = svg("rect", { x: left, y: top, width: plotW, height: plotH, fill: "transparent", class: "overlay" });
  box.append(cursor, overlay);
  const readout = h("div", { class: "readout muted", id: "readout-" + series[0].key }, "\u00a0");
  overlay.addEventListener("mousemove", event => {
    if (count < 1) return;
    const rect = overlay.getBoundingClientRect();
    const i = Math.max(0, Math.min(count - 1, Math.round(((event.clientX - rect.left) / rect.width) * (count - 1))));
    cursor.setAttribute("x1", x(i)); cursor.setAttribute("x2", x(i)); cursor.setAttribute("visibility", "visible");
    const values = series.map(s => `${s.name}: ${s.points[i] === null || s.points[i] === undefined ? "–" : unit(s.points[i])}`);
    readout.textContent = (times && times[i] ? clockTime(times[i]) + " — " : "") + values.join(", ");
  });
  overlay.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); readout.textContent = "\u00a0"; });
  const legend = h("div", { class: "legend" }, series.map((s, n) => {
    const last = s.points.length ? s.points[s.points.length - 1] : null;
    const swatch = svg("svg", { class: "swatch", viewBox: "0 0 24 8" });
    swatch.append(svg("line", { x1: 0, x2: 24, y1: 4, y2: 4, stroke: s.color, "stroke-width": "2.5",
      "stroke-dasharray": s.dash !== undefined ? s.dash : DASHES[n % DASHES.length] }));
    return h("span", { class: "legend-item" }, swatch, `${s.name}: ${last === null || last === undefined ? "–" : unit(last)}`);
  }));
  return h("div", { class: "chart", id: "chart-" + series[0].key }, h("h3", {}, title), box, legend, readout);
}

function overviewCharts(c) {
  const s = c.series;
  return h("div", { class: "charts" },
    chart("Throughput", [
      { key: "bytes_in", name: "in", color: "#2f6fdf", points: s.bytes_in_per_s },
      { key: "bytes_out", name: "out", color: "#d35400", points: s.bytes_out_per_s }], v => bytes(v) + "/s", c.times),
    chart("Messages and requests", [
      { key: "messages_in", name: "messages in", color: "#8e44ad", points: s.messages_in_per_s },
      { key: "requests", name: "requests", color: "#1e8e3e", points: s.requests_per_s }], v => rate(v) + "/s", c.times),
    chart("Request latency (without Fetch long-polls)", [
      { key: "latency_p50", name: "p50", color: "#2f6fdf", points: s.latency_p50_ms },
      { key: "latency_p99", name: "p99", color: "#c0392b", points: s.latency_p99_ms }], v => millis(v), c.times));
}

function rate(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(1) + " M";
  if (v >= 1e3) return (v / 1e3).toFixed(1) + " k";
  return v >= 10 || v === 0 ? Math.round(v).toString() : v.toFixed(1);
}

function millis(v) {
  if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + " s";
  return (v >= 10 || v === 0 ? Math.round(v) : v.toFixed(1)) + " ms";
}
