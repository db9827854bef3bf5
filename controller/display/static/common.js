// Shared by the dealer and supervisor pages: safe element building, card faces, the API and the
// live stream. Data from the table (card text, seat labels, names, reasons) only ever reaches the
// page as textContent or attribute values: never as HTML.

export const SVG_NS = "http://www.w3.org/2000/svg";

/** An element with attributes and children; strings become text nodes (never parsed as HTML). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

/** An SVG element, same rules. */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "dataset") for (const [k, v] of Object.entries(value)) node.dataset[k] = String(v);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

export const $ = (selector, root = document) => root.querySelector(selector);

// --- cards -------------------------------------------------------------------------------------

const RANKS = { T: "10", J: "J", Q: "Q", K: "K", A: "A" };
const RANK_NAMES = {
  2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six", 7: "Seven", 8: "Eight", 9: "Nine",
  T: "Ten", J: "Jack", Q: "Queen", K: "King", A: "Ace",
};
const SUITS = { c: "clubs", d: "diamonds", h: "hearts", s: "spades" };

// Suit shapes on a 100×100 box (drawn, not font glyphs: every kiosk renders them the same).
const SUIT_PATHS = {
  s: "M50 4 C38 24 8 38 8 62 C8 78 22 88 36 86 C42 85 46 82 48 78 C47 86 43 92 36 96 L64 96 C57 92 53 86 52 78 C54 82 58 85 64 86 C78 88 92 78 92 62 C92 38 62 24 50 4 Z",
  h: "M50 94 C40 80 6 60 6 34 C6 18 18 6 32 6 C41 6 47 11 50 18 C53 11 59 6 68 6 C82 6 94 18 94 34 C94 60 60 80 50 94 Z",
  d: "M50 3 L86 50 L50 97 L14 50 Z",
  c: "M50 6 C38 6 30 15 30 26 C30 33 33 38 37 42 C34 40 30 39 26 39 C15 39 6 48 6 59 C6 70 15 79 26 79 C36 79 43 73 46 66 C45 80 41 89 34 96 L66 96 C59 89 55 80 54 66 C57 73 64 79 74 79 C85 79 94 70 94 59 C94 48 85 39 74 39 C70 39 66 40 63 42 C67 38 70 33 70 26 C70 15 62 6 50 6 Z",
};
const STAR = "M50 4 L62 38 L98 38 L69 59 L80 94 L50 73 L20 94 L31 59 L2 38 L38 38 Z";

export function suitIcon(suit, cls = "suit") {
  return svg("svg", { class: cls, viewBox: "0 0 100 100", "aria-hidden": "true" },
    svg("path", { d: SUIT_PATHS[suit] || STAR }));
}

/** Parse card text ("As", "Td", "JK"); null for anything else (a foreign card "?7f"). */
export function parseCard(text) {
  if (text === "JK") return { joker: true };
  const m = /^([2-9TJQKA])([cdhs])$/.exec(String(text));
  return m ? { rank: m[1], suit: m[2] } : null;
}

export function cardName(text) {
  const c = parseCard(text);
  if (!c) return `unknown card ${text}`;
  if (c.joker) return "Joker";
  return `${RANK_NAMES[c.rank]} of ${SUITS[c.suit]}`;
}

/** A card face: rank and suit in red or black, the joker in its own colours. */
export function cardFace(text, size = "md", extra = {}) {
  const c = parseCard(text);
  const attrs = { ...extra, title: cardName(text), "aria-label": cardName(text), role: "img" };
  if (!c) {
    return el("div", { ...attrs, class: ["card", size, "unknown", extra.class], dataset: { card: text } },
      el("span", { class: "rank", text: "?" }), el("span", { class: "code", text: String(text) }));
  }
  if (c.joker) {
    return el("div", { ...attrs, class: ["card", size, "joker", extra.class], dataset: { card: "JK" } },
      el("span", { class: "rank", text: "JOKER" }), suitIcon("*", "suit star"));
  }
  const colour = c.suit === "h" || c.suit === "d" ? "red" : "black";
  return el("div", { ...attrs, class: ["card", size, colour, extra.class], dataset: { card: text } },
    el("span", { class: "rank", text: RANKS[c.rank] || c.rank }),
    suitIcon(c.suit));
}

export function cardRow(cards, size = "md", cls = "cards") {
  return el("div", { class: cls }, (cards || []).map((c) => cardFace(c, size)));
}

// --- words -------------------------------------------------------------------------------------

export function pays(p) {
  if (p === undefined || p === null) return "";
  if (p > 0) return `${p} to 1`;
  return p === 0 ? "push" : "loses";
}

// The dealer's words for every code (controller/words.py), sent with each snapshot.
let WORDS = {};

/** "three_of_a_kind" → "three of a kind"; never a raw code on the screen. */
export function lineName(code) {
  const c = String(code || "");
  return WORDS[c] || c.replaceAll("_", " ");
}

// A code inside free text (an alarm's detail, a reason, the recall): lower-case words joined by
// underscores, not part of a path or a longer name ("/tmp/pytest_1/shuffler" stays as it is).
const CODE_IN_TEXT = /(?<![\w/-])(command\.)?([a-z0-9]+(?:_[a-z0-9]+)+)(?![\w/-])/g;

