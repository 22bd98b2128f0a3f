// logan-ray live console: polls console/state, keeps ten minutes of history in memory,
// draws rates and lag as inline SVG sparklines. Plain JS, no dependencies. The record browser
// is records.js; the page's view (internal topics shown, the browser's position) lives in
// location.hash, so a link or a reload opens the same view.
"use strict";
const POLL_MS = 2000, KEEP_MS = 10 * 60 * 1000;
const base = location.pathname.replace(/\/console\/?$/, "");
const series = {};    // series key -> [[time_ms, value], ...]
let previous = null, latest = null;  // the last two states: rates come from their difference
let showInternal = hashParams().get("internal") === "1";

function hashParams() { return new URLSearchParams(location.hash.slice(1)); }
function setHashParams(changes) {  // without a navigation: the view changes, nothing is read again
  const p = hashParams();
  for (const [k, v] of Object.entries(changes)) { if (v === null || v === undefined || v === "") p.delete(k); else p.set(k, v); }
  window.history.replaceState(null, "", "#" + p.toString());
}

function fmt(n) {
  if (n === null || n === undefined) return "–";
  if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(1) + "G";
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return String(Math.round(n * 10) / 10);
}
function bytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}
function esc(s) { return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c])); }
function push(key, t, v) {
  const h = series[key] || (series[key] = []);
  if (h.length && h[h.length - 1][0] >= t) return;  // drawn again without a new sample
  h.push([t, v]);
  while (h.length && h[0][0] < t - KEEP_MS) h.shift();
}
function spark(key, label, unit, color) {
  const h = series[key] || [], w = 260, ht = 60;
  const now = h.length ? h[h.length - 1][0] : 0, max = Math.max(1, ...h.map(p => p[1]));
  const pts = h.map(([t, v]) => [w - (now - t) / KEEP_MS * w, ht - 2 - v / max * (ht - 6)]);
  const path = pts.map((p, i) => (i ? "L" : "M") + p[0].toFixed(1) + "," + p[1].toFixed(1)).join("");
  const last = h.length ? h[h.length - 1][1] : 0;
  const end = pts[pts.length - 1];  // the latest sample, marked so a fresh page shows something
  const dot = end ? `<circle cx="${end[0] - 3}" cy="${end[1].toFixed(1)}" r="3" fill="${color}"/>` : "";
  return `<div class="chart">${esc(label)}: <b>${fmt(last)}</b> ${unit} (max ${fmt(max)})
    <svg width="${w}" height="${ht}" viewBox="0 0 ${w} ${ht}" role="img" aria-label="${esc(label)}">
    <path d="${path}" fill="none" stroke="${color}" stroke-width="1.5"/>${dot}</svg></div>`;
}

