// The pit page: a tile per table, kept live over server-sent events (the whole floor on every
// (re)connect, then the tiles that changed); the shift's numbers below.
const tiles = new Map();
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
window.pitReceived = [];  // what the live stream delivered (tests, latency)

function lastRound(r) {
  if (!r) return "no round yet";
  if (r.status !== "settled") return `#${r.round_seq} ${r.status.toUpperCase()} ${esc(r.reasons.join(", "))}`;
  const hand = r.two_jacks ? "dealer two Jacks" : `${esc((r.front || []).join(" "))} | ${esc((r.back || []).join(" "))}`;
  return `#${r.round_seq} settled · ${hand}`;
}

function tileHtml(t) {
  const alarms = (t.alarms_total || 0);
  const record = (t.record_alarms || []).length;
  const badges = [];
  if (alarms) badges.push(`<span class="badge crit">${alarms} alarm${alarms > 1 ? "s" : ""} to acknowledge</span>`);
  if (record) badges.push(`<span class="badge crit">record: ${esc(t.record_alarms.map((a) => a.kind).join(", "))}</span>`);
  if (t.open_gaps) badges.push(`<span class="badge warn">${t.open_gaps} missing</span>`);
  if (t.rejected_last_hour) badges.push(`<span class="badge warn">${t.rejected_last_hour} rejected (1 h)</span>`);
  if (t.protection) badges.push(`<span class="badge warn">protection: ${esc(t.protection.test)}</span>`);
  else badges.push(`<span class="badge ok">protection ok</span>`);
  const cls = ["tile", "table-tile", t.state, alarms || record ? "alarm" : ""].join(" ");
  return `<a class="${cls}" href="/table/${encodeURIComponent(t.table_id)}" data-table="${esc(t.table_id)}">
    <div class="tt-head"><span class="tt-id">${esc(t.table_id)}</span><span class="state ${esc(t.state)}">${esc(t.state).toUpperCase()}</span></div>
    <div class="tt-row"><span>Dealer <b>${esc(t.dealer_id || "—")}</b></span><span>Rounds/h <b>${t.rounds_last_hour}</b></span></div>
    <div class="tt-row"><span>${t.round_in_progress ? "<b>round in progress</b>" : "between rounds"}</span><span>seq <b>${t.high_seq ?? "—"}</b></span></div>
    <div class="tt-last">${lastRound(t.last_round)}</div>
    <div class="tt-heard">last heard <span class="heard" data-heard="${t.last_heard ?? ""}">${heard(t.last_heard)}</span></div>
    <div class="tt-badges">${badges.join("")}</div></a>`;
}

// "last heard N s ago" by the pit's clock (its arrival times), not the browser's.
let skew = 0;
function heard(at) {
  if (at == null || at === "") return "never";
  const ago = Math.max(0, Math.round((Date.now() + skew) / 1000 - Number(at)));
  return ago < 120 ? `${ago} s ago` : ago < 7200 ? `${Math.round(ago / 60)} min ago` : `${Math.round(ago / 3600)} h ago`;
}
function ticks() { for (const el of document.querySelectorAll("[data-heard]")) el.textContent = heard(el.dataset.heard); }

function render() {
  const list = [...tiles.values()].sort((a, b) => a.table_id.localeCompare(b.table_id));
  $("tiles").innerHTML = list.map(tileHtml).join("");
  const by = (s) => list.filter((t) => t.state === s).length;
  const alarms = list.reduce((n, t) => n + (t.alarms_total || 0) + (t.record_alarms || []).length, 0);
  const rejected = list.reduce((n, t) => n + (t.rejected_last_hour || 0), 0);
  $("summary").textContent = `${list.length} tables · ${by("online")} open · ${by("closed")} closed · ${by("fault")} fault · ${by("offline")} offline · ${by("silent")} silent · ${alarms} alarms · ${rejected} rejected (1 h)`;
}

function connect() {
  const es = new EventSource("/api/events");
  es.addEventListener("open", () => { $("link").className = "link up"; });
  es.addEventListener("error", () => { $("link").className = "link down"; });
  es.addEventListener("floor", (e) => {
    const data = JSON.parse(e.data);
    skew = data.at * 1000 - Date.now();
    $("site").textContent = data.site;
    tiles.clear();
    for (const t of data.tiles) tiles.set(t.table_id, t);
    window.pitReceived.push({kind: "floor", at: Date.now(), tables: data.tiles.length});
    render();
  });
  es.addEventListener("tiles", (e) => {
    const data = JSON.parse(e.data);
    skew = data.at * 1000 - Date.now();
    for (const t of data.tiles) tiles.set(t.table_id, t);
    window.pitReceived.push({kind: "tiles", at: Date.now(), sent: data.sent});
    render();
    soon();
  });
}

async function shift() {
  const r = await fetch("/api/shift");
  if (!r.ok) return;
  const data = await r.json();
  $("shift-name").textContent = data.shift || "none yet";
  $("csv").href = "/api/shift.csv?shift=" + encodeURIComponent(data.shift || "");
  const rows = data.rows;
  const max = Math.max(1, ...rows.map((r) => r.rounds));
  $("shift-chart").innerHTML = rows.map((r) => `<div class="bar" title="${esc(r.table_id)} ${esc(r.dealer_id)}: ${r.rounds} rounds">
    <i style="height:${Math.round(90 * r.rounds / max)}px"></i><span>${esc(r.table_id)}</span></div>`).join("");
  const cols = [["table_id", "Table"], ["dealer_id", "Dealer"], ["rounds", "Rounds"], ["seats_played", "Seats"],
    ["dead", "Dead"], ["misdeal", "Misdeal"], ["void", "Void"], ["players_win", "Win"], ["players_push", "Push"],
    ["players_lose", "Lose"], ["side_wagered", "Side staked"], ["hold", "Hold"], ["theoretical_hold", "Theor."], ["rounds_per_hour", "Rounds/h"]];
  const pct = (v) => v == null ? "—" : (100 * v).toFixed(2) + "%";
  $("shift-table").innerHTML = `<tr>${cols.map(([, h], i) => `<th class="${i < 2 ? "l" : ""}">${h}</th>`).join("")}</tr>` +
    rows.map((r) => `<tr>${cols.map(([k], i) => `<td class="${i < 2 ? "l" : ""}">${k.includes("hold") ? pct(r[k]) : esc(r[k])}</td>`).join("")}</tr>`).join("");
}

async function pools() {
  const r = await fetch("/api/protection");
  if (!r.ok) return;
  const rows = (await r.json()).pools;
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

function clock() { $("clock").textContent = new Date().toISOString().slice(11, 19) + " UTC"; }
clock(); setInterval(() => { clock(); ticks(); }, 1000);
$("logout").addEventListener("click", async () => {
  await fetch("/api/logout", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"});
  location.href = "/login";
});
connect();
lastNumbers = Date.now();
shift(); setInterval(shift, 60000);
pools(); setInterval(pools, 60000);
