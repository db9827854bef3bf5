// The floor supervisor's view: table status, devices, alarms, charts drawn as inline SVG from the
// JSON endpoints, and the round history with every journaled detail of a round. It changes
// nothing at the table except one thing: a latched alarm acknowledged with a supervisor's PIN
// (on the table computer, or remotely with remote_dealer_input), which the header says.

import {
  $, api, cap, cardFace, cardRow, clock, dateTimeText, el, fill, lineName, live, pays, positionText, renderFault, svg,
  timeText, wordsIn,
} from "./common.js";

const S = {
  table: { seats: [] }, status: {}, devices: {}, round: null, alarms: [], query: "", offset: 0, limit: 25, selected: null, controls: {},
  showAllLatched: false,
};
// Latched alarms come in bursts (a flooding device raises one a minute): identical ones (same code
// and device) are one entry with one acknowledgement, and at most this many entries are listed.
const LATCHED_SHOWN = 4;
const SEVERITY = { critical: 2, warning: 1, info: 0 };
const OUTCOMES = { win: "wins", push: "push", lose: "loses" };
const STATUS_COLOURS = { settled: "#2fbf71", dead: "#d7263d", misdeal: "#f08a24", void: "#8a969c", open: "#4ea8de" };
const SIDE_NAMES = { chan_chu: "Chan Chu", jacks_beat: "Jacks Beat", push_ace_high: "Ace High" };
const seatOf = (position) => (S.table.seats.find((s) => s.position === position) || {}).seat || String(position);
const pct = (x, digits = 2) => (x === null || x === undefined ? "—" : `${(x * 100).toFixed(digits)}%`);

// --- status tiles --------------------------------------------------------------------------------

function renderHeader() {
  renderFault($("#fault"), S.status);
  $("#table-name").textContent = `${S.table.name || S.table.id}  ·  ${S.table.id || ""}`;
  document.title = `Supervisor — ${S.table.name || S.table.id}`;
  const open = S.status.table_open !== false;
  const node = $("#table-open");
  node.textContent = open ? "TABLE OPEN" : "TABLE CLOSED";
  node.dataset.state = open ? "open" : "closed";
  const r = S.round;
  $("#current-round").textContent = r ? `Round ${r.round_seq} · ${r.phase.replace("_", " ")}` : "No round yet";
}

/** Can this page acknowledge a latched alarm? Its client may act (the table computer, or remote
 *  dealer input), and a supervisor's credential is configured (a supervisors file, or the PIN). */
function canAcknowledge() {
  return !!(S.controls.dealer_input && S.controls.void_enabled);
}

function renderMode() {
  const badges = S.controls.supervisor === "badge";
  $("#mode").textContent = !canAcknowledge() ? "PIT SUPERVISOR · READ ONLY"
    : `PIT SUPERVISOR · ACKNOWLEDGE ALARMS WITH ${badges ? "BADGE AND PIN" : "THE PIN"}`;
}

/** The latched alarms by code and device, each group's alarms newest first; groups by severity,
 *  then in the order they first appeared (a new alarm of a group does not move it). */
function latchedGroups() {
  const groups = new Map();
  for (const a of S.status.alarms_unacknowledged || []) {
    const key = `${a.code}|${a.device || ""}`;
    if (!groups.has(key)) groups.set(key, { key, code: a.code, device: a.device || "", alarms: [] });
    groups.get(key).alarms.push(a);
  }
  const at = (a) => String(a.raised_at || "");
  const out = [...groups.values()];
  for (const g of out) {
    g.alarms.sort((x, y) => at(y).localeCompare(at(x)));
    g.severity = g.alarms.reduce((s, a) => (SEVERITY[a.severity] > SEVERITY[s] ? a.severity : s), "info");
    g.first = at(g.alarms[g.alarms.length - 1]);
  }
  return out.sort((x, y) => SEVERITY[y.severity] - SEVERITY[x.severity] || x.first.localeCompare(y.first));
}

/** One acknowledgement for a group: the server takes one alarm id a request, so one request per
 *  alarm, in turn, stopping at the first refusal (a wrong PIN is tried once, not once an alarm). */
