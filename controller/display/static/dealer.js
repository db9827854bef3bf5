// The dealer's table monitor: the dealer's hand set by the House Way, the first-packet position,
// the banners, each seat's side-wager results, and the dealer's input (dice, seats, a player's
// setting, void). Everything arrives over the live stream; every value is shown as text.
// A void and a correction of a player's setting need a supervisor: badge and PIN when the table
// has a supervisors file (controls.supervisor "badge"), else the shared void PIN (and a name).

import {
  $, api, cap, cardFace, cardRow, clock, el, fill, lineName, live, pays, positionText, renderFault, timeText,
  wordsIn,
} from "./common.js";

const S = {
  table: { id: "", name: "", seats: [] },
  status: {},
  devices: {},
  occupied: {},
  round: null,
  players: {},
  controls: { dealer_input: false, void_enabled: false, supervisor: "shared_pin" },
  dismissed: new Set(),
  modal: null,
};

const SIDE_NAMES = { chan_chu: "Chan Chu", jacks_beat: "Jacks Beat", push_ace_high: "Ace High" };

const seatOf = (position) => (S.table.seats.find((s) => s.position === position) || {}).seat || String(position);

function result() {
  return S.round && S.round.result ? S.round.result : null;
}

// --- rendering ---------------------------------------------------------------------------------

function render() {
  renderHeader();
  renderDealer();
  renderSeats();
  renderBanner();
  renderControls();
  if (S.modal && S.modal.refresh) S.modal.refresh();
}

function phaseOf() {
  const r = S.round;
  if (!r) return ["none", "Waiting for the deal"];
  switch (r.phase) {
    case "dealing": return ["dealing", `Dealing · ${r.packets || 0} / 7 packets`];
    case "waiting_position": return ["position", "Key in the dice"];
    case "settled": return result() && result().dealer && result().dealer.two_jacks
      ? ["two_jacks", "Dealer has two Jacks"] : ["settled", "Dealer's hand set"];
    case "void": return ["void", "Round void"];
    default: return ["dead", "All hands dead"];
  }
}

function renderHeader() {
  renderFault($("#fault"), S.status);
  $("#table-name").textContent = S.table.name || S.table.id;
  document.title = `Dealer — ${S.table.name || S.table.id}`;
  $("#round-label").textContent = S.round ? `Round ${S.round.round_seq}` : "";
  const [phase, text] = phaseOf();
  const node = $("#phase");
  node.dataset.phase = phase;
  node.textContent = S.status && S.status.table_open === false ? `Table closed · ${text}` : text;
  fill($("#devices"), Object.entries(S.devices).sort().map(([name, d]) =>
    el("li", { class: ["device", d.online ? "up" : "down"], title: wordsIn(d.detail) || (d.online ? "online" : "offline") },
      el("span", { class: "dot", "aria-hidden": "true" }), name, d.online ? null : el("b", { text: " OFFLINE" }))));
  renderDevicesDown();
}

// A device offline is said in words across the page, not only by a red dot in the top bar: the
// shuffler first (no deal can be read without it). docs/alarms.md, device_offline.
function renderDevicesDown() {
  const rank = (name) => (name === "shuffler" ? 0 : 1);
  const down = Object.entries(S.devices).filter(([, d]) => !d.online)
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
  const node = $("#devices-down");
  node.hidden = down.length === 0;
  fill(node, down.map(([name, d]) => el("div", { class: "device-down", dataset: { device: name } },
    el("b", { class: "down-name", text: `${name.toUpperCase()} OFFLINE` }),
    el("span", { class: "down-what", text: "Do not start a deal until it is back" }),
    el("span", { class: "down-detail", text: [d.at ? `since ${timeText(d.at)}` : "", wordsIn(d.detail)].filter(Boolean).join(" · ") }))));
}

// The way the dealer was set by (journaled with the round; the status's before a result).
function wayName(res) {
  const way = (res && res.rules && res.rules.house_way) || (S.status && S.status.house_way) || "";
  return way ? ` · ${way}` : "";
}

