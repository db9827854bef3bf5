// The pit page: a tile per table, what needs a person first (fault, silent, critical alarm,
// record alarm, offline, then the rest), kept live over server-sent events (the whole floor on
// every (re)connect, then the tiles that changed); a banner when the pit has lost its broker
// or its database, or this page the pit; filter, search and a compact view for a big floor; the
// shift's numbers and chart below. Every time in the pit's zone, named.
import {$, esc, setZone, pitClock, pitNow, timeAt, ago, zoneName} from "/static/pitcommon.js";

const tiles = new Map();
window.pitReceived = [];  // what the live stream delivered (tests, latency)
const RANKS = ["fault", "silent", "critical alarm", "record alarm", "offline", ""];
const COMPACT_FROM = 60;  // tables: the compact view unless the person chose otherwise
let links = {broker: {up: true, since: null}, database: {up: true, since: null}, ingest: {up: true, since: null}};
let pageLost = null;  // when this page lost its stream to the pit (pit clock, s)

/** 0 fault, 1 silent, 2 critical alarm, 3 record alarm, 4 offline, 5 the rest. */
export function rank(t) {
  if (t.state === "fault") return 0;
  if (t.state === "silent") return 1;
  if ((t.alarms_total || 0) > 0) return 2;
  if ((t.record_alarms || []).length) return 3;
  if (t.state === "offline" || t.state === "unknown") return 4;
  return 5;
}
window.pitRank = rank;

function area(t) { return t.table_id.replace(/[-_ ]?\d+$/, "") || t.table_id; }

function lastRound(r) {
  if (!r) return "no round yet";
  if (r.status !== "settled") return `#${r.round_seq} ${r.status.toUpperCase()} ${esc((r.reasons || []).join(", ").replaceAll("_", " "))}`;
  const hand = r.two_jacks ? "dealer two Jacks" : `${esc((r.front || []).join(" "))} | ${esc((r.back || []).join(" "))}`;
  return `#${r.round_seq} settled · ${hand}`;
}

function why(t) {
  const r = rank(t);
  if (r === 0) return `FAULT${t.fault ? ": " + esc(t.fault.detail || t.fault.code || t.fault) : ""}`;
  if (r === 1) return `SILENT since ${timeAt(t.silent_since)}`;
  if (r === 2) return `${t.alarms_total} alarm${t.alarms_total > 1 ? "s" : ""} to acknowledge: ${esc((t.alarms || []).map((a) => a.code).join(", ").replaceAll("_", " "))}`;
  if (r === 3) return `record: ${esc(t.record_alarms.map((a) => a.kind).join(", ").replaceAll("_", " "))}`;
  return "";
}

function badges(t) {
  const out = [];
  if (t.open_gaps) out.push(`<span class="badge warn">${t.open_gaps} missing</span>`);
  if (t.awaiting_key) out.push(`<span class="badge warn" title="refused until the table's key is registered ([record] feed_keys_file); stored then">${t.awaiting_key} wait for a key</span>`);
  if (t.rejected_last_hour) out.push(`<span class="badge warn" title="rejects of reasons seen within the hour, counted since each reason first came">${t.rejected_last_hour} rejected</span>`);
  if (t.protection) out.push(`<span class="badge warn">protection: ${esc(t.protection.test)}</span>`);
  return out.join("");
}

function heardHtml(t) {
  return `<span class="heard" data-heard="${t.last_heard ?? ""}" title="last heard at ${esc(timeAt(t.last_heard))}">${ago(t.last_heard)}</span>`;
}

function tileHtml(t) {
  const r = rank(t);
  const cls = `tile table-tile r${r} st-${esc(t.state)}`;
  const reason = why(t);
  const href = `/table/${encodeURIComponent(t.table_id)}`;
  const label = `${t.table_id} ${t.state}${reason ? ": " + reason.replace(/<[^>]*>/g, "") : ""}`;
  if (document.body.classList.contains("compact")) {
    return `<a class="${cls}" href="${href}" data-table="${esc(t.table_id)}" data-rank="${r}" title="${esc(label)}">
      <span class="tt-id">${esc(t.table_id)}</span><span class="tt-state">${esc(RANKS[r] || t.state)}</span>${heardHtml(t)}</a>`;
  }
  return `<a class="${cls}" href="${href}" data-table="${esc(t.table_id)}" data-rank="${r}">
    <div class="tt-head"><span class="tt-id">${esc(t.table_id)}</span><span class="state st-${esc(t.state)}">${esc(t.state).toUpperCase()}</span></div>
    ${reason ? `<div class="tt-why">${reason}</div>` : ""}
    <div class="tt-row"><span>Dealer <b>${esc(t.dealer_id || "—")}</b></span><span title="rounds closed in the last 60 minutes">Rounds/h <b>${t.rounds_last_hour}</b></span></div>
    <div class="tt-row"><span>${t.round_in_progress ? "<b>round in progress</b>" : "between rounds"}</span><span>seq <b>${t.high_seq ?? "—"}</b></span></div>
    <div class="tt-last">${lastRound(t.last_round)}</div>
    <div class="tt-heard">last heard ${heardHtml(t)}</div>
    <div class="tt-badges">${badges(t)}</div></a>`;
}