async function acknowledgeGroup(key, who, pin, note) {
  const group = latchedGroups().find((g) => g.key === key);
  const ids = group ? group.alarms.map((a) => a.alarm_id) : [];
  const badges = S.controls.supervisor === "badge";
  let done = 0;
  for (const id of ids) {
    note.textContent = ids.length > 1 ? `acknowledging ${done + 1} of ${ids.length}…` : "…";
    const answer = await api("/api/alarms/acknowledge", { method: "POST", body: { alarm_id: id, pin, ...(badges ? { badge: who } : { by: who }) } });
    if (!answer.ok) {
      const why = answer.error || "refused";
      note.textContent = done ? `${done} of ${ids.length} acknowledged, then: ${why}` : why;
      return;
    }
    done += 1;
  }
  note.textContent = ids.length > 1 ? `all ${done} acknowledged` : "acknowledged";
}

function latchedForm(key) {
  const badges = S.controls.supervisor === "badge";
  const note = el("span", { class: "ack-note", role: "status" });
  const by = el("input", {
    class: "ack-by", type: "text", maxlength: badges ? "32" : "64", autocomplete: "off", spellcheck: "false",
    placeholder: badges ? "supervisor badge" : "your name", "aria-label": badges ? "supervisor badge" : "acknowledged by",
  });
  const pin = el("input", { class: "ack-pin", type: "password", inputmode: "numeric", placeholder: "PIN", maxlength: "16", "aria-label": "supervisor PIN" });
  const form = el("form", { class: "ack-form" }, by, pin, el("button", { class: "btn ack-button", type: "submit", text: "Acknowledge" }), note);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const secret = pin.value;
    pin.value = "";
    await acknowledgeGroup(key, by.value.trim(), secret, note);
  });
  return form;
}

function renderLatched() {
  const latched = S.status.alarms_unacknowledged || [];
  // The status lists at most the oldest 50 (controller/table/machine.py STATUS_ALARMS).
  const total = Math.max(S.status.alarms_unacknowledged_total || 0, latched.length);
  $("#latched").hidden = total === 0;
  $("#latched-count").textContent = String(total);
  const dealer = S.status.dealer_id;
  $("#dealer").textContent = dealer ? `Dealer ${dealer}` : "No dealer signed in";
  renderMode();
  // With a supervisors file the acknowledgement is by badge and PIN and names the badge; without
  // one, the shared void PIN and a name typed beside it (which nobody checks).
  const badges = S.controls.supervisor === "badge";
  const ack = canAcknowledge();
  $("#latched-how").textContent = !ack
    ? (S.controls.dealer_input
      ? `They cannot be acknowledged from this page: ${wordsIn(S.controls.void_problem || "no supervisor PIN is configured").replace(/\.$/, "")}.`
      : "This page is read only: acknowledge them on the table computer's supervisor page, or the casino's system by a signed command.")
    : badges
      ? "A supervisor acknowledges them with badge and PIN (recorded under the badge), or the casino's system by a signed command. One entry stands for identical alarms and acknowledges each."
      : "A named person acknowledges them with the supervisor's PIN (the name recorded as typed), or the casino's system by a signed command. One entry stands for identical alarms and acknowledges each.";

  const groups = latchedGroups();
  const shown = S.showAllLatched ? groups : groups.slice(0, LATCHED_SHOWN);
  // Entries are kept, not rebuilt, as alarms arrive: what a supervisor is typing stays.
  const list = $("#latched-list");
  const keep = new Set(shown.map((g) => `${g.key}|${ack}`));
  for (const li of [...list.children]) if (!keep.has(`${li.dataset.group}|${li.dataset.ack}`)) li.remove();
  const existing = new Map([...list.children].map((li) => [li.dataset.group, li]));
  let previous = null;
  for (const g of shown) {
    let li = existing.get(g.key);
    if (!li) {
      li = el("li", { class: "latched-alarm", dataset: { group: g.key, ack: String(ack) } },
        el("div", { class: "latched-head" }), ack ? latchedForm(g.key) : null);
      if (previous) previous.after(li); else list.prepend(li);
    }
    previous = li;
    const newest = g.alarms[0];
    const n = g.alarms.length;
    li.className = ["alarm", "latched-alarm", g.severity].join(" ");
    li.dataset.alarm = newest.alarm_id;
    li.dataset.count = String(n);
    fill(li.querySelector(".latched-head"),
      el("span", { class: "sev", text: g.severity.toUpperCase() }),
      el("b", { class: "code", text: cap(lineName(g.code)) + (g.device ? ` · ${g.device}` : "") }),
      n > 1 ? el("span", { class: "times", text: `× ${n}` }) : null,
      el("span", { class: "when", text: n > 1 && timeText(g.alarms[n - 1].raised_at) !== timeText(newest.raised_at)
        ? `${dateTimeText(g.alarms[n - 1].raised_at)} – ${timeText(newest.raised_at)}`
        : dateTimeText(newest.raised_at) }),
      el("span", { class: "info", text: wordsIn(newest.detail) + (n > 1 ? ` (the newest of ${n})` : "") }));
    const button = li.querySelector(".ack-button");
    if (button) button.textContent = n > 1 ? `Acknowledge all ${n}` : "Acknowledge";
  }
  const hidden = groups.length - shown.length;
  const more = $("#latched-more");
  // Beyond the status's list (the oldest 50): they come into it as these are acknowledged.
  const unlisted = Math.max(0, (S.status.alarms_unacknowledged_total || 0) - latched.length);
  more.hidden = groups.length <= LATCHED_SHOWN && unlisted === 0;
  const rest = groups.slice(LATCHED_SHOWN).reduce((sum, g) => sum + g.alarms.length, 0) + unlisted;
  fill(more, hidden > 0 || unlisted > 0 ? el("span", { class: "more-count", text: `+${rest} more${hidden > 0 ? ` (${hidden} kind${hidden === 1 ? "" : "s"})` : ""} not listed` }) : null,
    el("button", { class: "linkish", type: "button", text: S.showAllLatched ? "list fewer" : "list them all",
      onclick: () => { S.showAllLatched = !S.showAllLatched; renderLatched(); } }));
}