function renderDealer() {
  const r = S.round;
  const res = result();
  const setting = $("#dealer-setting");
  setting.removeAttribute("data-round-id");
  setting.removeAttribute("data-round-seq");
  const dealer = res && res.dealer;
  fill($("#dealer-cards"), dealer ? dealer.cards.map((c) => cardFace(c, "md")) : []);
  $("#dealer-best").textContent = dealer ? cap(dealer.best_hand) : "";

  if (!r) {
    setting.dataset.state = "empty";
    fill(setting, el("div", { class: "waiting", text: "Waiting for the deal" }));
  } else if (r.phase === "dealing") {
    setting.dataset.state = "dealing";
    fill(setting, el("div", { class: "waiting" }, "Dealing",
      el("div", { class: "packets" }, [...Array(7).keys()].map((i) =>
        el("span", { class: ["packet", i < (r.packets || 0) && "in"] })))));
  } else if (r.phase === "waiting_position") {
    setting.dataset.state = "position";
    fill(setting, el("div", { class: "waiting attention" }, "Cards are in — key in the three dice",
      S.controls.dealer_input ? el("button", { class: "btn big", type: "button", onclick: openDice, text: "Enter dice" }) : null));
  } else if (dealer && dealer.setting) {
    const s = dealer.setting;
    setting.dataset.state = "set";
    setting.dataset.roundId = r.round_id;
    setting.dataset.roundSeq = r.round_seq;
    fill(setting,
      el("div", { class: "rule" }, "House Way ", el("b", { id: "rule-id", text: s.rule || "" }),
        el("small", { id: "way-name", text: wayName(res) })),
      el("div", { class: "hands" },
        el("div", { class: "hand front" },
          el("div", { class: "hand-label" }, "FRONT", el("small", { text: "two cards" })),
          cardRow(s.front, "xl"),
          el("div", { class: "hand-name", text: cap(s.front_hand) })),
        el("div", { class: "hand back" },
          el("div", { class: "hand-label" }, "BACK", el("small", { text: "five cards" })),
          cardRow(s.back, "xl"),
          el("div", { class: "hand-name", text: cap(s.back_hand) }))));
  } else if (dealer && dealer.two_jacks) {
    setting.dataset.state = "two_jacks";
    setting.dataset.roundId = r.round_id;
    setting.dataset.roundSeq = r.round_seq;
    fill(setting, el("div", { class: "notice jacks" },
      el("div", { class: "notice-title", text: "Dealer has two Jacks" }),
      el("div", { text: "No setting: every Pai Gow wager loses. Settle Jacks Beat and Chan Chu." })));
  } else {
    setting.dataset.state = r.phase;
    setting.dataset.roundId = r.round_id;
    setting.dataset.roundSeq = r.round_seq;
    const reasons = res ? res.reasons || [] : [];
    fill(setting, el("div", { class: ["notice", r.phase === "void" ? "void" : "dead"] },
      el("div", { class: "notice-title", text: r.phase === "void" ? "Round void" : "All hands dead" }),
      reasons.map((p) => el("div", { class: "reason", text: wordsIn(p.detail) }))));
  }
  // The panel knows what its box shows: on a small screen the dealt seven cards give way to
  // the setting, which shows the same cards bigger.
  setting.closest(".dealer-panel").dataset.state = setting.dataset.state;

  const fp = (res && res.first_position) || (r && r.position);
  const where = positionText(fp, seatOf);
  fill($("#first-position"), fp ? [
    el("span", { class: "label", text: "First packet" }),
    el("span", { class: "where", text: where.where }),
    el("span", { class: "how", text: where.how }),
  ] : []);
}

function sideChips(seat) {
  const chips = [];
  for (const name of Object.keys(SIDE_NAMES)) {
    const side = seat[name];
    if (!side) continue;
    const p = side.pays;
    const money = side.win !== null && side.win !== undefined && side.wager !== null && side.wager !== undefined
      ? el("span", { class: "money", text: side.win > 0 ? `+${side.win}` : String(side.win) }) : null;
    if (p < 0) continue;
    chips.push(el("span", { class: ["chip", p > 0 ? "win" : "push"], dataset: { wager: name } },
      // "10 to 1" is never broken over two lines
      el("b", { text: SIDE_NAMES[name] }), p > 0 ? ` ${lineName(side.line)} · ${pays(p).replaceAll(" ", "\u00a0")}` : " push", money));
  }
  if (seat.envy && seat.envy.total) {
    chips.push(el("span", { class: "chip win", dataset: { wager: "envy" } }, el("b", { text: "Envy" }), ` $${seat.envy.total}`));
  }
  if (!chips.length) chips.push(el("span", { class: "chip lose", text: "side wagers lose" }));
  return chips;
}