function ticks() { for (const el of document.querySelectorAll("[data-heard]")) el.textContent = ago(el.dataset.heard); }

function matches(t, state, areaWanted, text) {
  const r = rank(t);
  if (state === "needs" && r > 4) return false;
  if (state === "alarm" && r !== 2 && r !== 3) return false;
  if (["fault", "silent", "offline", "closed", "online"].includes(state) && t.state !== state) return false;
  if (areaWanted && area(t) !== areaWanted) return false;
  return !text || t.table_id.toLowerCase().includes(text) || String(t.dealer_id || "").toLowerCase().includes(text);
}

function areas(list) {
  const sel = $("area-filter");
  const known = [...new Set(list.map(area))].sort();
  const have = [...sel.options].slice(1).map((o) => o.value);
  if (known.join("\n") === have.join("\n")) return;
  const chosen = sel.value;
  sel.innerHTML = `<option value="">all</option>` + known.map((a) => `<option>${esc(a)}</option>`).join("");
  sel.value = known.includes(chosen) ? chosen : "";
}

function render() {
  const all = [...tiles.values()].sort((a, b) => rank(a) - rank(b) || a.table_id.localeCompare(b.table_id));
  areas(all);
  const compactChosen = localStorage.getItem("pit-compact");
  const compact = compactChosen === null ? all.length >= COMPACT_FROM : compactChosen === "1";
  document.body.classList.toggle("compact", compact);
  $("compact").setAttribute("aria-pressed", String(compact));
  const state = $("state-filter").value, text = $("search").value.trim().toLowerCase();
  const list = all.filter((t) => matches(t, state, $("area-filter").value, text));
  $("tiles").innerHTML = list.map(tileHtml).join("") || `<p class="muted">No table matches.</p>`;
  $("shown").textContent = list.length === all.length ? `${all.length} tables` : `showing ${list.length} of ${all.length}`;
  const by = (s) => all.filter((t) => t.state === s).length;
  const needs = all.filter((t) => rank(t) <= 4).length;
  $("summary").innerHTML = `<b class="${needs ? "needs" : "fine"}">${needs} need a person</b> · ${by("fault")} fault · ${by("silent")} silent · ` +
    `${all.filter((t) => rank(t) === 2 || rank(t) === 3).length} alarm · ${by("offline")} offline · ${by("online")} open · ${by("closed")} closed`;
}
let renderPending = null;
function renderSoon() {  // at most 4 renders a second, however busy the floor
  if (renderPending) return;
  renderPending = setTimeout(() => { renderPending = null; render(); }, 250);
}

function banner() {
  const lines = [];
  const since = (at) => `since ${timeAt(at)} (${ago(at)})`;
  if (pageLost !== null) lines.push(`This page has lost the pit ${since(pageLost)}: what you see is not live.`);
  if (!links.database.up) lines.push(`The pit has lost its database ${since(links.database.since)}: nothing new is recorded; the tables' messages wait at the broker.`);
  if (!links.broker.up) lines.push(`The pit has lost the MQTT broker ${since(links.broker.since)}: no table is heard; tiles show the last state known.`);
  if (links.ingest && !links.ingest.up) lines.push(`The pit is behind ${since(links.ingest.since)}: messages wait to be stored (a flood, or a slow database); no table is called silent meanwhile.`);
  const b = $("banner");
  b.hidden = lines.length === 0;
  b.innerHTML = lines.map((l) => `<p>${esc(l)}</p>`).join("");
  document.body.classList.toggle("stale", lines.length > 0);
}

function onLinks(data) {
  pitClock(data.at);
  if (data.links) links = data.links;
  banner();
}