function renderDevices() {
  const entries = Object.entries(S.devices).sort();
  fill($("#devices"), entries.length ? entries.map(([name, d]) => el("li", { class: ["device", d.online ? "up" : "down"] },
    el("span", { class: "dot", "aria-hidden": "true" }),
    el("b", { text: name }),
    el("span", { class: "state", text: d.online ? "online" : "OFFLINE" }),
    el("span", { class: "info", text: wordsIn(d.detail), title: wordsIn(d.detail) }),
    el("span", { class: "when", text: d.at ? timeText(d.at) : "" }))) : el("li", { class: "none", text: "No device has reported yet" }));
}

function renderAlarms() {
  $("#alarm-count").textContent = S.alarms.length ? String(S.alarms.length) : "";
  fill($("#alarms"), S.alarms.length ? S.alarms.map((a) => el("li", { class: ["alarm", a.severity] },
    el("span", { class: "sev", text: a.severity.toUpperCase() }),
    el("span", { class: "when", text: timeText(a.at) }),
    el("b", { class: "code", text: cap(lineName(a.code)) }),
    el("span", { class: "info", text: wordsIn(a.detail) }),
    a.round_id ? el("button", { class: "linkish", type: "button", text: "round", onclick: () => showRound(a.round_id) }) : null)) : el("li", { class: "none", text: "No alarms since the controller started" }));
}

async function loadOverview() {
  const reply = await api("/api/overview");
  if (!reply.ok) return;
  const j = reply.journal;
  const by = Object.entries(j.by_status || {}).map(([k, v]) => `${v} ${k}`).join(" · ") || "none";
  fill($("#journal"),
    el("dt", { text: "Rounds" }), el("dd", { text: `${j.rounds}  (${by})` }),
    el("dt", { text: "Last round" }), el("dd", { text: j.last_round_at ? dateTimeText(j.last_round_at) : "—" }),
    el("dt", { text: "Unsent messages" }), el("dd", { class: j.outbox_pending > 50 ? "warn" : "", text: `${j.outbox_pending}${j.oldest_pending_at ? `, oldest ${timeText(j.oldest_pending_at)}` : ""}` }),
    el("dt", { text: "Events journaled" }), el("dd", { text: String(j.events) }),
    el("dt", { text: "Paytables" }), el("dd", { text: `Chan Chu ${S.table.paytables?.chan_chu ?? "?"}${S.table.paytables?.envy ? " + envy" : ""} · Jacks Beat ${S.table.paytables?.jacks_beat ?? "?"}` }));
}

// --- charts (inline SVG) -------------------------------------------------------------------------

function chartFrame(w, h) {
  return svg("svg", { viewBox: `0 0 ${w} ${h}`, class: "chart-svg", role: "img" });
}