function paiGowBadge(label, two_jacks) {
  const player = S.players[label];
  if (two_jacks || !player) return null; // with two Jacks the banner says every Pai Gow wager loses
  const outcome = player.foul ? "foul" : player.pai_gow.outcome;
  const words = { foul: "FOUL · loses", win: "Pai Gow WINS", push: "Pai Gow PUSH", lose: "Pai Gow LOSES" };
  return el("span", { class: ["badge", outcome === "win" ? "win" : outcome === "push" ? "push" : "lose"], dataset: { outcome } },
    words[outcome] || outcome, player.house_way ? el("small", { text: " house way" }) : null,
    // A setting entered again replaces the earlier one: say so, as the feed does (corrects).
    player.corrects ? el("small", { class: "corrected", text: " corrected", title: `replaces ${player.corrects}${player.by ? ` · by ${player.by}: ${player.reason}` : ""}` }) : null);
}

function renderSeats() {
  const res = result();
  const seats = res && res.status === "settled" ? res.seats || [] : [];
  const twoJacks = !!(res && res.dealer && res.dealer.two_jacks);
  const canSet = S.controls.dealer_input && seats.length > 0 && !twoJacks;
  $("#seats-hint").textContent = canSet ? "Tap a seat to enter the player's setting" : "";
  fill($("#seats"), S.table.seats.map(({ position, seat: label }) => {
    const seat = seats.find((s) => s.seat === label);
    const occupied = S.occupied[label];
    const head = el("div", { class: "seat-head" },
      el("span", { class: "seat-label", text: label }),
      el("span", { class: "seat-pos", text: `pos ${position}` }));
    if (!seat) {
      let why = occupied === false ? "empty" : occupied ? "occupied" : "";
      if (res && res.status === "settled" && occupied !== false) why = "no hand";
      else if (res && res.status !== "settled") why = res.status === "void" ? "void" : "dead hand";
      return el("li", { class: ["seat", occupied === false && "empty"], dataset: { seat: label } },
        head, el("div", { class: "seat-wait", text: why }));
    }
    // The hand's name and the results wrap beside the cards: never cut off.
    const cards = cardRow(seat.cards, "sm", "cards seat-cards");
    const info = el("div", { class: "seat-info" },
      el("div", { class: "seat-best", text: cap(seat.best_hand) }),
      el("div", { class: "chips" }, paiGowBadge(label, twoJacks), sideChips(seat)));
    const attrs = { class: ["seat", "dealt", canSet && "tappable"], dataset: { seat: label } };
    if (canSet) {
      attrs.onclick = () => openPlayer(label);
      attrs.role = "button";
      attrs.tabindex = "0";
    }
    return el("li", attrs, head, cards, info);
  }));
}

function bannerFor() {
  const r = S.round;
  const res = result();
  if (!r || !res) return null;
  if (res.status === "settled" && res.dealer && res.dealer.two_jacks) {
    return { kind: "two_jacks", title: "DEALER HAS TWO JACKS", sub: "All Pai Gow wagers lose", reason: "Settle Jacks Beat and Chan Chu" };
  }
  if (res.status === "dead" || res.status === "misdeal") {
    const first = (res.reasons || [])[0];
    const sub = res.status === "misdeal" ? "Misdeal" : first ? cap(lineName(first.code)) : "";
    return { kind: "dead", title: "ALL HANDS DEAD", sub, reason: (res.reasons || []).map((p) => wordsIn(p.detail)).join(" · ") };
  }
  if (res.status === "void") {
    return { kind: "void", title: "ROUND VOID", sub: "", reason: (res.reasons || []).map((p) => wordsIn(p.detail)).join(" · ") };
  }
  return null;
}

