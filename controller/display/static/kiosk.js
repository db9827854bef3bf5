// The kiosk's start (docs/display.md, "The kiosk's credential"). The launcher (paigow-table kiosk)
// sent the browser here with a one-time ticket after '#': a fragment is never sent to the server
// and never in a log. The page takes it out of the address, spends it (the answer sets the kiosk's
// HttpOnly cookie) and goes on to the dealer page. Without a ticket, or when it is refused, the
// dealer page comes up all the same (without the kiosk's preference under a flood), once the
// reason has been shown.

const note = document.getElementById("kiosk-note");
let ticket = "";
try { ticket = decodeURIComponent(location.hash.slice(1)); } catch { ticket = ""; }
history.replaceState(null, "", "/kiosk");

function dealerPage(delayMs) {
  setTimeout(() => location.replace("/dealer"), delayMs);
}

function without(reason) {
  note.textContent = `${reason}: the dealer page starts without the kiosk's credential`;
  document.body.dataset.kiosk = "refused";
  dealerPage(5000);
}

async function start() {
  if (!ticket) { dealerPage(0); return; }
  let response;
  try {
    response = await fetch("/api/kiosk", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ ticket }),
      cache: "no-store",
    });
  } catch {
    without("no connection to the table controller");
    return;
  }
  ticket = "";
  if (response.ok) { dealerPage(0); return; }
  let data = {};
  try { data = await response.json(); } catch { data = {}; }
  without(data.error || response.statusText || "refused");
}

start();
