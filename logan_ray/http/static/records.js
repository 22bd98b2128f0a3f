// logan-ray console, record browser: reads one partition a page at a time through POST /subscribe
// (encoding base64, so any bytes arrive intact; the server caps each page), shows each record's
// offset, timestamp, key, value and headers decoded as text, JSON or hex (chosen per field, or
// forced), and finds records by key among those read. Its view lives in location.hash
// (topic, partition, offset | timestamp | position, decode, key, only), so a link reopens it.
"use strict";
const PAGE_RECORDS = 100, PAGE_BYTES = 1 << 20, KEEP_RECORDS = 5000, SHOW_CHARS = 10000;
const strictUtf8 = new TextDecoder("utf-8", {fatal: true}), lossyUtf8 = new TextDecoder("utf-8");
const browser = {records: [], next: null, highWatermark: null, logStart: null, topic: null, partition: 0};
const $ = id => document.getElementById(id);

function bytesOf(b64) {
  const s = atob(b64), u = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
  return u;
}
function hexOf(u, lines) {
  const parts = [];
  for (let i = 0; i < u.length; i += 16) {
    const row = Array.from(u.subarray(i, i + 16), b => b.toString(16).padStart(2, "0")).join(" ");
    parts.push(lines && u.length > 16 ? i.toString(16).padStart(6, "0") + "  " + row : row);
  }
  return parts.join(lines ? "\n" : " ");
}
function textOf(u) { try { return strictUtf8.decode(u); } catch (e) { return null; } }
function jsonOf(text) {
  if (text === null) return undefined;
  try { return JSON.parse(text); } catch (e) { return undefined; }
}

// One field (key, value or header value) as {kind: "null"|"text"|"json"|"hex", text}. "auto": JSON for
// objects and arrays, text for other UTF-8, hex for anything that is not UTF-8; "plain" (keys): text or hex.
function decoded(b64, mode) {
  if (b64 === null || b64 === undefined) return {kind: "null", text: "null"};
  const u = bytesOf(b64), text = textOf(u);
  if (mode === "hex") return {kind: "hex", text: hexOf(u, true)};
  if (mode === "text") return {kind: "text", text: text !== null ? text : lossyUtf8.decode(u)};
  const parsed = mode === "plain" ? undefined : jsonOf(text);
  if (parsed !== undefined && (mode === "json" || (parsed !== null && typeof parsed === "object")))
    return {kind: "json", text: JSON.stringify(parsed, null, 2)};
  return text !== null ? {kind: "text", text} : {kind: "hex", text: hexOf(u, true)};
}
// What a key search compares with: the key's text, or its hex digits when it is not UTF-8.
function keyString(b64) {
  if (b64 === null || b64 === undefined) return null;
  const u = bytesOf(b64), text = textOf(u);
  return text !== null ? text : hexOf(u, false);
}
function shown(field) {
  const t = field.text.length > SHOW_CHARS ? field.text.slice(0, SHOW_CHARS) + ` … (${field.text.length} characters)` : field.text;
  return `<pre data-kind="${field.kind}">${esc(t)}</pre>`;
}

function view() {
  const p = hashParams(), out = {topic: p.get("topic"), partition: parseInt(p.get("partition") || "0", 10),
    decode: p.get("decode") || "auto", key: p.get("key") || "", only: p.get("only") === "1"};
  if (p.has("offset")) out.offset = parseInt(p.get("offset"), 10);
  else if (p.has("timestamp")) out.timestamp = parseInt(p.get("timestamp"), 10);
  else out.position = p.get("position") === "latest" ? "latest" : "earliest";
  return out;
}

// The form -> the hash (a new read), or one line saying what is wrong with it.
function submitForm(ev) {
  ev.preventDefault();
  const from = $("b-from").value, at = $("b-at").value.trim();
  const p = {topic: $("b-topic").value, partition: $("b-partition").value, decode: $("b-decode").value,
    key: $("b-key").value, only: $("b-only").checked ? "1" : null, internal: hashParams().get("internal")};
  if (!p.topic) return status("choose a topic");
  if (from === "offset") {
    if (!/^\d+$/.test(at)) return status("the offset must be a whole number ≥ 0");
    p.offset = at;
  } else if (from === "timestamp") {
    const ms = /^\d+$/.test(at) ? parseInt(at, 10) : Date.parse(at);
    if (isNaN(ms)) return status("the timestamp must be milliseconds since 1970 or a date such as 2026-11-27T22:00:00Z");
    p.timestamp = String(ms);
  } else p.position = from;
  const hash = "#" + new URLSearchParams(Object.entries(p).filter(([, v]) => v !== null && v !== "")).toString();
  if (hash === location.hash) open_(); else location.hash = hash;  // hashchange reads
}

function status(text) { $("b-status").textContent = text; }