async function loadHourly() {
  const reply = await api("/api/charts/rounds-per-hour?hours=24");
  if (!reply.ok) return;
  const hours = reply.hours;
  const W = 560, H = 230, L = 40, B = 30, T = 12;
  const max = Math.max(4, ...hours.map((h) => h.total));
  const bw = (W - L - 8) / hours.length;
  const chart = chartFrame(W, H);
  chart.setAttribute("aria-label", "rounds per hour");
  const y = (v) => T + (H - B - T) * (1 - v / max);
  for (const tick of [0, Math.round(max / 2), max]) {
    chart.append(svg("line", { x1: L, x2: W, y1: y(tick), y2: y(tick), class: "grid" }),
      svg("text", { x: L - 6, y: y(tick) + 5, class: "axis", "text-anchor": "end" }, String(tick)));
  }
  hours.forEach((h, i) => {
    let base = 0;
    for (const status of ["settled", "dead", "misdeal", "void", "open"]) {
      const n = (h.by_status || {})[status] || 0;
      if (!n) continue;
      chart.append(svg("rect", { x: L + i * bw + 2, width: Math.max(1, bw - 4), y: y(base + n), height: y(base) - y(base + n), fill: STATUS_COLOURS[status] },
        svg("title", {}, `${h.hour}: ${n} ${status}`)));
      base += n;
    }
    if (i % 3 === 0) chart.append(svg("text", { x: L + i * bw + bw / 2, y: H - 8, class: "axis", "text-anchor": "middle" }, h.hour.slice(11, 13)));
  });
  const legend = el("div", { class: "legend" }, ["settled", "dead", "misdeal", "void"].map((s) =>
    el("span", { class: "key" }, el("i", { class: `sw-${s}` }), s)));
  const total = hours.reduce((a, h) => a + h.total, 0);
  fill($("#chart-hourly"), el("div", { class: "headline small", text: `${total} rounds in 24 h · this hour ${hours[hours.length - 1].total}` }), chart, legend);
}

async function loadJacks() {
  const reply = await api("/api/charts/two-jacks?rounds=2000");
  if (!reply.ok) return;
  const { rounds, two_jacks: hits, rate, expected, interval95, series } = reply;
  const headline = $("#jacks-headline");
  fill(headline, rounds
    ? [el("b", { text: pct(rate) }), ` · ${hits} of ${rounds} settled rounds · expected ${pct(expected)} · 95% interval ${pct(interval95[0], 1)}–${pct(interval95[1], 1)}`]
    : "No settled rounds yet");
  const outside = rounds >= 30 && (expected < interval95[0] || expected > interval95[1]);
  headline.dataset.alert = outside ? "yes" : "no";
  if (outside) headline.append(el("div", { class: "flag", text: "Outside the 95% interval: review the deck and the shuffler" }));
  const W = 560, H = 200, L = 44, B = 28, T = 10;
  const top = Math.max(0.2, ...series.map((p) => p.rate)) * 1.05;
  const n = Math.max(1, rounds);
  const x = (r) => L + (W - L - 10) * (r / n);
  const y = (v) => T + (H - B - T) * (1 - v / top);
  const chart = chartFrame(W, H);
  chart.setAttribute("aria-label", "dealer two-Jack rate");
  const step = top > 0.5 ? 0.25 : 0.1;
  for (let tick = 0; tick <= top + 1e-9; tick += step) {
    chart.append(svg("line", { x1: L, x2: W, y1: y(tick), y2: y(tick), class: "grid" }),
      svg("text", { x: L - 6, y: y(tick) + 5, class: "axis", "text-anchor": "end" }, `${Math.round(tick * 100)}%`));
  }
  chart.append(svg("line", { x1: L, x2: W - 10, y1: y(expected), y2: y(expected), class: "expected" }),
    svg("text", { x: W - 12, y: y(expected) - 6, class: "axis gold", "text-anchor": "end" }, `expected ${pct(expected)}`));
  if (series.length) {
    const points = [`${x(0)},${y(series[0].rate)}`, ...series.map((p) => `${x(p.rounds)},${y(p.rate)}`)].join(" ");
    chart.append(svg("polyline", { points, class: "rate" }));
  }
  chart.append(svg("text", { x: W - 10, y: H - 6, class: "axis", "text-anchor": "end" }, `${rounds} rounds`));
  fill($("#chart-jacks"), chart);
}

// --- game protection ---------------------------------------------------------------------------