function renderBanner() {
  const b = bannerFor();
  const banner = $("#banner");
  const strip = $("#strip");
  if (!b) {
    banner.hidden = true;
    strip.hidden = true;
    return;
  }
  const key = `${S.round.round_id}:${b.kind}`;
  banner.dataset.kind = b.kind;
  strip.dataset.kind = b.kind;
  $("#banner-title").textContent = b.title;
  $("#banner-sub").textContent = b.sub;
  $("#banner-reason").textContent = b.reason;
  fill(strip, el("b", { text: b.title }), b.sub ? ` · ${b.sub}` : "", b.reason ? ` · ${b.reason}` : "");
  // A stale screen (the controller not responding) calls nobody to act: the banner gives way to
  // its strip, greyed with the rest (dealer.css), until the controller answers again.
  const stale = document.body.dataset.controller === "lost";
  banner.hidden = stale || S.dismissed.has(key);
  strip.hidden = !banner.hidden;
  banner.onclick = () => { S.dismissed.add(key); renderBanner(); };
}

function renderControls() {
  const c = S.controls;
  const controls = $("#controls");
  controls.dataset.input = c.dealer_input ? "on" : "off";
  // Whether this page carries the kiosk's credential (docs/display.md): nothing shown, for tests
  // and for whoever inspects the kiosk.
  document.body.dataset.kiosk = c.kiosk ? "yes" : "no";
  $("#btn-dice").hidden = !c.dealer_input;
  $("#btn-seats").hidden = !c.dealer_input;
  const voidBtn = $("#btn-void");
  voidBtn.hidden = !c.dealer_input;
  voidBtn.disabled = !c.void_enabled;
  const problem = c.void_enabled ? "" : c.void_problem || "";
  voidBtn.textContent = c.void_enabled ? "Void round"
    : problem.includes("supervisors file") ? "Void: supervisors file unreadable"
      : problem.includes("digits") ? "Void: PIN too short" : "Void: no PIN configured";
  voidBtn.title = c.void_enabled ? "" : c.void_problem || "Voiding from this screen is disabled: no void PIN is configured";
  const dealerBtn = $("#btn-dealer");
  dealerBtn.hidden = !c.dealer_input || !c.sign_in_enabled;
  dealerBtn.textContent = S.status.dealer_id ? `Dealer ${S.status.dealer_id} · sign out` : "Dealer sign in";
  dealerBtn.dataset.signedIn = S.status.dealer_id ? "yes" : "no";
  $("#btn-dice").classList.toggle("attention", !!(S.round && S.round.phase === "waiting_position"));
  if (!c.dealer_input && !$("#message").dataset.sticky) {
    $("#message").dataset.sticky = "1";
    say("View only: dealer input is accepted on the table computer", "info");
  }
}

function say(text, kind = "info") {
  const node = $("#message");
  node.dataset.kind = kind;
  node.textContent = text;
}

// --- modals ------------------------------------------------------------------------------------

function openModal(title, build, refresh) {
  $("#modal-title").textContent = title;
  const body = $("#modal-body");
  fill(body);
  S.modal = { refresh: refresh ? () => refresh(body) : null };
  build(body);
  $("#modal").hidden = false;
}

function closeModal() {
  $("#modal").hidden = true;
  S.modal = null;
  fill($("#modal-body"));
}

function dieFace(n) {
  const pips = { 1: [4], 2: [0, 8], 3: [0, 4, 8], 4: [0, 2, 6, 8], 5: [0, 2, 4, 6, 8], 6: [0, 2, 3, 5, 6, 8] }[n];
  return el("span", { class: "die-face", "aria-hidden": "true" },
    [...Array(9).keys()].map((i) => el("i", { class: pips.includes(i) ? "pip" : "" })));
}

