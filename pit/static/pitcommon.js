// What the pit's pages share: escaping, and every time shown in the pit's zone ([shift]
// timezone) with the zone named, by the pit's clock (its "at", not the browser's).
export const $ = (id) => document.getElementById(id);
export const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));

let zone = "UTC";
let skew = 0;  // the pit's clock minus the browser's, ms

export function setZone(tz) {
  try { new Intl.DateTimeFormat("en-GB", {timeZone: tz}); zone = tz || "UTC"; } catch { zone = "UTC"; }
}
export function pitClock(at) { if (at) skew = at * 1000 - Date.now(); }
export function pitNow() { return (Date.now() + skew) / 1000; }
export function zoneName() { return zone; }

function parts(seconds, withDate) {
  const opts = {timeZone: zone, hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short"};
  if (withDate) Object.assign(opts, {year: "numeric", month: "2-digit", day: "2-digit"});
  const p = Object.fromEntries(new Intl.DateTimeFormat("en-US", opts).formatToParts(new Date(seconds * 1000)).map((x) => [x.type, x.value]));
  const time = `${p.hour}:${p.minute}:${p.second} ${p.timeZoneName}`;
  return withDate ? `${p.year}-${p.month}-${p.day} ${time}` : time;
}
/** "14:03:09 PST": epoch seconds or an ISO string, in the pit's zone, the zone named. */
export function timeAt(when) {
  if (when == null || when === "") return "—";
  const s = typeof when === "number" ? when : Date.parse(when) / 1000;
  return Number.isFinite(s) ? parts(s, false) : "—";
}
export function dateTimeAt(when) {
  if (when == null || when === "") return "—";
  const s = typeof when === "number" ? when : Date.parse(when) / 1000;
  return Number.isFinite(s) ? parts(s, true) : "—";
}
/** "5 s ago", "3 min ago", "2 h ago", by the pit's clock. */
export function ago(at) {
  if (at == null || at === "") return "never";
  const s = Math.max(0, Math.round(pitNow() - Number(at)));
  return s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
}