// The hash -> the form, then the first page.
function open_() {
  const v = view();
  if (!v.topic) return;
  setSelect($("b-topic"), v.topic);
  setPartitions(v.partition);
  $("b-from").value = v.offset !== undefined ? "offset" : v.timestamp !== undefined ? "timestamp" : v.position;
  $("b-at").value = v.offset !== undefined ? v.offset : v.timestamp !== undefined ? new Date(v.timestamp).toISOString() : "";
  $("b-decode").value = v.decode; $("b-key").value = v.key; $("b-only").checked = v.only;
  browser.topic = v.topic; browser.partition = v.partition; browser.records = []; browser.next = null;
  read({offset: v.offset, timestamp: v.timestamp, position: v.position});
}

async function read(from) {
  const body = {topic: browser.topic, partition: browser.partition, max_records: PAGE_RECORDS, max_bytes: PAGE_BYTES,
    encoding: "base64", ...from};
  status("reading…");
  let r, answer;
  try {
    r = await fetch(base + "/subscribe", {method: "POST", cache: "no-store",
      headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
    answer = await r.json();
  } catch (e) { return status("cannot reach the broker: " + e.message); }
  if (!r.ok) return status(`${answer.error_name || "HTTP " + r.status}: ${answer.message || ""}`);
  browser.records.push(...answer.records);
  if (browser.records.length > KEEP_RECORDS) browser.records.splice(0, browser.records.length - KEEP_RECORDS);
  browser.next = answer.next_offset; browser.highWatermark = answer.high_watermark; browser.logStart = answer.log_start_offset;
  draw();
}

function nextPage() {
  if (browser.next === null) return;
  read({offset: browser.next});
}

function draw() {
  const mode = $("b-decode").value, q = $("b-key").value, only = $("b-only").checked, rs = browser.records;
  const matches = q ? rs.filter(r => { const k = keyString(r.key); return k !== null && k.includes(q); }) : [];
  const hits = new Set(matches.map(r => r.offset));
  let rows = "";
  for (const r of rs) {
    const hit = hits.has(r.offset);
    if (only && q && !hit) continue;
    const hs = r.headers.map(([name, v]) => `<div class="header"><b>${esc(name)}</b>${shown(decoded(v, mode))}</div>`).join("");
    rows += `<tr class="record${hit ? " match" : ""}" data-offset="${r.offset}"><td>${r.offset}</td>
      <td class="l">${esc(new Date(r.timestamp).toISOString())}<br><small>${r.timestamp}</small></td>
      <td class="l key">${shown(decoded(r.key, mode === "auto" || mode === "json" ? "plain" : mode))}</td>
      <td class="l value">${shown(decoded(r.value, mode))}</td><td class="l headers">${hs}</td></tr>`;
  }
  $("b-result").innerHTML = rs.length ? `<table class="records"><tr><th>offset</th><th class="l">timestamp</th>
    <th class="l">key</th><th class="l">value</th><th class="l">headers</th></tr>${rows}</table>`
    : '<p class="empty">no records from this position (yet): “next page” reads again</p>';
  const range = rs.length ? `offsets ${rs[0].offset}–${rs[rs.length - 1].offset} read (${rs.length} records)` : "nothing read";
  status(`${browser.topic} [${browser.partition}]: ${range} · log ${browser.logStart}–${browser.highWatermark} · next ${browser.next}`);
  $("b-matches").textContent = q ? `${matches.length} of ${rs.length} read records have a key containing “${q}”` +
    (matches.length ? ": offset(s) " + matches.slice(0, 20).map(r => r.offset).join(", ") + (matches.length > 20 ? " …" : "") : "") : "";
}

// Redrawing from what was read: showing as another kind, or searching keys, reads nothing again.
function redraw() {
  setHashParams({decode: $("b-decode").value === "auto" ? null : $("b-decode").value, key: $("b-key").value,
    only: $("b-only").checked ? "1" : null});
  if (browser.topic !== null) draw();
}

function setSelect(select, value) {
  if (![...select.options].some(o => o.value === value)) select.add(new Option(value, value));
  select.value = value;
}
function setPartitions(chosen) {
  const t = knownTopics.find(tp => tp.name === $("b-topic").value), n = t ? t.partitions.length : chosen + 1;
  const sel = $("b-partition"), keep = chosen !== undefined ? chosen : parseInt(sel.value || "0", 10);
  if (sel.options.length !== n) sel.innerHTML = Array.from({length: n}, (_, i) => `<option>${i}</option>`).join("");
  sel.value = String(Math.min(keep, n - 1));
}

let knownTopics = [];
// Called by console.js with each state: the topics the browser offers.
function browserTopics(topics) {
  knownTopics = topics;
  const sel = $("b-topic"), names = topics.map(tp => tp.name), current = sel.value;
  if ([...sel.options].map(o => o.value).join("\n") !== names.join("\n")) {
    sel.innerHTML = names.map(n => `<option>${esc(n)}</option>`).join("");
    if (current) setSelect(sel, current);
  }
  setPartitions();
}

$("browse-form").addEventListener("submit", submitForm);
$("b-next").addEventListener("click", nextPage);
$("b-topic").addEventListener("change", () => setPartitions(0));
for (const id of ["b-decode", "b-only"]) $(id).addEventListener("change", redraw);
$("b-key").addEventListener("input", redraw);
window.addEventListener("hashchange", open_);  // a new position (the form, a partition's link, the address bar)
open_();