function openDice() {
  const dice = [null, null, null];
  let slot = 0;
  let rows;
  let summary;
  let confirm;
  const update = () => {
    rows.forEach((row, i) => row.querySelectorAll("button").forEach((b) =>
      b.classList.toggle("chosen", Number(b.dataset.value) === dice[i])));
    if (dice.every((d) => d)) {
      const sum = dice.reduce((a, b) => a + b, 0);
      const position = ((sum - 1) % 7) + 1;
      summary.textContent = `${dice.join(" + ")} = ${sum}  →  position ${position} · ${position === 1 ? "dealer" : `seat ${seatOf(position)}`}`;
      confirm.disabled = false;
    } else {
      summary.textContent = "Choose all three dice (or type them: 1–6)";
      confirm.disabled = true;
    }
  };
  const choose = (i, v) => { dice[i] = v; slot = Math.min(2, i + 1); update(); };
  const submit = async () => {
    confirm.disabled = true;
    const reply = await api("/api/dice", { method: "POST", body: { dice } });
    if (reply.ok) { closeModal(); say(`Dice ${dice.join(" · ")} entered`, "ok"); }
    else { say(reply.error || "the dice were refused", "error"); summary.textContent = reply.error || "refused"; confirm.disabled = false; }
  };
  openModal("Enter the three dice", (body) => {
    rows = [0, 1, 2].map((i) => el("div", { class: "dice-row", dataset: { die: i + 1 } },
      el("span", { class: "die-label", text: `Die ${i + 1}` }),
      [1, 2, 3, 4, 5, 6].map((v) => el("button", { class: "die", type: "button", dataset: { value: v }, "aria-label": `die ${i + 1}: ${v}`, onclick: () => choose(i, v) }, dieFace(v)))));
    summary = el("div", { class: "dice-summary", id: "dice-summary" });
    confirm = el("button", { class: "btn primary big", id: "dice-confirm", type: "button", onclick: submit, text: "Confirm dice" });
    body.append(...rows, summary, el("div", { class: "modal-actions" }, confirm));
    update();
  });
  S.modal.keys = (key) => {
    if (/^[1-6]$/.test(key)) { choose(slot, Number(key)); return true; }
    if (key === "Backspace") { dice[slot] = null; slot = Math.max(0, slot - 1); update(); return true; }
    if (key === "Enter" && !confirm.disabled) { submit(); return true; }
    return false;
  };
}

function openSeats() {
  const draw = (body) => fill(body,
    el("p", { class: "modal-hint", text: "Tap a seat to mark it occupied or empty. Every position gets a packet; empty seats are not settled." }),
    el("div", { class: "seat-toggles" }, S.table.seats.map(({ seat: label, position }) => {
      const occupied = S.occupied[label] !== false;
      return el("button", {
        class: ["seat-toggle", occupied ? "on" : "off"], type: "button", dataset: { seat: label }, "aria-pressed": occupied ? "true" : "false",
        onclick: async () => {
          const reply = await api("/api/seats", { method: "POST", body: { occupied: { [label]: !occupied } } });
          if (reply.ok && reply.data) { S.occupied = reply.data.occupied; render(); }
          else say(reply.error || "refused", "error");
        },
      }, el("span", { class: "toggle-seat", text: label }), el("span", { class: "toggle-pos", text: `position ${position}` }),
      el("span", { class: "toggle-state", text: occupied ? "OCCUPIED" : "EMPTY" }));
    })));
  openModal("Occupied seats", draw, draw);
}