async function loadProtection() {
  const data = await api("/api/protection");
  if (!data.ok) return;
  $("#protection").hidden = !data.enabled;
  if (!data.enabled) return;
  S.protection = data;
  const fa = data.config.false_alarms_per_year;
  $("#protection-summary").textContent = `${data.rounds} rounds watched · exact distributions · at most ${fa} false alarm${fa === 1 ? "" : "s"} a year`;
  const tests = data.tests;
  if (!tests.some((t) => t.name === S.protectionTest)) S.protectionTest = (tests.find((t) => t.alarmed_since) || tests[0]).name;
  fill($("#protection-tests"), ...tests.map((t) => {
    const bar = el("i");
    bar.style.width = `${Math.min(100, (100 * t.statistic) / t.threshold).toFixed(1)}%`; // CSSOM, not an inline style attribute (CSP)
    return el("li", {
      class: ["ptest", t.alarmed_since ? "alarmed" : "ok", t.name === S.protectionTest && "chosen"], "data-test": t.name, tabindex: "0",
      onclick: () => { S.protectionTest = t.name; loadProtection(); },
    },
    el("span", { class: "pstate", text: t.alarmed_since ? "ALARM" : "OK" }),
    el("span", { class: "pname", text: t.title }),
    el("span", { class: "pbar", title: `statistic ${t.statistic.toFixed(1)} of ${t.threshold.toFixed(1)}` }, bar),
    el("span", { class: "prounds", text: `${t.rounds} rounds` }));
  }));
  renderProtectionDetail(tests.find((t) => t.name === S.protectionTest));
}

function renderProtectionDetail(t) {
  const W = 560, H = 200, L = 44, B = 26, T = 10;
  // The chart's points every few rounds, from the start, up to the test's value now.
  const history = [[0, 0], ...t.history.filter((p) => p[0] > 0)];
  if (history[history.length - 1][0] !== t.rounds) history.push([t.rounds, t.statistic]);
  const top = Math.max(t.threshold, ...history.map((p) => p[1])) * 1.1;
  const last = Math.max(1, history[history.length - 1][0]);
  const x = (r) => L + (W - L - 10) * (r / last);
  const y = (v) => T + (H - B - T) * (1 - v / top);
  const chart = chartFrame(W, H);
  chart.setAttribute("aria-label", `${t.title}: the statistic against its threshold`);
  chart.append(svg("line", { x1: L, x2: W - 10, y1: y(0), y2: y(0), class: "grid" }),
    svg("line", { x1: L, x2: W - 10, y1: y(t.threshold), y2: y(t.threshold), class: "threshold" }),
    svg("text", { x: W - 12, y: y(t.threshold) - 6, class: "axis red", "text-anchor": "end" }, `alarm at ${t.threshold.toFixed(1)}`));
  chart.append(svg("polyline", { points: history.map((p) => `${x(p[0])},${y(p[1])}`).join(" "), class: "statistic" }));
  chart.append(svg("text", { x: W - 10, y: H - 6, class: "axis", "text-anchor": "end" }, `${last} rounds`));
  // Observed against exact: the cells furthest from their expectation first.
  const cells = [...t.cells].sort((a, b) => Math.abs(b.observed - b.expected) / Math.sqrt(b.expected + 1) - Math.abs(a.observed - a.expected) / Math.sqrt(a.expected + 1)).slice(0, 8);
  const most = Math.max(1, ...cells.flatMap((c) => [c.observed, c.expected]));
  const rows = cells.map((c) => {
    const seen = el("i", { class: "seen" });
    seen.style.width = `${(100 * c.observed) / most}%`;
    const exact = el("i", { class: "exact" });
    exact.style.left = `${(100 * c.expected) / most}%`;
    return el("li", { class: "cell" }, el("span", { class: "clabel", text: c.label }),
      el("span", { class: "cbar" }, seen, exact),
      el("span", { class: "cnum", text: `${Number.isInteger(c.observed) ? c.observed : c.observed.toFixed(1)} / ${c.expected.toFixed(1)}` }));
  });
  fill($("#protection-detail"),
    el("h3", { text: t.title }),
    el("p", { class: "watches", text: t.watches }),
    t.alarmed_since ? el("p", { class: "flag", text: `ALARM since ${dateTimeText(t.alarmed_since)}: ${t.worst}. ${t.advice}` }) : el("p", { class: "muted", text: t.worst ? `Closest to its threshold: ${t.worst}` : "Nothing unusual" }),
    // Which reference and which alternative the leading CUSUM weighs, and what it saw (issue 24).
    t.reference && el("p", { class: "evidence", text: `Against ${t.reference} · alternative: ${t.alternative}${t.evidence ? ` · ${t.evidence}` : ""}` }),
    chart,
    el("div", { class: "cells-head", text: "observed / exact expectation" }),
    el("ol", { class: "cells" }, rows));
}

