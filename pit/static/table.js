// A table's detail: its alarms (acknowledged from here with a supervisor's badge and PIN, by a
// signed command naming the badge), the casino's copy of its record, and the recall of its rounds.
// A round opens as the table's recall shows it: the dealer's cards and setting, each seat.
// Every time in the pit's zone, named.
import {$, esc, setZone, pitClock, pitNow, timeAt, dateTimeAt} from "/static/pitcommon.js";
import {el, fill, cardRow, cap, lineName, pays} from "/static/common.js";
const tableId = decodeURIComponent(location.pathname.split("/").pop());

// What the pit answers a supervisor is said in place, beside the badge and PIN (as the dealer
// page says it in its own dialog), never in a browser alert that blocks the page.
function say(text, ok) {
  const p = $("ack-said");
  p.textContent = text;
  p.className = ok === null ? "said" : ok ? "said ok" : "said refused";
  p.hidden = !text;
}

async function post(url, body) {
  const r = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  const data = await r.json().catch(() => ({}));
  say(r.ok ? "Acknowledged." : (data.error || "refused"), r.ok);
  return data;
}

function render(t) {
  setZone(t.timezone);
  pitClock(t.at);
  $("table-name").textContent = t.table_id;
  document.title = `${t.table_id} — Pit`;
  $("state").textContent = t.state.toUpperCase();
  $("dealer").textContent = `Dealer ${t.dealer_id || "—"}`;
  $("alarms").innerHTML = (t.alarms || []).map((a) => `<li><b>${esc(a.code)}</b> ${esc(a.detail)}
    <button class="btn small" data-alarm="${esc(a.alarm_id)}">Acknowledge</button></li>`).join("") || "<li>none</li>";
  const c = t.chain || {};
  $("record").innerHTML = `<dt>Messages</dt><dd>seq ${t.first_seq ?? "—"} – ${t.high_seq ?? "—"}</dd>
    <dt>Missing</dt><dd>${t.awaiting_key ? `${t.awaiting_key} message${t.awaiting_key > 1 ? "s" : ""} wait for the table's key to be registered; ` : ""}${(t.gaps || []).filter((g) => g.filled_at == null).map((g) => "seq " + g.seq).join(", ") || (t.awaiting_key ? "none else" : "none")}${(t.gaps || []).some((g) => g.filled_at != null) ? ` · filled later: ${(t.gaps || []).filter((g) => g.filled_at != null).length}` : ""}</dd><dt>Chain head</dt><dd>row ${c.event_id ?? "—"} at ${esc(dateTimeAt(c.made_at))}</dd>
    <dt>Checkpoints</dt><dd>${(t.checkpoints || []).length} kept (newest 20 shown) · ${(t.checkpoints || []).filter((k) => k.signature === "valid").length} valid</dd>`;
  $("record-alarms").innerHTML = (t.record_alarms || []).map((a) => `<li><b>${esc(a.kind)}</b> ${esc(a.detail)}
    <button class="btn small" data-record="${esc(a.id)}">Acknowledge</button></li>`).join("");
  $("rounds").innerHTML = `<tr><th>Round</th><th class="l">Status</th><th class="l">Reasons</th><th class="l">Dealer</th><th>Seats</th><th class="l">Closed</th></tr>` +
    (t.rounds || []).map((r) => `<tr class="clickable" data-round="${esc(r.round_id)}"><td>#${r.round_seq}</td><td class="l">${esc(r.status)}</td>
      <td class="l">${esc(r.reasons)}</td><td class="l">${esc(r.dealer_id || "—")}</td><td>${r.seats}</td><td class="l">${esc(timeAt(r.closed_at))}</td></tr>`).join("");
}

// One read at a time, and one more after it when a change was heard meanwhile: two reads in
// flight could answer out of order and leave the older one on the page.
let loading = false, again = false;
async function load() {
  if (loading) { again = true; return; }
  loading = true;
  try {
    do {
      again = false;
      const r = await fetch(`/api/table/${encodeURIComponent(tableId)}`);
      if (r.ok) render(await r.json());
    } while (again);
  } finally {
    loading = false;
  }
}

document.addEventListener("click", async (e) => {
  const badge = $("badge").value.trim(), pin = $("pin").value;
  const alarm = e.target.closest("[data-alarm]");
  const record = e.target.closest("[data-record]");
  const round = e.target.closest("[data-round]");
  if ((alarm || record) && (!badge || !pin)) { say("The supervisor's badge and PIN first.", false); $(badge ? "pin" : "badge").focus(); return; }
  if (alarm || record) {
    // The PIN leaves its field as it is sent: an answer that comes later (a slow pit) never
    // wipes a PIN typed since, and the field never holds one longer than a click.
    $("pin").value = "";
    say("Sending…", null);
  }
  if (alarm) {
    await post("/api/acknowledge", {table_id: tableId, alarm_id: alarm.dataset.alarm, badge, pin});
  } else if (record) {
    await post("/api/record-ack", {id: record.dataset.record, badge, pin});
    load();
  } else if (round) {
    const r = await fetch(`/api/round/${encodeURIComponent(round.dataset.round)}`);
    $("round").hidden = false;
    showRound(r.ok ? await r.json() : null);
    $("round").scrollIntoView({block: "nearest"});
  }
});

function side(s) {
  if (!s) return el("td", {text: "—"});
  const cls = s.pays > 0 ? "win" : s.pays === 0 ? "push" : "lose";
  return el("td", {class: cls, text: s.pays > 0 ? `${lineName(s.line)} · ${pays(s.pays)}` : pays(s.pays)});
}

function showRound(message) {
  const p = message && (message.payload || message);
  if (!p || !p.round_id) { fill($("round"), el("p", {text: "This round cannot be read."})); return; }
  const parts = [el("h3", {text: `Round #${p.round_seq} · ${p.status.toUpperCase()} · dealer ${p.dealer_id || "—"}`}),
    el("p", {class: "small", text: `opened ${dateTimeAt(p.opened_at)} · closed ${dateTimeAt(p.closed_at)} · ${p.round_id}`})];
  if ((p.reasons || []).length) parts.push(el("ul", {}, p.reasons.map((x) => el("li", {text: `${cap(lineName(x.code))}${x.detail ? " — " + x.detail : ""}`}))));
  const d = p.dealer;
  if (d) {
    parts.push(el("div", {class: "d-row"}, el("b", {text: "Dealer"}), cardRow(d.cards, "sm"), el("span", {text: cap(d.best_hand)})));
    if (d.two_jacks) parts.push(el("p", {text: "Two Jacks: no setting; every Pai Gow wager loses"}));
    if (d.setting) parts.push(el("div", {class: "d-row"}, el("small", {text: "FRONT"}), cardRow(d.setting.front, "sm"),
      el("span", {text: cap(d.setting.front_hand)}), el("small", {text: "BACK"}), cardRow(d.setting.back, "sm"), el("span", {text: cap(d.setting.back_hand)})));
  }
  if ((p.seats || []).length) {
    parts.push(el("div", {class: "scroll"}, el("table", {class: "seats-table"},
      el("thead", {}, el("tr", {}, ["Seat", "Pos", "Cards", "Best hand", "Chan Chu", "Jacks Beat", "Ace High"].map((h) => el("th", {text: h})))),
      el("tbody", {}, p.seats.map((s) => el("tr", {}, el("td", {text: s.seat}), el("td", {text: String(s.position)}),
        el("td", {}, cardRow(s.cards, "sm")), el("td", {text: cap(s.best_hand)}), side(s.chan_chu), side(s.jacks_beat), side(s.push_ace_high)))))));
  } else if ((p.positions || []).length) {
    parts.push(el("ul", {}, p.positions.map((x) => el("li", {}, el("b", {text: `${x.seat} `}), cardRow(x.cards, "sm")))));
  }
  fill($("round"), parts);
}

setInterval(() => { $("clock").textContent = timeAt(pitNow()); }, 1000);

const es = new EventSource("/api/events");
es.addEventListener("open", () => { $("link").className = "link up"; load(); });
es.addEventListener("error", () => { $("link").className = "link down"; });
es.addEventListener("tiles", (e) => {
  if (JSON.parse(e.data).tiles.some((t) => t.table_id === tableId)) load();
});
load();