function connect() {
  const es = new EventSource("/api/events");
  es.addEventListener("open", () => { $("link").className = "link up"; pageLost = null; banner(); });
  es.addEventListener("error", () => {
    $("link").className = "link down";
    if (pageLost === null) pageLost = pitNow();
    banner();
  });
  es.addEventListener("floor", (e) => {
    const data = JSON.parse(e.data);
    setZone(data.timezone);
    onLinks(data);
    clock();
    $("site").textContent = data.site;
    tiles.clear();
    for (const t of data.tiles) tiles.set(t.table_id, t);
    window.pitReceived.push({kind: "floor", at: Date.now(), tables: data.tiles.length});
    render();
  });
  es.addEventListener("tiles", (e) => {
    const data = JSON.parse(e.data);
    pitClock(data.at);
    for (const t of data.tiles) tiles.set(t.table_id, t);
    window.pitReceived.push({kind: "tiles", at: Date.now(), sent: data.sent});
    renderSoon();
    soon();
  });
  es.addEventListener("link", (e) => {
    const data = JSON.parse(e.data);
    window.pitReceived.push({kind: "link", at: Date.now(), links: data.links});
    onLinks(data);
  });
}

// --- the shift: its chart (rounds per table; for a big floor, how many tables dealt how many
// rounds) with axes, title and values, and its numbers ------------------------------------------

function perTable(rows) {
  const m = new Map();
  for (const r of rows) m.set(r.table_id, (m.get(r.table_id) || 0) + r.rounds);
  return [...m.entries()].map(([label, value]) => ({label, value}));
}

function histogram(items) {
  const max = Math.max(1, ...items.map((i) => i.value));
  const step = Math.max(1, Math.ceil(max / 10));
  const bins = Array.from({length: Math.ceil((max + 1) / step)}, (_, k) => ({label: `${k * step}–${k * step + step - 1}`, value: 0}));
  for (const i of items) bins[Math.floor(i.value / step)].value += 1;
  return bins;
}

function chart(title, xName, yName, bars) {
  const W = 900, H = 240, L = 56, B = 58, T = 30, R = 10;
  const max = Math.max(1, ...bars.map((b) => b.value));
  const top = Math.ceil(max / 4) * 4 || 4;
  const bw = (W - L - R) / Math.max(1, bars.length);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  let s = `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}" class="chart">`;
  s += `<text x="${W / 2}" y="18" class="c-title" text-anchor="middle">${esc(title)}</text>`;
  for (let k = 0; k <= 4; k++) {
    const v = (top * k) / 4, yy = y(v);
    s += `<line x1="${L}" x2="${W - R}" y1="${yy}" y2="${yy}" class="c-grid"/><text x="${L - 6}" y="${yy + 4}" text-anchor="end" class="c-tick">${v}</text>`;
  }
  bars.forEach((b, i) => {
    const x = L + i * bw, h = y(0) - y(b.value);
    s += `<rect x="${x + bw * 0.15}" y="${y(b.value)}" width="${bw * 0.7}" height="${h}" class="c-bar"><title>${esc(b.label)}: ${b.value}</title></rect>`;
    if (bars.length <= 40) s += `<text x="${x + bw / 2}" y="${y(b.value) - 4}" text-anchor="middle" class="c-value">${b.value}</text>`;
    if (bars.length <= 40) s += `<text x="${x + bw / 2}" y="${H - B + 16}" text-anchor="middle" class="c-tick">${esc(b.label)}</text>`;
  });
  s += `<line x1="${L}" x2="${L}" y1="${T}" y2="${y(0)}" class="c-axis"/><line x1="${L}" x2="${W - R}" y1="${y(0)}" y2="${y(0)}" class="c-axis"/>`;
  s += `<text x="${(L + W - R) / 2}" y="${H - 10}" text-anchor="middle" class="c-name">${esc(xName)}</text>`;
  s += `<text transform="translate(14 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle" class="c-name">${esc(yName)}</text></svg>`;
  return s;
}