async function loadSides() {
  const reply = await api("/api/charts/side-wagers?rounds=2000");
  if (!reply.ok) return;
  const rows = Object.entries(SIDE_NAMES).map(([key, name]) => ({ name, ...reply.wagers[key] }));
  rows.push({ name: "Envy", seat_rounds: reply.envy.seat_rounds, hits: reply.envy.hits, pays: null, paid: reply.envy.paid });
  const W = 560, rowH = 40, L = 104, R = 250;
  const lines = Object.entries(reply.chan_chu_lines || {});
  const H = rows.length * rowH + (lines.length ? 26 + lines.length * 26 : 0) + 10;
  const chart = chartFrame(W, H);
  chart.setAttribute("aria-label", "side-wager hits and pays");
  const maxRate = Math.max(0.05, ...rows.map((r) => (r.seat_rounds ? r.hits / r.seat_rounds : 0)));
  rows.forEach((r, i) => {
    const rate = r.seat_rounds ? r.hits / r.seat_rounds : 0;
    const yy = i * rowH + 8;
    const bw = (W - L - R) * (rate / maxRate);
    chart.append(
      svg("text", { x: L - 10, y: yy + 20, class: "label", "text-anchor": "end" }, r.name),
      svg("rect", { x: L, y: yy + 4, width: Math.max(2, bw), height: 22, rx: 4, class: "bar" }),
      svg("text", { x: L + Math.max(2, bw) + 8, y: yy + 20, class: "value" },
        `${r.hits} hits · ${pct(rate, 1)}${r.pays !== null ? ` · paid ${r.pays} to 1` : ` · $${r.paid}`}`));
  });
  if (lines.length) {
    const base = rows.length * rowH + 16;
    chart.append(svg("text", { x: 12, y: base + 8, class: "axis gold" }, "Chan Chu hits by line"));
    const maxLine = Math.max(...lines.map(([, n]) => n));
    lines.forEach(([line, n], i) => {
      const yy = base + 18 + i * 26;
      chart.append(svg("text", { x: L - 10, y: yy + 14, class: "axis", "text-anchor": "end" }, lineName(line)),
        svg("rect", { x: L, y: yy + 2, width: Math.max(2, (W - L - R) * (n / maxLine)), height: 16, rx: 3, class: "bar thin" }),
        svg("text", { x: L + Math.max(2, (W - L - R) * (n / maxLine)) + 8, y: yy + 14, class: "axis" }, String(n)));
    });
  }
  const net = rows.filter((r) => r.wagered).map((r) => `${r.name} net ${r.net > 0 ? "+" : ""}${r.net} on ${r.wagered}`);
  fill($("#chart-sides"), el("div", { class: "headline small", text: `${reply.rounds} settled rounds${net.length ? ` · ${net.join(" · ")}` : " · no wagers entered"}` }), chart);
}

// --- round history ---------------------------------------------------------------------------------

function statusPill(status) {
  return el("span", { class: ["status", status], text: status });
}

async function loadRounds() {
  const q = encodeURIComponent(S.query);
  const reply = await api(`/api/rounds?q=${q}&limit=${S.limit}&offset=${S.offset}`);
  if (!reply.ok) { fill($("#rounds"), el("tr", {}, el("td", { colspan: 6, text: reply.error || "cannot load the rounds" }))); return; }
  $("#newer").disabled = S.offset === 0;
  $("#older").disabled = reply.rounds.length < S.limit;
  fill($("#rounds"), reply.rounds.length ? reply.rounds.map((r) => {
    const fp = positionText(r.first_position, seatOf);
    return el("tr", { class: ["round-row", S.selected === r.round_id && "selected"], dataset: { roundId: r.round_id }, tabindex: "0", onclick: () => showRound(r.round_id), onkeydown: (e) => { if (e.key === "Enter") showRound(r.round_id); } },
      el("td", { class: "num", text: String(r.seq) }),
      el("td", { class: "mono", text: r.round_id }),
      el("td", { title: dateTimeText(r.opened_at), text: timeText(r.opened_at) }),
      el("td", {}, statusPill(r.status), r.reason ? el("span", { class: "reason", text: ` ${r.reason.split("; ").map(lineName).join("; ")}` }) : null),
      el("td", { text: fp ? fp.where : "—" }),
      el("td", {}, r.two_jacks ? el("b", { class: "jacks", text: "TWO JACKS" }) : r.rule ? el("span", { class: "rule", text: r.rule }) : "—"));
  }) : el("tr", {}, el("td", { colspan: 6, class: "none", text: S.query ? `No round matches “${S.query}”` : "No rounds yet" })));
}

