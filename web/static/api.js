// The pages' one way to their JSON API (web/guard.py is the server's side): the token,
// when the server asks for one, kept for this tab only (sessionStorage); every request
// that changes state declared application/json, the one kind another site cannot send.
const TOKEN_KEY = "tengen-token";

export class Unauthorized extends Error {}

function headers(json) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return {
    ...(token ? { Authorization: `Bearer ${token}` } : {}),
    ...(json ? { "Content-Type": "application/json" } : {}),
  };
}

async function send(method, path, body) {
  const changes = method !== "GET";
  return fetch(path, {
    method,
    headers: headers(changes),
    body: changes ? JSON.stringify(body === undefined ? {} : body) : undefined,
  });
}

// The answer's JSON; Unauthorized for a missing or wrong token, Error with the
// server's message for any other refusal.
export async function api(method, path, body) {
  const response = await send(method, path, body);
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) throw new Unauthorized(data.error || "unauthorized");
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

// A file the API answers with (an SGF), saved under the name the server gives it: a
// link cannot carry the token.
export async function download(path) {
  const response = await send("GET", path);
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    if (response.status === 401) throw new Unauthorized(data.error || "unauthorized");
    throw new Error(data.error || `${response.status} ${response.statusText}`);
  }
  const name = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
  const link = document.createElement("a");
  link.href = URL.createObjectURL(await response.blob());
  link.download = name ? name[1] : "tengen.sgf";
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}

export function hasToken() {
  return sessionStorage.getItem(TOKEN_KEY) !== null;
}

// Shows the page's #token-form with `message`; once a token is entered, keeps it and
// calls `retry`.
export function askForToken(message, retry) {
  const form = document.getElementById("token-form");
  form.hidden = false;
  document.getElementById("token-message").textContent = message;
  form.onsubmit = (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
    document.getElementById("token-message").textContent = "";
    form.hidden = true;
    retry();
  };
}