async function shift() {
  const r = await fetch("/api/shift");
  if (!r.ok) return;
  const data = await r.json();
  setZone(data.timezone);  // the shift is named in the pit's zone, even before the stream
  const name = data.shift ? `${data.shift} (${zoneName()})` : "none yet";
  $("shift-name").textContent = name;
  $("csv").href = "/api/shift.csv?shift=" + encodeURIComponent(data.shift || "");
  const rows = data.rows;
  const tables = perTable(rows);
  $("shift-chart").innerHTML = tables.length === 0 ? `<p class="muted">No round this shift yet.</p>`
    : tables.length <= 40 ? chart(`Rounds per table, shift ${name}`, "table", "rounds", tables)
    : chart(`Tables by rounds dealt, shift ${name} (${tables.length} tables)`, "rounds dealt this shift", "tables", histogram(tables));
  const cols = [["table_id", "Table"], ["dealer_id", "Dealer"], ["rounds", "Rounds"], ["rounds_per_hour", "Rounds/h"], ["seats_played", "Seats"],
    ["dead", "Dead"], ["misdeal", "Misdeal"], ["void", "Void"], ["players_win", "Win"], ["players_push", "Push"],
    ["players_lose", "Lose"], ["side_wagered", "Side staked"], ["hold", "Hold"], ["theoretical_hold", "Theor."]];
  const pct = (v) => v == null ? "—" : (100 * v).toFixed(2) + "%";
  $("shift-table").innerHTML = `<tr>${cols.map(([, h], i) => `<th class="${i < 2 ? "l" : ""}">${h}</th>`).join("")}</tr>` +
    rows.map((r) => `<tr>${cols.map(([k], i) => `<td class="${i < 2 ? "l" : ""}">${k.includes("hold") ? pct(r[k]) : esc(r[k])}</td>`).join("")}</tr>`).join("");
}

// The floor's pooled protection: each pool's tests as bars (statistic ÷ threshold, red when
// alarmed), its tables with their rounds; each finding with whose it is (one table or the
// model) and the tables' shares of its evidence, acknowledged with a supervisor's badge and PIN.
function bar(t) {
  const ratio = t.threshold > 0 ? Math.min(1, t.statistic / t.threshold) : 0;
  const cls = t.alarmed_since ? "alarmed" : ratio > 0.5 ? "warm" : "";
  return `<div class="pbar ${cls}" title="${esc(t.worst || t.title)}"><span class="pname">${esc(t.title)}</span>
    <span class="ptrack"><span class="pfill" style="width:${(100 * ratio).toFixed(1)}%"></span></span>
    <span class="pval">${t.statistic.toFixed(1)} / ${t.threshold.toFixed(1)}</span></div>`;
}

const VERDICT = {table: "one table's device", model: "the model", device: "this device, wherever it was", undecided: "not yet decided"};

function finding(f) {
  const open = f.acked_at == null;
  const ackOrDone = open ? `<button class="btn small" data-floor-ack="${esc(f.alarm_id)}">Acknowledge</button>`
    : `<p class="small muted">Acknowledged by ${esc(f.acked_by)} at ${esc(timeAt(f.acked_at))}: the test started again</p>`;
  if (f.unreadable) {  // its stored text was rewritten in the database (pit/floorwatch.py)
    return `<article class="finding unreadable ${open ? "open" : "done"}">
    <h3>A pooled finding that cannot be read</h3>
    <p>Its stored text was changed in the database and is not what the pit wrote. Its record alarm
      ${esc(f.alarm_id)} stands; the pit's log names it (pit_pooled_finding_unreadable).</p>
    ${ackOrDone}
  </article>`;
  }
  const a = f.attribution, x = f.finding;
  const max = Math.max(1e-9, ...a.shares.map((s) => Math.abs(s.llr)));
  const shares = a.shares.slice(0, 12).map((s) => `<div class="share ${s.llr > 0 ? "pos" : "neg"}"><span>${esc(s.table)}</span>
    <span class="ptrack"><span class="pfill" style="width:${(100 * Math.abs(s.llr) / max).toFixed(1)}%"></span></span>
    <span>${s.llr.toFixed(1)} nats · ${s.rounds} rounds</span></div>`).join("");
  return `<article class="finding ${open ? "open" : "done"}" data-pool="${esc(f.pool)}">
    <h3>${esc(f.label)} — ${esc(x.title)}: ${esc(x.detail)}</h3>
    <p><b>Whose:</b> <span class="verdict">${esc(VERDICT[a.verdict] || a.verdict)}${a.table && a.verdict !== "model" ? ": " + esc(a.table) : ""}</span>
      · ${x.statistic.toFixed(1)} nats against ${x.threshold.toFixed(1)} in ${x.rounds} rounds since ${esc(timeAt(x.since))}</p>
    <p class="advice">${esc(f.advice)}</p>
    <div class="shares">${shares}</div>
    ${ackOrDone}
  </article>`;
}