/** A dead round's packet: "seat 2 · packet 3", "dealer · packet 1", or "packet 4" when no first
 *  position was drawn (so no seat had it). */
function packetLabel(p) {
  const packet = p.packet ? `packet ${p.packet}` : "";
  const who = String(p.seat).startsWith("packet") ? "" : p.seat === "dealer" ? "dealer" : `seat ${p.seat}`;
  return [who, packet || (who ? "" : String(p.seat))].filter(Boolean).join(" · ");
}

function section(title, ...children) {
  return el("section", { class: "d-section" }, el("h3", { text: title }), ...children);
}

function sideCell(side) {
  if (!side) return el("td", { text: "—" });
  const cls = side.pays > 0 ? "win" : side.pays === 0 ? "push" : "lose";
  return el("td", { class: cls }, side.pays > 0 ? `${lineName(side.line)} · ${pays(side.pays)}` : pays(side.pays),
    side.win !== null && side.win !== undefined ? el("small", { text: ` (${side.win > 0 ? "+" : ""}${side.win})` }) : null);
}

async function showRound(roundId) {
  S.selected = roundId;
  document.querySelectorAll(".round-row").forEach((row) => row.classList.toggle("selected", row.dataset.roundId === roundId));
  const detail = $("#round-detail");
  const reply = await api(`/api/rounds/${encodeURIComponent(roundId)}`);
  if (!reply.ok) { fill(detail, el("div", { class: "empty", text: reply.error || "cannot load the round" })); return; }
  const res = reply.result || {};
  const parts = [];
  parts.push(el("div", { class: "d-head", dataset: { roundId: reply.round_id } },
    el("h3", { text: `Round ${reply.seq}` }), statusPill(reply.status),
    el("div", { class: "mono small", text: reply.round_id }),
    el("div", { class: "small", text: `opened ${dateTimeText(reply.opened_at)} · closed ${reply.closed_at ? dateTimeText(reply.closed_at) : "—"}` })));
  if ((res.reasons || []).length || reply.reason) {
    parts.push(section("Reasons", el("ul", { class: "reasons" }, (res.reasons || [{ code: reply.reason, detail: "" }]).map((p) =>
      el("li", {}, el("b", { text: cap(lineName(p.code)) }), p.detail ? ` — ${wordsIn(p.detail)}` : "")))));
  }
  if (res.first_position) {
    const fp = res.first_position;
    const t = positionText(fp, seatOf);
    parts.push(section("First packet", el("p", {}, el("b", { text: t.where }), ` · ${t.how} · ${lineName(fp.method)}`)));
  }
  if (res.dealer) {
    const d = res.dealer;
    parts.push(section("Dealer",
      el("div", { class: "d-row" }, cardRow(d.cards, "sm"), el("span", { text: cap(d.best_hand) })),
      d.two_jacks ? el("p", { class: "jacks", text: "Two Jacks: no setting; every Pai Gow wager loses" }) : null,
      d.setting ? el("div", { class: "d-row" },
        el("span", { class: "rule", text: d.setting.rule || "" }),
        el("small", { text: "FRONT" }), cardRow(d.setting.front, "sm"), el("span", { text: cap(d.setting.front_hand) }),
        el("small", { text: "BACK" }), cardRow(d.setting.back, "sm"), el("span", { text: cap(d.setting.back_hand) })) : null));
  }
  if ((res.seats || []).length) {
    parts.push(section("Seats", el("table", { class: "seats-table" },
      el("thead", {}, el("tr", {}, ["Seat", "Pos", "Cards", "Best hand", "Chan Chu", "Jacks Beat", "Ace High", "Envy"].map((h) => el("th", { text: h })))),
      el("tbody", {}, res.seats.map((s) => el("tr", {},
        el("td", { class: "num", text: s.seat }), el("td", { text: String(s.position) }),
        el("td", {}, cardRow(s.cards, "sm")), el("td", { text: cap(s.best_hand) }),
        sideCell(s.chan_chu), sideCell(s.jacks_beat), sideCell(s.push_ace_high),
        el("td", { text: s.envy && s.envy.total ? `$${s.envy.total}` : "—" })))))));
  }
  const players = (reply.events || []).filter((e) => e.kind === "player_settled").map((e) => e.payload);
  if (players.length) {
    parts.push(section("Players' settings", el("ul", { class: "players" }, players.map((p) => el("li", {},
      el("b", { text: `Seat ${p.seat}` }), cardRow(p.setting.front, "sm"), cardRow(p.setting.back, "sm"),
      el("span", { class: p.foul ? "lose" : "", text: p.foul ? "FOUL · loses" : `Pai Gow ${OUTCOMES[p.pai_gow.outcome] || p.pai_gow.outcome} (${lineName(p.pai_gow.reason)})` }),
      p.house_way ? el("small", { text: "house way" }) : null,
      p.corrects ? el("small", { class: "correction", text: `correction by ${p.by || "nobody named"}: ${p.reason || "no reason given"}` }) : null)))));
  }
  if ((res.positions || []).length && !(res.seats || []).length) {
    parts.push(section("Packets as dealt", el("ul", { class: "positions" }, res.positions.map((p) => el("li", {},
      el("b", { class: "packet-of", text: packetLabel(p) }), cardRow(p.cards, "sm"))))));
  }
  if (res.rules) {
    parts.push(section("Rules", el("p", { class: "small", text: `wheel ${lineName(res.rules.wheel_rank)} · ace-high pushes pai gow ${res.rules.ace_high_pushes_pai_gow ? "on" : "off"} · Chan Chu ${res.paytables?.chan_chu} · Jacks Beat ${res.paytables?.jacks_beat}${res.paytables?.envy ? ` · envy ${res.paytables.envy}` : ""}` })));
  }
  parts.push(section(`Journal events (${(reply.events || []).length})`, el("ol", { class: "events" }, (reply.events || []).map((e) =>
    el("li", {}, el("details", {},
      el("summary", {}, el("span", { class: "when", text: timeText(e.at) }), el("b", { text: wordsIn(e.kind) }), el("span", { class: "mono small", text: ` #${e.id}` })),
      el("pre", { text: JSON.stringify(e.payload, null, 2) })))))));
  fill(detail, parts);
}