function render(state, previous) {
  const t = state.time_ms, dt = previous ? (t - previous.time_ms) / 1000 : 0;
  const before = {};
  if (previous) for (const tp of previous.topics) for (const p of tp.partitions) before[tp.name + "/" + p.partition] = p;
  const committedBefore = {};
  if (previous) for (const g of previous.groups) for (const o of g.offsets) committedBefore[g.group_id + "/" + o.topic + "/" + o.partition] = o.committed;
  // consume rate per partition: how fast the groups' committed offsets advance
  const consumed = {};
  for (const g of state.groups) for (const o of g.offsets) {
    const k = g.group_id + "/" + o.topic + "/" + o.partition, was = committedBefore[k];
    if (dt > 0 && was !== undefined) consumed[o.topic + "/" + o.partition] = (consumed[o.topic + "/" + o.partition] || 0) + Math.max(0, o.committed - was) / dt;
  }
  let html = "", records = 0, size = 0, partitions = 0;
  const internal = state.topics.filter(tp => tp.internal);
  for (const tp of state.topics) {
    for (const p of tp.partitions) { records += p.log_end_offset - p.log_start_offset; size += p.size_bytes; partitions++; }
  }
  const topics = state.topics.filter(tp => showInternal || !tp.internal)
    .sort((a, b) => a.internal - b.internal);  // internal last
  for (const tp of topics) {
    let inRate = 0, outRate = 0, rows = "";
    for (const p of tp.partitions) {
      const k = tp.name + "/" + p.partition, b = before[k];
      const rate = dt > 0 && b ? Math.max(0, p.log_end_offset - b.log_end_offset) / dt : 0;
      const out = consumed[k] || 0;
      inRate += rate; outRate += out;
      const browse = "#" + new URLSearchParams({topic: tp.name, partition: p.partition, position: "earliest",
                                                ...(showInternal ? {internal: "1"} : {})}).toString();
      rows += `<tr><td><a href="${esc(browse)}" title="browse its records">${p.partition}</a></td>
        <td class="l host" title="Ray node ${esc(p.node_id)}">${esc(p.host || p.node_id)}</td>
        <td>${p.log_start_offset}</td><td>${p.log_end_offset}</td><td class="records">${p.log_end_offset - p.log_start_offset}</td>
        <td>${bytes(p.size_bytes)}</td><td>${p.segments}</td><td>${fmt(rate)}</td><td>${fmt(out)}</td></tr>`;
    }
    if (dt > 0) { push("in/" + tp.name, t, inRate); push("out/" + tp.name, t, outRate); }
    const total = tp.partitions.reduce((s, p) => s + p.log_end_offset - p.log_start_offset, 0);
    html += `<section class="topic" data-topic="${esc(tp.name)}"><h2>${esc(tp.name)}
      <small>${tp.partitions.length} partition(s) · <span class="topic-records">${total}</span> records</small></h2>
      <div class="charts">${spark("in/" + tp.name, "produce", "rec/s", "#2a7de1")}${spark("out/" + tp.name, "consume (groups)", "rec/s", "#2e9d57")}</div>
      <table><tr><th>partition</th><th class="l">host</th><th>log start</th><th>log end</th><th>records</th><th>size</th>
      <th>segments</th><th>produce rec/s</th><th>consume rec/s</th></tr>${rows}</table></section>`;
  }
  document.getElementById("topics").innerHTML = html || '<section class="empty">no topics yet</section>';
  document.getElementById("internal-count").textContent =
    `${internal.length} internal topic(s)${internal.length ? ": " + internal.map(tp => tp.name).join(", ") : ""}`;
  if (typeof browserTopics === "function") browserTopics(state.topics.filter(tp => showInternal || !tp.internal));
  let gh = "";
  for (const g of state.groups) {
    let lag = 0, rows = "";
    for (const o of g.offsets) {
      lag += o.lag || 0;
      rows += `<tr><td class="l">${esc(o.topic)}</td><td>${o.partition}</td><td>${o.committed}</td><td>${fmt(o.end)}</td><td>${fmt(o.lag)}</td></tr>`;
    }
    push("lag/" + g.group_id, t, lag);
    gh += `<section class="group"><h2>group ${esc(g.group_id)} <small>${esc(g.state || "")} · ${g.members} member(s) · lag ${fmt(lag)}</small></h2>
      <div class="charts">${spark("lag/" + g.group_id, "total lag", "records", "#c0392b")}</div>
      <table><tr><th class="l">topic</th><th>partition</th><th>committed</th><th>log end</th><th>lag</th></tr>${rows}</table></section>`;
  }
  document.getElementById("groups").innerHTML = gh;
  document.getElementById("summary").textContent =
    `${state.topics.length} topics · ${partitions} partitions · ${fmt(records)} records · ${bytes(size)} · ${state.groups.length} groups · ${new Date(t).toLocaleTimeString()}`;
}

function toggleInternal(on) {
  showInternal = on;
  setHashParams({internal: on ? "1" : null});
  if (latest) render(latest, previous);
}

async function poll() {
  try {
    const r = await fetch(base + "/console/state", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    const state = await r.json();
    render(state, latest);
    previous = latest; latest = state;
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = "cannot reach the broker: " + e.message;
  }
  setTimeout(poll, POLL_MS);
}
const internalBox = document.getElementById("show-internal");
internalBox.checked = showInternal;
internalBox.addEventListener("change", () => toggleInternal(internalBox.checked));
poll();