function openVoid() {
  if (!S.controls.void_enabled) { say(S.controls.void_problem || "Voiding from this screen is disabled: no void PIN is configured", "error"); return; }
  let pin = "";
  let reason = "Cards exposed";
  let shown;
  let note;
  let badge = null; // with a supervisors file: the supervisor's badge (a badge reader types it)
  const badges = S.controls.supervisor === "badge";
  const reasons = ["Cards exposed", "Misdeal called by the floor", "Wrong position", "Device fault", "Other"];
  const draw = () => { shown.textContent = pin ? "•".repeat(pin.length) : "PIN"; };
  const submit = async () => {
    const round = S.round;
    const body = { pin, reason, round_id: round ? round.round_id : null };
    if (badge) body.badge = badge.value.trim();
    const reply = await api("/api/void", { method: "POST", body });
    pin = ""; draw();
    if (reply.ok) { closeModal(); say("Round voided", "ok"); }
    else { note.textContent = reply.error || "refused"; note.dataset.kind = "error"; }
  };
  const press = (k) => {
    if (k === "⌫") pin = pin.slice(0, -1);
    else if (k === "OK") { submit(); return; }
    else if (pin.length < 12) pin += k;
    draw();
  };
  openModal("Void this round", (body) => {
    shown = el("div", { class: "pin-shown", id: "pin-shown" });
    note = el("div", { class: "pin-note", id: "void-note", text: badges
      ? "A supervisor's badge and PIN: the void is recorded under that badge. A voided round's results no longer count."
      : "A voided round's results no longer count. The supervisor sees every void." });
    if (badges) badge = el("input", { class: "badge-input", id: "void-badge", type: "text", placeholder: "Supervisor badge", autocomplete: "off", spellcheck: "false", maxlength: "32", "aria-label": "supervisor badge" });
    body.append(
      el("div", { class: "void-layout" },
        el("div", { class: "void-reasons" }, badge, reasons.map((r) => el("button", {
          class: ["btn", "reason", r === reason && "chosen"], type: "button", text: r,
          onclick: (e) => { reason = r; body.querySelectorAll(".void-reasons .btn").forEach((b) => b.classList.toggle("chosen", b === e.currentTarget)); },
        }))),
        el("div", { class: "pinpad" }, shown,
          el("div", { class: "keys" }, ["1", "2", "3", "4", "5", "6", "7", "8", "9", "⌫", "0", "OK"].map((k) =>
            el("button", { class: ["key", k === "OK" && "ok"], type: "button", dataset: { key: k }, text: k, onclick: () => press(k) }))))),
      note);
    draw();
  });
  if (badge) badge.focus(); // a badge reader types the badge and presses Enter; then the PIN
  S.modal.keys = (key) => {
    if (badge && document.activeElement === badge) {
      if (key === "Enter") { badge.blur(); return true; }
      return false;
    }
    if (/^[0-9]$/.test(key)) { press(key); return true; }
    if (key === "Backspace") { press("⌫"); return true; }
    if (key === "Enter") { press("OK"); return true; }
    return false;
  };
}

function openDealer() {
  if (S.status.dealer_id) {
    api("/api/sign-out", { method: "POST", body: {} }).then((reply) =>
      say(reply.ok ? `Dealer ${reply.data.dealer_id} signed out` : reply.error || "refused", reply.ok ? "ok" : "error"));
    return;
  }
  let pin = "";
  let shown;
  let note;
  let badge;
  const draw = () => { shown.textContent = pin ? "•".repeat(pin.length) : "PIN"; };
  const submit = async () => {
    const reply = await api("/api/sign-in", { method: "POST", body: { badge: badge.value.trim(), pin } });
    pin = ""; draw();
    if (reply.ok) {
      closeModal();
      say(reply.data.rotation ? `Dealer ${reply.data.dealer_id} takes over from ${reply.data.replaces}` : `Dealer ${reply.data.dealer_id} signed in`, "ok");
    } else { note.textContent = reply.error || "refused"; note.dataset.kind = "error"; }
  };
  const press = (k) => {
    if (k === "⌫") pin = pin.slice(0, -1);
    else if (k === "OK") { submit(); return; }
    else if (pin.length < 12) pin += k;
    draw();
  };
  openModal(S.status.dealer_id ? "Dealer rotation" : "Dealer sign in", (body) => {
    // A badge reader that types like a keyboard fills this field and presses Enter.
    badge = el("input", { class: "badge-input", id: "badge", type: "text", placeholder: "Badge number", autocomplete: "off", spellcheck: "false", maxlength: "32", "aria-label": "badge number" });
    shown = el("div", { class: "pin-shown", id: "sign-in-pin" });
    note = el("div", { class: "pin-note", id: "sign-in-note", text: "Every round you deal is recorded under your badge." });
    body.append(el("div", { class: "void-layout" }, el("div", { class: "void-reasons" }, badge),
      el("div", { class: "pinpad" }, shown,
        el("div", { class: "keys" }, ["1", "2", "3", "4", "5", "6", "7", "8", "9", "⌫", "0", "OK"].map((k) =>
          el("button", { class: ["key", k === "OK" && "ok"], type: "button", dataset: { key: k }, text: k, onclick: () => press(k) }))))),
    note);
    draw();
  });
  badge.focus(); // once the modal is shown: a hidden field cannot take the focus
  S.modal.keys = (key) => {
    if (document.activeElement === badge) {
      if (key === "Enter") { badge.blur(); return true; }
      return false;
    }
    if (/^[0-9]$/.test(key)) { press(key); return true; }
    if (key === "Backspace") { press("⌫"); return true; }
    if (key === "Enter") { press("OK"); return true; }
    return false;
  };
}