// --- live ----------------------------------------------------------------------------------------

async function showRecall() {
  const reply = await api("/api/recall?last=10");
  S.selected = null;
  fill($("#round-detail"), reply.ok
    ? [el("h3", { text: "Recall: the last 10 rounds, from the journal" }), el("pre", { class: "recall", text: wordsIn(reply.text) })]
    : el("div", { class: "empty", text: reply.error || "the recall failed" }));
}

let refreshTimer = null;
function refreshSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => { loadRounds(); loadHourly(); loadJacks(); loadSides(); loadOverview(); loadProtection(); }, 400);
}

const handlers = {
  snapshot(data) {
    S.table = data.table; S.status = data.status || {}; S.devices = data.devices || {}; S.round = data.round; S.alarms = data.alarms || [];
    S.controls = data.controls || {};
    renderMode();
    renderHeader(); renderLatched(); renderDevices(); renderAlarms(); loadOverview(); loadProtection();
    loadRounds(); // after the seat map: history rows name seats, not positions
  },
  round(data) {
    const closed = !["dealing", "waiting_position"].includes(data.phase);
    S.round = data; renderHeader();
    if (closed) refreshSoon();
  },
  device(data) { S.devices[data.device] = data; renderDevices(); },
  status(data) { S.status = data; renderHeader(); renderLatched(); },
  alarm(data) { S.alarms.unshift(data); S.alarms = S.alarms.slice(0, 50); renderAlarms(); },
  player(data) { if (S.selected === data.round_id) showRound(data.round_id); },
  seats() {},
};

document.addEventListener("DOMContentLoaded", () => {
  clock($("#clock"));
  let timer = null;
  $("#search").addEventListener("input", (e) => {
    clearTimeout(timer);
    timer = setTimeout(() => { S.query = e.target.value.trim(); S.offset = 0; loadRounds(); }, 250);
  });
  $("#search").addEventListener("keydown", (e) => { if (e.key === "Enter") { S.query = e.target.value.trim(); S.offset = 0; loadRounds(); } });
  $("#older").addEventListener("click", () => { S.offset += S.limit; loadRounds(); });
  $("#recall").addEventListener("click", showRecall);
  $("#newer").addEventListener("click", () => { S.offset = Math.max(0, S.offset - S.limit); loadRounds(); });
  live(handlers, (up) => {
    $("#link").classList.toggle("up", up);
    $("#link").classList.toggle("down", !up);
  });
  loadHourly(); loadJacks(); loadSides();
  const wanted = new URLSearchParams(location.search).get("round");
  if (wanted) showRound(wanted);
});
