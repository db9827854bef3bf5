// The sign-in page: the supervisor token goes to the server in a JSON body (never in the address,
// where histories, bookmarks and proxies keep it); the answer sets an HttpOnly session cookie and
// the page the supervisor asked for is loaded again, now with the session.

const form = document.getElementById("login-form");
const input = document.getElementById("login-token");
const note = document.getElementById("login-note");

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  note.textContent = "…";
  let response;
  try {
    response = await fetch("/api/login", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ token: input.value }),
      cache: "no-store",
    });
  } catch {
    note.textContent = "no connection to the table controller";
    return;
  }
  input.value = "";
  if (response.ok) {
    location.reload();
    return;
  }
  let data = {};
  try { data = await response.json(); } catch { data = {}; }
  note.textContent = data.error || response.statusText || "refused";
});

input.focus();