function openPlayer(label) {
  const res = result();
  const seat = res && res.seats.find((s) => s.seat === label);
  if (!seat) return;
  const roundId = S.round.round_id;
  let front = [];
  let preview;
  let enter;
  let cardsBox;
  let correction; // shown once the seat has an entry: entering again is a correction
  let who;
  let pinBox;
  let why;
  const badges = S.controls.supervisor === "badge";
  const outcomeWords = { win: "Player WINS the Pai Gow wager", push: "PUSH", lose: "Player LOSES the Pai Gow wager" };
  const showResult = (data, entered) => {
    const foul = data.foul;
    const outcome = data.pai_gow.outcome;
    fill(preview,
      el("div", { class: "pv-hands" },
        el("div", { class: "pv-hand" }, el("small", { text: "FRONT" }), cardRow(data.setting.front, "md"), el("span", { text: cap(data.setting.front_hand) })),
        el("div", { class: "pv-hand" }, el("small", { text: "BACK" }), cardRow(data.setting.back, "md"), el("span", { text: cap(data.setting.back_hand) }))),
      el("div", { class: ["pv-outcome", foul ? "foul" : outcome], id: "player-outcome", dataset: { outcome: foul ? "foul" : outcome, entered: entered ? "yes" : "no" } },
        foul ? "FOUL — the back must beat the front: the Pai Gow wager loses" : outcomeWords[outcome] || outcome),
      el("div", { class: "pv-state", text: entered ? "Entered and journaled" : "Not entered yet: Enter setting to settle" }));
  };
  const tap = async (card) => {
    front = front.includes(card) ? front.filter((c) => c !== card) : [...front, card].slice(-2);
    cardsBox.querySelectorAll(".card").forEach((n) => n.classList.toggle("chosen", front.includes(n.dataset.card)));
    enter.disabled = front.length !== 2;
    if (front.length !== 2) { fill(preview, el("div", { class: "pv-hint", text: "Tap the two cards the player puts in front" })); return; }
    const reply = await api("/api/player-setting/preview", { method: "POST", body: { seat: label, front, round_id: roundId } });
    if (reply.ok) showResult(reply, false);
    else fill(preview, el("div", { class: "pv-hint error", text: reply.error || "refused" }));
  };
  const showCorrection = () => { correction.hidden = !S.players[label]; };
  const send = async (body) => {
    const sent = { seat: label, round_id: roundId, ...body };
    if (S.players[label]) {
      // The seat's setting was entered already: this is a correction (docs/audit.md).
      const person = who.value.trim();
      const reason = why.value.trim();
      if (!S.controls.void_enabled) {
        fill(preview, el("div", { class: "pv-hint error", text: S.controls.void_problem || "Corrections need a supervisor: none is configured at this table" }));
        return;
      }
      if (!person || !pinBox.value || !reason) {
        fill(preview, el("div", { class: "pv-hint error", id: "correction-missing", text: badges
          ? "A correction needs the supervisor's badge, PIN and a reason"
          : "A correction needs the supervisor's name, the void PIN and a reason" }));
        return;
      }
      Object.assign(sent, badges ? { badge: person } : { by: person }, { pin: pinBox.value, reason });
    }
    const reply = await api("/api/player-setting", { method: "POST", body: sent });
    if (pinBox) pinBox.value = "";
    if (reply.ok && reply.data) {
      S.players[label] = reply.data;
      showResult({ setting: reply.data.setting, foul: reply.data.foul, pai_gow: reply.data.pai_gow }, true);
      if (reply.data.corrects) { who.value = ""; why.value = ""; }
      showCorrection();
      renderSeats();
    } else {
      fill(preview, el("div", { class: "pv-hint error", text: reply.error || "refused" }));
    }
  };
  openModal(`Seat ${label} — the player's setting`, (body) => {
    cardsBox = el("div", { class: "pick-cards", id: "pick-cards" }, seat.cards.map((c) =>
      cardFace(c, "lg", { tabindex: "0", onclick: () => tap(c) })));
    preview = el("div", { class: "preview", id: "player-preview" }, el("div", { class: "pv-hint", text: "Tap the two cards the player puts in front" }));
    enter = el("button", { class: "btn primary big", id: "player-enter", type: "button", disabled: true, text: "Enter setting", onclick: () => send({ front }) });
    who = el("input", { class: "badge-input", id: "correction-badge", type: "text", autocomplete: "off", spellcheck: "false", maxlength: badges ? "32" : "64",
      placeholder: badges ? "Supervisor badge" : "Supervisor's name", "aria-label": badges ? "supervisor badge" : "supervisor's name" });
    pinBox = el("input", { class: "badge-input", id: "correction-pin", type: "password", inputmode: "numeric", autocomplete: "off", maxlength: "16",
      placeholder: badges ? "Supervisor PIN" : "Void PIN", "aria-label": "supervisor PIN" });
    why = el("input", { class: "badge-input", id: "correction-reason", type: "text", autocomplete: "off", maxlength: "200", placeholder: "Reason (e.g. keyed the wrong cards)", "aria-label": "reason for the correction" });
    correction = el("div", { class: "correction", id: "correction" },
      el("div", { class: "correction-head", text: "Already entered: entering it again is a correction. A supervisor allows it; it is recorded under their " + (badges ? "badge" : "name") + " with the reason, and the pit is alerted." }),
      el("div", { class: "correction-fields" }, who, pinBox, why));
    body.append(cardsBox, preview, correction, el("div", { class: "modal-actions" },
      el("button", { class: "btn big", id: "player-house-way", type: "button", text: "House Way", onclick: () => send({ house_way: true }) }),
      enter));
    const existing = S.players[label];
    if (existing) showResult({ setting: existing.setting, foul: existing.foul, pai_gow: existing.pai_gow }, true);
    showCorrection();
  });
  S.modal.roundId = roundId;
}

