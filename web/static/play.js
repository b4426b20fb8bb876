// The play page: a person against the model, through web/play.py's JSON API.
import { Unauthorized, api, askForToken, download, hasToken } from "/static/api.js";
import { drawBoard } from "/static/board.js";

const $ = (id) => document.getElementById(id);
let info = null;
let view = null;
let busy = false; // a request of this page is on its way (the model's reply above all)
let messageTimer = null;

function say(message) {
  const box = $("message");
  box.textContent = message;
  clearTimeout(messageTimer);
  messageTimer = setTimeout(() => { box.textContent = ""; }, 6000);
}

function limits() {
  const bySeconds = document.querySelector("input[name=limit]:checked").value === "seconds";
  if (bySeconds) return { seconds: Number($("seconds").value) };
  return { simulations: Math.round(Number($("simulations").value)) };
}

function render() {
  const thought = view.thought;
  // The shares are of the position before the model's move: drawn while that move is the last.
  const showHeat = $("show-heat").checked && thought && thought.ply === view.moves.length - 1;
  drawBoard($("board"), info, view, {
    share: showHeat ? thought.share : null,
    dead: view.result ? view.result.dead : [],
  });
  const names = info.players;
  const status = $("status");
  status.classList.toggle("thinking", busy && !view.over && view.to_play !== view.person);
  if (view.over) status.textContent = "Game over";
  else if (view.to_play === view.person) status.textContent = `Your move (${names[view.person]})`;
  else status.textContent = `The model (${names[1 - view.person]}) is thinking`;
  status.dataset.state = view.over ? "over" : view.to_play === view.person ? "your-move" : "thinking";

  const result = $("result");
  if (view.result) {
    const r = view.result;
    const who = r.winner === null ? "Draw" : r.winner === view.person ? "You win" : "The model wins";
    result.replaceChildren(r.text === who ? who : `${who}: ${r.text}`);
    const detail = document.createElement("span");
    detail.className = "detail";
    if (info.kind === "go" && r.board_score !== null) {
      detail.textContent = `${r.reason}; area score after taking off the ${r.dead.length} stones marked dead ` +
        `(estimated by random playouts), Tromp-Taylor, komi ${info.komi}; the board as it stands counts ` +
        `${r.board_score}`;
    } else {
      detail.textContent = r.reason;
    }
    result.appendChild(detail);
    result.dataset.winner = r.winner === null ? "draw" : String(r.winner);
    result.hidden = false;
  } else {
    result.hidden = true;
    result.replaceChildren();
    delete result.dataset.winner;
  }

  if (thought) {
    $("expected-score").textContent = thought.expected_score.toFixed(2);
    $("your-score").textContent = (1 - thought.expected_score).toFixed(2);
    $("search-stats").textContent = `before its move ${thought.move}: value ` +
      `${thought.value >= 0 ? "+" : ""}${thought.value.toFixed(3)}, ${thought.visits} visits in ` +
      `${thought.seconds.toFixed(2)} s` +
      (thought.lead === null ? "" : `; its score head: it ${thought.lead >= 0 ? "leads" : "trails"} by ` +
        `${Math.abs(thought.lead).toFixed(1)} ± ${thought.lead_stdev.toFixed(1)} points`);
    $("pv").textContent = $("show-pv").checked && thought.pv.length ? `PV: ${thought.pv.join(" ")}` : "";
  } else {
    $("expected-score").textContent = "–";
    $("your-score").textContent = "–";
    $("search-stats").textContent = "";
    $("pv").textContent = "";
  }

  const moves = $("moves");
  moves.replaceChildren(...view.moves.map((m) => {
    const item = document.createElement("li");
    item.textContent = `${names[m.player][0]} ${m.text}`;
    item.dataset.action = m.action;
    item.dataset.player = m.player;
    return item;
  }));
  moves.scrollTop = moves.scrollHeight;
}

async function reply() {
  if (!view || view.over || view.to_play === view.person) return;
  const id = view.id;
  busy = true;
  render();
  try {
    const answer = await api("POST", `/api/games/${id}/reply`, limits());
    if (view.id === id) view = answer; // a new game started meanwhile keeps its own view
  } catch (error) {
    say(error.message);
  } finally {
    busy = false;
    render();
  }
}

async function act(method, path, body) {
  if (busy) {
    say("Wait: the model is thinking");
    return;
  }
  try {
    view = await api(method, path, body);
  } catch (error) {
    say(error.message); // an illegal move changes nothing but this message
    return;
  }
  $("message").textContent = "";
  render();
  await reply();
}

async function newGame() {
  const person = Number(document.querySelector("input[name=side]:checked").value);
  busy = false;
  view = await api("POST", "/api/games", { person });
  $("message").textContent = "";
  render();
  await reply();
}

function onBoardClick(event) {
  const target = event.target.closest(".target");
  if (!target || !view) return;
  if (view.over) {
    say("The game is over: start a new one");
    return;
  }
  act("POST", `/api/games/${view.id}/play`, { action: Number(target.dataset.action) });
}

async function start() {
  try {
    info = await api("GET", "/api/info");
  } catch (error) {
    if (!(error instanceof Unauthorized)) throw error;
    $("status").textContent = "Waiting for the token.";
    askForToken(hasToken() ? "The token was refused: enter the right one." : "", () => start().catch(failed));
    return;
  }
  $("game-name").textContent = info.game;
  $("checkpoint").textContent = info.checkpoint;
  $("side0").textContent = `play ${info.players[0]} (first)`;
  $("side1").textContent = `play ${info.players[1]} (second)`;
  $("simulations").value = info.simulations;
  $("simulations").max = info.max_visits;
  $("seconds").max = info.max_seconds;
  $("go-buttons").hidden = info.kind !== "go";
  $("board").addEventListener("click", onBoardClick);
  $("new-game").addEventListener("click", newGame);
  $("undo").addEventListener("click", () => view && act("POST", `/api/games/${view.id}/undo`));
  $("pass").addEventListener("click", () => view && act("POST", `/api/games/${view.id}/play`,
    { action: info.pass_action }));
  $("resign").addEventListener("click", () => view && act("POST", `/api/games/${view.id}/resign`));
  $("sgf").addEventListener("click", (event) => {
    event.preventDefault();
    if (view) download(`/api/games/${view.id}/sgf`).catch((error) => say(error.message));
  });
  $("show-heat").addEventListener("change", () => view && render());
  $("show-pv").addEventListener("change", () => view && render());
  await newGame();
}

function failed(error) {
  say(`Cannot start: ${error.message}`);
}

start().catch(failed);
