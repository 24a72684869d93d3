// The chat page: join with a name, then the room's history and each new entry over a WebSocket.
// Every entry carries its position on the room stream: its id, increasing, never repeated.
"use strict";

const messages = document.getElementById("messages");
const status = document.getElementById("status");
const error = document.getElementById("error");
const who = document.getElementById("who");
const say = document.getElementById("say");
const userInput = document.getElementById("user");
const textInput = document.getElementById("text");
let socket = null;
let retryMs = 1000;
let rejoining = false; // dropped after joining: joining again until it works

function show(entry) {
  const item = document.createElement("li");
  item.dataset.position = entry.position;
  const at = document.createElement("span");
  at.className = "at";
  at.textContent = new Date(entry.at).toLocaleTimeString();
  const user = document.createElement("span");
  user.className = "user";
  user.textContent = entry.user;
  const server = document.createElement("span");
  server.className = "server";
  server.textContent = " via " + entry.server;
  const text = document.createElement("span");
  text.className = "text";
  text.textContent = ": " + entry.text;
  item.append(at, user, text, server);
  messages.append(item);
  messages.scrollTop = messages.scrollHeight;
}

function join(user) {
  const url = new URL("/ws", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  url.searchParams.set("user", user);
  socket = new WebSocket(url);
  socket.onmessage = (event) => {
    const message = JSON.parse(event.data);
    if (message.type === "history") {
      messages.replaceChildren();
      message.entries.forEach(show);
      status.textContent = `${user} on ${message.server}: ${message.entries.length} earlier`;
      status.dataset.state = "joined";
      rejoining = false;
      who.hidden = true;
      say.hidden = false;
      textInput.focus();
    } else if (message.type === "entry") {
      show(message.entry);
    } else if (message.type === "error") {
      error.textContent = message.message;
    }
  };
  socket.onclose = (event) => {
    const joined = status.dataset.state === "joined";
    status.dataset.state = "closed";
    if (!joined && !rejoining) {
      status.textContent = "disconnected";
      return;
    }
    // Dropped (too far behind the room, or the server went away): join again, which brings
    // the history afresh, after a pause that grows while it fails.
    rejoining = true;
    status.textContent = `disconnected (${event.reason || event.code}): joining again…`;
    setTimeout(() => join(user), retryMs);
    retryMs = Math.min(retryMs * 2, 10000);
  };
  socket.onopen = () => {
    retryMs = 1000;
  };
}

who.addEventListener("submit", (event) => {
  event.preventDefault();
  join(userInput.value);
});

say.addEventListener("submit", (event) => {
  event.preventDefault();
  if (socket === null || socket.readyState !== WebSocket.OPEN) {
    // A closed socket throws what it is given away: the line stays in the box to send again.
    error.textContent = rejoining
      ? "not sent: not connected (joining again); send it once joined"
      : "not sent: not connected";
    return;
  }
  error.textContent = "";
  socket.send(JSON.stringify({ text: textInput.value }));
  textInput.value = "";
});

const named = new URLSearchParams(location.search).get("user");
if (named) {
  userInput.value = named;
  join(named);
} else {
  status.textContent = "choose a name";
}