// --- wiring ------------------------------------------------------------------------------------

function applyRound(round) {
  if (S.modal && S.modal.roundId && (!round || round.round_id !== S.modal.roundId)) closeModal();
  if (!S.round || !round || round.round_id !== S.round.round_id) S.players = {};
  S.round = round;
}

const handlers = {
  snapshot(data) {
    S.table = data.table;
    S.status = data.status || {};
    S.devices = data.devices || {};
    S.occupied = data.occupied || {};
    applyRound(data.round);
    S.players = data.players || {};
    S.controls = data.controls || S.controls;
    render();
  },
  round(data) { applyRound(data); render(); },
  player(data) {
    if (S.round && data.round_id === S.round.round_id) { S.players[data.seat] = data; renderSeats(); }
  },
  device(data) { S.devices[data.device] = data; renderHeader(); },
  status(data) { S.status = data; renderHeader(); renderControls(); },
  seats(data) { S.occupied = data.occupied; render(); },
  alarm(data) { if (data.severity === "critical") say(`ALARM ${cap(lineName(data.code))}: ${wordsIn(data.detail)}`, "error"); },
};

document.addEventListener("DOMContentLoaded", () => {
  clock($("#clock"));
  $("#btn-dice").addEventListener("click", openDice);
  $("#btn-seats").addEventListener("click", openSeats);
  $("#btn-void").addEventListener("click", openVoid);
  $("#btn-dealer").addEventListener("click", openDealer);
  $("#modal-close").addEventListener("click", closeModal);
  $("#modal").addEventListener("click", (e) => { if (e.target === e.currentTarget) closeModal(); });
  document.addEventListener("keydown", (e) => {
    if (S.modal && S.modal.keys && S.modal.keys(e.key)) { e.preventDefault(); return; }
    if (e.key === "Escape") closeModal();
  });
  live(handlers, (up) => {
    const link = $("#link");
    link.classList.toggle("up", up);
    link.classList.toggle("down", !up);
    link.title = up ? "live" : "reconnecting…";
    renderBanner();
    if (!up) say("Connection to the table controller lost — reconnecting…", "error");
    else if ($("#message").dataset.kind === "error") say("", "info");
  });
});