/** Free text with every code in it put in words: "(wrong_pin: wrong PIN)" → "(wrong PIN)",
 *  "900 packet_dealt" → "900 packet dealt", "command.void_round" → "command: void round". */
export function wordsIn(text) {
  return String(text ?? "")
    .replace(CODE_IN_TEXT, (_, command, code) => (command ? `command: ${lineName(code)}` : lineName(code)))
    // a code followed by the same words, "(wrong_pin: wrong PIN)": once is enough
    .replace(/\(([^():]+): \1\)/gi, "($1)");
}

/** "three of a kind, nines" → "Three of a kind, nines". */
export function cap(text) {
  const t = String(text || "");
  return t ? t[0].toUpperCase() + t.slice(1) : t;
}

export function positionText(fp, seatOf) {
  if (!fp) return "";
  const who = fp.position === 1 ? "the dealer" : `seat ${seatOf(fp.position)}`;
  let how;
  if (fp.dice) how = `dice ${fp.dice.join(" + ")} = ${fp.dice.reduce((a, b) => a + b, 0)}`;
  else if (fp.method === "software_rng") how = `software RNG drew ${fp.number}`;
  else how = `RNG drew ${fp.number}`;
  const manual = fp.method === "dice_manual" ? " (keyed by the dealer)" : "";
  return { where: `Position ${fp.position} · ${who}`, how: how + manual };
}

export function timeText(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleTimeString([], { hour12: false });
}

export function dateTimeText(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${d.toLocaleDateString()} ${d.toLocaleTimeString([], { hour12: false })}`;
}

// --- the server --------------------------------------------------------------------------------

// A remote supervisor is signed in by an HttpOnly session cookie (the sign-in page sets it): the
// browser sends it with every call and the live stream; the token is never in an address.

/** The session ended (expired, or the controller restarted): load the page again, which is
 *  then the sign-in page. */
function sessionEnded() {
  location.reload();
}

/** fetch JSON from the server. A request with a body is JSON, as the server requires of every
 *  request that changes anything (the browser adds this page's Origin). */
export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  } catch (err) {
    return { ok: false, http: 0, error: "no connection to the table controller" };
  }
  if (response.status === 401) sessionEnded();
  let data = {};
  try { data = await response.json(); } catch { data = {}; }
  return { ...data, ok: response.ok && data.ok !== false, http: response.status, error: data.error || (response.ok ? null : response.statusText) };
}

/** The live stream: ``handlers[event](data)`` for each event; ``onLink(true|false)``. */
// The server sends a heartbeat every 2 s: three missed, and the controller is not responding.
const STALE_MS = 6500;

/** A full-width notice over the page while the controller does not answer (a dead or hung
 *  controller must not look alive: the last round stays on screen, so say it is stale). */
function lostNotice() {
  let node = document.getElementById("controller-lost");
  if (!node) {
    node = el("div", { id: "controller-lost", class: "controller-lost", role: "alert", hidden: true },
      el("b", { text: "CONTROLLER NOT RESPONDING" }),
      el("span", { text: "What this screen shows may be out of date — do not settle from it" }));
    document.body.append(node);
  }
  return node;
}

function setLive(up, onLink) {
  document.body.dataset.controller = up ? "live" : "lost";
  lostNotice().hidden = up;
  onLink(up);
}

export function live(handlers, onLink) {
  const source = new EventSource("/api/events");
  let last = Date.now();
  let up = false;
  const heard = () => {
    last = Date.now();
    if (!up) { up = true; setLive(true, onLink); }
  };
  source.addEventListener("heartbeat", heard);
  setInterval(() => {
    if (up && Date.now() - last > STALE_MS) { up = false; setLive(false, onLink); }
  }, 500);
  for (const [event, handler] of Object.entries(handlers)) {
    source.addEventListener(event, (e) => {
      const data = JSON.parse(e.data);
      if (event === "snapshot" && data.words) WORDS = data.words;
      heard();
      handler(data);
    });
  }
  source.addEventListener("error", () => {
    if (up) { up = false; setLive(false, onLink); }
    // Refused for good (the browser does not retry): ask why; a 401 reloads into the sign-in.
    if (source.readyState === EventSource.CLOSED) api("/api/state");
  });
  return source;
}

export function clock(node) {
  const tick = () => { node.textContent = new Date().toLocaleTimeString([], { hour12: false, hour: "2-digit", minute: "2-digit" }); };
  tick();
  setInterval(tick, 5000);
}

// The table's fault state (tilt): the journal cannot be written, so nothing is settled. Shown
// over everything until the status says online again (docs/faults.md).
export function renderFault(node, status) {
  const fault = status && status.state === "fault" ? status.fault || {} : null;
  node.hidden = !fault;
  if (!fault) return;
  const since = fault.since ? new Date(fault.since) : null;
  fill(node,
    el("div", { class: "fault-title", text: "TABLE FAULT — do not settle by the display" }),
    el("div", { class: "fault-detail", id: "fault-detail", text: `The journal cannot be written: ${fault.detail || "unknown error"}` }),
    el("div", { class: "fault-since", text: since ? `since ${since.toLocaleTimeString()}${fault.events_lost ? ` · ${fault.events_lost} device events not applied` : ""}` : "" }),
    el("div", { class: "fault-help", text: "Call the floor supervisor. Results resume by themselves when the journal works again." }));
}
