// A table's detail: its alarms (acknowledged from here with a supervisor's badge and PIN, by a
// signed command naming the badge), the casino's copy of its record, and the recall of its rounds.
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const tableId = decodeURIComponent(location.pathname.split("/").pop());

async function post(url, body) {
  const r = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  const data = await r.json();
  if (!r.ok) alert(data.error || "refused");
  return data;
}

function render(t) {
  $("table-name").textContent = t.table_id;
  document.title = `${t.table_id} — Pit`;
  $("state").textContent = t.state.toUpperCase();
  $("dealer").textContent = `Dealer ${t.dealer_id || "—"}`;
  $("alarms").innerHTML = (t.alarms || []).map((a) => `<li><b>${esc(a.code)}</b> ${esc(a.detail)}
    <button class="btn small" data-alarm="${esc(a.alarm_id)}">Acknowledge</button></li>`).join("") || "<li>none</li>";
  const c = t.chain || {};
  $("record").innerHTML = `<dt>Messages</dt><dd>seq ${t.first_seq ?? "—"} – ${t.high_seq ?? "—"}</dd>
    <dt>Missing</dt><dd>${(t.gaps || []).filter((g) => g.filled_at == null).map((g) => "seq " + g.seq).join(", ") || "none"}${(t.gaps || []).some((g) => g.filled_at != null) ? ` · filled later: ${(t.gaps || []).filter((g) => g.filled_at != null).length}` : ""}</dd><dt>Chain head</dt><dd>row ${c.event_id ?? "—"} at ${esc(c.made_at || "—")}</dd>
    <dt>Checkpoints</dt><dd>${(t.checkpoints || []).length} kept (newest 20 shown) · ${(t.checkpoints || []).filter((k) => k.signature === "valid").length} valid</dd>`;
  $("record-alarms").innerHTML = (t.record_alarms || []).map((a) => `<li><b>${esc(a.kind)}</b> ${esc(a.detail)}
    <button class="btn small" data-record="${esc(a.id)}">Acknowledge</button></li>`).join("");
  $("rounds").innerHTML = `<tr><th>Round</th><th class="l">Status</th><th class="l">Reasons</th><th class="l">Dealer</th><th>Seats</th><th class="l">Closed</th></tr>` +
    (t.rounds || []).map((r) => `<tr class="clickable" data-round="${esc(r.round_id)}"><td>#${r.round_seq}</td><td class="l">${esc(r.status)}</td>
      <td class="l">${esc(r.reasons)}</td><td class="l">${esc(r.dealer_id || "—")}</td><td>${r.seats}</td><td class="l">${esc(r.closed_at.slice(11, 19))}</td></tr>`).join("");
}

async function load() {
  const r = await fetch(`/api/table/${encodeURIComponent(tableId)}`);
  if (r.ok) render(await r.json());
}

document.addEventListener("click", async (e) => {
  const badge = $("badge").value.trim(), pin = $("pin").value;
  const alarm = e.target.closest("[data-alarm]");
  const record = e.target.closest("[data-record]");
  const round = e.target.closest("[data-round]");
  if ((alarm || record) && (!badge || !pin)) { alert("The supervisor's badge and PIN first"); return; }
  if (alarm) {
    await post("/api/acknowledge", {table_id: tableId, alarm_id: alarm.dataset.alarm, badge, pin});
    $("pin").value = "";
  } else if (record) {
    await post("/api/record-ack", {id: record.dataset.record, badge, pin});
    $("pin").value = "";
    load();
  } else if (round) {
    const r = await fetch(`/api/round/${encodeURIComponent(round.dataset.round)}`);
    $("round").hidden = false;
    $("round").textContent = JSON.stringify(await r.json(), null, 1);
  }
});

const es = new EventSource("/api/events");
es.addEventListener("open", () => { $("link").className = "link up"; load(); });
es.addEventListener("error", () => { $("link").className = "link down"; });
es.addEventListener("tiles", (e) => {
  if (JSON.parse(e.data).tiles.some((t) => t.table_id === tableId)) load();
});
load();