function floorView(floor) {
  const pools = (floor && floor.pools) || [], findings = (floor && floor.findings) || [];
  const unreadable = Boolean(floor && floor.unreadable);
  $("floor-tile").hidden = pools.length === 0 && findings.length === 0 && !unreadable;
  const b = floor && floor.budget;
  $("floor-budget").textContent = unreadable
    ? "The floor's saved view was changed in the database and cannot be read: the pit writes it again with the next rounds it pools."
    : b ? `The floor's budget: ${b.false_alarms_per_year} false alarms a year over ${b.tables} tables — ` +
    `${(100 * b.pooled_share).toFixed(0)} % to these pools, the rest to the tables' own watches ` +
    `(each table's false_alarms_per_year: ${b.table_false_alarms_per_year.toPrecision(2)}).` : "";
  const seen = new Set();
  const latest = findings.filter((f) => { const k = f.alarm_id; if (seen.has(k)) return false; seen.add(k); return true; });
  $("floor-findings").innerHTML = latest.map(finding).join("");
  $("floor-ack").hidden = !latest.some((f) => f.acked_at == null);
  $("floor-pools").innerHTML = pools.map((p) => `<div class="pool" data-pool="${esc(p.pool)}">
    <h3>${esc(p.label)} <small>${p.kind === "serial" ? "one device, moved between tables" : "model and firmware"} · ${p.tables.length} table${p.tables.length === 1 ? "" : "s"} · ${p.rounds} rounds</small></h3>
    ${p.tests.slice(0, 6).map(bar).join("")}
    <p class="small muted">${p.tables.slice(0, 20).map((t) => `${esc(t.table)} ${t.rounds}`).join(" · ")}${p.tables.length > 20 ? " …" : ""}</p></div>`).join("");
}

document.addEventListener("click", async (e) => {
  const ack = e.target.closest("[data-floor-ack]");
  if (!ack) return;
  const badge = $("floor-badge").value.trim(), pin = $("floor-pin").value;
  const said = $("floor-said");
  const say = (text, ok) => { said.textContent = text; said.hidden = false; said.classList.toggle("refused", !ok); };
  if (!badge || !pin) { say("The supervisor's badge and PIN first.", false); $(badge ? "floor-pin" : "floor-badge").focus(); return; }
  // The PIN leaves its field as it is sent (as on a table's page): an answer that comes later (a
  // slow pit) never wipes a PIN typed since, and the field never holds one longer than a click.
  $("floor-pin").value = "";
  const r = await fetch("/api/record-ack", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({id: ack.dataset.floorAck, badge, pin})});
  const data = await r.json().catch(() => ({}));
  say(r.ok && data.ok ? "Acknowledged: that pool's test starts again." : (data.error || "refused"), r.ok && data.ok);
  pools();
});

async function pools() {
  const r = await fetch("/api/protection");
  if (!r.ok) return;
  const body = await r.json();
  floorView(body.floor);
  const rows = body.pools;
  $("pools-tile").hidden = rows.length === 0;
  const pct = (v) => v == null ? "—" : (100 * v).toFixed(2) + "%";
  $("pools").innerHTML = `<tr><th class="l">Pooled by</th><th class="l">Shuffler</th><th class="l">Tables</th><th>Rounds</th>
    <th>Deck faults</th><th>Rate</th><th>Protection alarms</th><th class="l">Tests that fired</th></tr>` +
    rows.map((p) => `<tr><td class="l">${esc(p.pool)}</td><td class="l">${esc(p.id)}</td><td class="l">${esc(p.tables.join(" "))}</td>
      <td>${p.rounds}</td><td>${p.deck_faults}</td><td>${pct(p.deck_fault_rate)}</td><td>${p.protection_alarms}</td>
      <td class="l">${esc(p.tests.join(", ") || "—")}</td></tr>`).join("");
}

// The shift's numbers and the pools follow the live stream, at most every 5 s.
let lastNumbers = 0, pending = null;
function soon() {
  if (pending) return;
  const wait = Math.max(0, 5000 - (Date.now() - lastNumbers));
  pending = setTimeout(() => { pending = null; lastNumbers = Date.now(); shift(); pools(); }, wait);
}

function clock() { $("clock").textContent = timeAt(pitNow()); }
clock(); setInterval(() => { clock(); ticks(); if (!$("banner").hidden) banner(); }, 1000);
$("logout").addEventListener("click", async () => {
  await fetch("/api/logout", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"});
  location.href = "/login";
});
$("compact").addEventListener("click", () => {
  localStorage.setItem("pit-compact", document.body.classList.contains("compact") ? "0" : "1");
  render();
});
for (const id of ["search", "state-filter", "area-filter"]) $(id).addEventListener("input", render);
connect();
lastNumbers = Date.now();
shift(); setInterval(shift, 60000);
pools(); setInterval(pools, 60000);
