// The run page: a running or finished run through web/run_page.py's JSON API,
// polled every POLL_MS without a reload. Plots from plot.js, boards from board.js.
import { Unauthorized, api as request, askForToken as showTokenForm, hasToken } from "/static/api.js";
import { drawBoard, percent } from "/static/board.js";
import { formatNumber, linePlot } from "/static/plot.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 3000;
// A page left open for days keeps at most about this many points per plot: past it,
// every other old point goes.
const MAX_POINTS = 3000;
// Both wirings report every 5 s; a line older than this says the run is not
// reporting (stopped, or a single-process run busy with a long match).
const STALE_S = 30;

let info = null;
let points = [];
let statusNext = null;
let latest = null;
let ladder = [];
let gating = []; // the newest gating results, newest first
let strength = []; // every strength evaluation, oldest first
let gamesSeen = "";
let shown = null; // the game being replayed
let ply = 0;
let polling = null;

const api = (path) => request("GET", path);

function say(message) {
  $("message").textContent = message;
}

// -- time on the x axis -------------------------------------------------------------------
function timeAxis(times) {
  const start = Math.min(...times);
  const span = Math.max(...times) - start;
  const [unit, seconds] = span > 3 * 86400 ? ["days", 86400] : span > 3 * 3600 ? ["hours", 3600]
    : span > 180 ? ["minutes", 60] : ["seconds", 1];
  return { start, unit, seconds, x: (t) => (t - start) / seconds, label: `time since the run started (${unit})`,
    xMin: 0, xMax: span / seconds };
}

function series(name, field, axis, scale = 1) {
  return { name, points: points.filter((p) => p[field] !== undefined && p[field] !== null)
    .map((p) => [axis.x(p.time), p[field] * scale]) };
}

// -- the plots ----------------------------------------------------------------------------
function drawPlots() {
  const times = points.map((p) => p.time).concat(ladder.map((e) => e.time), strength.map((e) => e.time));
  // One time axis for every plot, from the run's start (its initial network's place
  // on the ladder) to its newest status line.
  const axis = times.length ? timeAxis(times) : { x: (t) => t, label: "time since the run started" };
  const span = { xMin: axis.xMin, xMax: axis.xMax };
  const parts = new Set();
  for (const p of points) for (const key of Object.keys(p.losses || {})) if (key !== "learning_rate") parts.add(key);
  const order = ["loss", "policy_loss", "value_loss", "ownership_loss", "l2"];
  const names = [...parts].sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99));
  linePlot($("loss-plot"), {
    ...span, title: "Training loss, by part", xLabel: axis.label, yLabel: "loss (mean over a step's batch)",
    series: names.map((part) => ({ name: part === "loss" ? "total" : part.replace(/_loss$/, "").replace("l2", "L2"),
      points: points.filter((p) => p.losses && p.losses[part] !== undefined).map((p) => [axis.x(p.time),
        p.losses[part]]) })),
    legend: true, empty: "no learner step yet",
  });
  linePlot($("steps-plot"), { ...span, title: "Learner steps", xLabel: axis.label, yLabel: "steps",
    series: [series("steps", "learner_step", axis)], yMin: 0 });
  linePlot($("games-plot"), { ...span, title: "Self-play games per second", xLabel: axis.label, yLabel: "games / s",
    series: [series("games/s", "games_per_s", axis)], yMin: 0 });
  linePlot($("positions-plot"), { ...span, title: "Training positions per second", xLabel: axis.label,
    yLabel: "positions / s", series: [series("positions/s", "positions_per_s", axis)], yMin: 0 });
  linePlot($("evaluations-plot"), { ...span, title: "Network evaluations per second", xLabel: axis.label,
    yLabel: "evaluations / s", series: [series("evaluations/s", "evaluations_per_s", axis)], yMin: 0 });
  linePlot($("batch-plot"), { ...span, title: "Mean inference batch", xLabel: axis.label, yLabel: "positions per batch",
    series: [series("mean batch", "mean_batch", axis)], yMin: 0,
    empty: "not reported yet" });
  linePlot($("window-plot"), { ...span, title: "Replay window fill", xLabel: axis.label, yLabel: "% of its capacity",
    series: [{ name: "fill", points: points.filter((p) => p.window_capacity).map((p) => [axis.x(p.time),
      (100 * p.window) / p.window_capacity]) }], yMin: 0, yMax: 100 });
  linePlot($("ladder-plot"), {
    ...span, title: "Elo ladder: chained candidate-vs-best gating results", xLabel: axis.label, yLabel: "Elo (version 000000 = 0)",
    series: [{ name: "ladder", points: ladder.filter((e) => e.elo !== null).map((e) => [axis.x(e.time), e.elo,
      e]) }],
    steps: true, markers: true, extendTo: latest ? axis.x(latest.time) : undefined,
    label: (p) => `${p[2].id}: Elo ${p[2].elo.toFixed(0)}`, empty: "no promotion yet",
  });
  const references = [...new Set(strength.flatMap((e) => e.scores.map((s) => s.reference)))];
  linePlot($("strength-plot"), {
    ...span, title: "Strength against fixed references (± standard error)", xLabel: axis.label,
    yLabel: "share of positions, or score", yMin: 0, yMax: 1, legend: true, legendAt: "bottom", markers: true,
    series: references.map((reference) => ({ name: reference, points: strength.flatMap((e) => e.scores
      .filter((s) => s.reference === reference && s.value !== null)
      .map((s) => [axis.x(e.time), s.value, s.se, e, s])) })),
    errorBars: (p) => p[2],
    label: (p) => `${p[3].id} at step ${p[3].learner_step}: ${p[4].reference} ${p[1].toFixed(3)} ± ` +
      `${p[2].toFixed(3)} (${p[4].n} ${p[4].measure === "share" ? "positions" : "games"})`,
    empty: "no strength evaluation yet",
  });
  $("history-note").textContent = points.length
    ? `${points.length} status lines shown (a long run's are thinned to about ${formatNumber(1500)} when the page ` +
      `opens); each rate is over the interval since the line before.` : "No status line yet.";
}

// -- the ladder, now, last gating -------------------------------------------------------------
function wdl(r) {
  return `${r.wins}-${r.draws}-${r.losses}`;
}

function signed(x, digits = 0) {
  return `${x >= 0 ? "+" : "−"}${Math.abs(x).toFixed(digits)}`;
}

function drawLadderTable() {
  const rows = ladder.slice().reverse().map((e) => {
    const r = e.result || {};
    const row = document.createElement("tr");
    const cells = r.initial ? [e.id, when(e.time), "the initial network", "", "", "0"]
      : [e.id, when(e.time), r.best_id ?? "",
        r.wins === undefined ? "" : wdl(r),
        r.elo === undefined || r.elo === null ? "" : `${signed(r.elo)} [${signed(r.elo_low)}, ${signed(r.elo_high)}]`,
        e.elo === null ? "" : e.elo.toFixed(0)];
    for (const c of cells) row.appendChild(Object.assign(document.createElement("td"), { textContent: c }));
    row.dataset.version = e.version;
    return row;
  });
  $("ladder-table").querySelector("tbody").replaceChildren(...rows);
  const best = ladder.length ? ladder[ladder.length - 1] : null;
  $("best").textContent = latest ? latest.best : best ? best.id : "–";
  $("promotions").textContent = `(${ladder.length ? ladder.length - 1 : 0} promotions)`;
}

function when(t) {
  return new Date(t * 1000).toLocaleString();
}

function drawNow() {
  const now = $("now");
  if (!latest) {
    now.replaceChildren(Object.assign(document.createElement("dd"), { textContent: "no status line yet" }));
    return;
  }
  const s = latest;
  const items = [
    ["mode", s.mode || "Ray cluster"],
    ["self-play workers", s.target_workers !== undefined && s.target_workers !== s.workers
      ? `${s.workers} (${s.workers_starting ? `${s.workers_starting} starting, ` : ""}asked for ${s.target_workers})`
      : s.workers],
    ["inference servers", s.inference_servers_starting
      ? `${s.inference_servers} (${s.inference_servers_starting} starting)` : s.inference_servers],
    ["games", formatNumber(s.games)],
    ["learner step", s.learner_step],
    ["loss", s.loss === null || s.loss === undefined ? "–" : s.loss],
    ["replay window", `${formatNumber(s.window)} of ${formatNumber(s.window_capacity)} positions`],
    ["games / s", s.games_per_s],
    ["positions / s", s.positions_per_s],
    ["evaluations / s", s.evaluations_per_s],
    ["mean batch", s.mean_batch ?? "–"],
    ["stream length", s.stream_length ?? "–"],
  ];
  if (s.not_started && s.not_started.length) {  // parts that waited past cluster.start_timeout_s
    items.push(["not started", s.not_started.map((p) => `${p.part} (${Math.round(p.waited_s)} s): ${p.why}`).join("; ")]);
  }
  if (s.error) items.push(["stopped by", s.error]);
  now.replaceChildren(...items.flatMap(([k, v]) => [
    Object.assign(document.createElement("dt"), { textContent: k }),
    Object.assign(document.createElement("dd"), { textContent: String(v), id: `now-${k.replace(/[^a-z]+/g, "-")}` }),
  ]));
  const g = s.last_gating;
  $("last-gating").textContent = g ? gatingText(g) : "none yet";
  $("last-gating").classList.toggle("muted", !g);
  $("gating-list").replaceChildren(...(gating.length ? gating.map((m) => Object.assign(document.createElement("li"), {
    textContent: gatingText(m), className: m.decision === "promote" ? "promoted" : "rejected",
  })) : [Object.assign(document.createElement("li"), { textContent: "none yet", className: "muted" })]));
}

function gatingText(g) {
  return `${g.candidate_id} vs ${g.best_id}: ` +
    `${wdl(g)} (W-D-L for the candidate), Elo ${signed(g.elo)} [${signed(g.elo_low)}, ${signed(g.elo_high)}], ` +
    `${g.decision} (by ${g.by})`;
}

function drawLiveness() {
  const box = $("liveness");
  if (!latest) {
    box.textContent = "No status line yet: the run is starting, or never reported.";
    box.dataset.state = "waiting";
    return;
  }
  if (latest.final) {
    box.dataset.state = "finished";
    box.textContent = `Finished: the run wrote its last status line at ${when(latest.time)}` +
      (latest.error ? ` (stopped: ${latest.error})` : "") + ".";
    return;
  }
  const age = Date.now() / 1000 - latest.time;
  const live = age < STALE_S && !latest.error;
  box.dataset.state = live ? "live" : "stopped";
  box.textContent = live ? `Live: the last status line is ${Math.max(0, Math.round(age))} s old; this page follows ` +
    `the run every ${POLL_MS / 1000} s.` : `Not reporting: the last status line is from ${when(latest.time)} (the ` +
    `run has stopped${latest.error ? `: ${latest.error}` : ", or is busy with a long match"}); this page still ` +
    `looks every ${POLL_MS / 1000} s.`;
}

// -- games --------------------------------------------------------------------------------------
function gameItem(g, gating) {
  const item = document.createElement("li");
  const button = document.createElement("button");
  button.type = "button";
  button.className = "game-link";
  button.dataset.key = g.key;
  const who = gating ? `${g.players[0]} vs ${g.players[1]}` : `model ${g.players[0]}`;
  button.textContent = `${who}: ${g.moves} moves, ${g.result}${g.end === "rules" ? "" : ` (${g.end})`}`;
  button.addEventListener("click", () => openGame(g.key));
  item.appendChild(button);
  if (shown && shown.key === g.key) item.classList.add("selected");
  return item;
}

function drawGames(games) {
  $("games-source").textContent = `Self-play games: ${games.note}.`;
  $("games-source").dataset.source = games.source;
  const self = $("selfplay-games");
  self.replaceChildren(...games.selfplay.map((g) => gameItem(g, false)));
  if (!games.selfplay.length) self.replaceChildren(Object.assign(document.createElement("li"),
    { textContent: "none kept yet (run.keep_game_every)", className: "muted" }));
  const gating = $("gating-games");
  gating.replaceChildren(...games.gating.map((g) => gameItem(g, true)));
  if (!games.gating.length) gating.replaceChildren(Object.assign(document.createElement("li"),
    { textContent: "none kept yet", className: "muted" }));
}

async function openGame(key) {
  try {
    shown = await api(`/api/game?key=${encodeURIComponent(key)}`);
  } catch (error) {
    say(error.message);
    return;
  }
  ply = shown.move_list.length;
  $("replay").hidden = false;
  $("ply").max = shown.move_list.length;
  for (const item of document.querySelectorAll(".game-list li")) {
    item.classList.toggle("selected", item.querySelector("button")?.dataset.key === key);
  }
  const who = shown.players[0] === shown.players[1] ? `model ${shown.players[0]} against itself`
    : `${shown.players[0]} (${info.players[0]}) vs ${shown.players[1]} (${info.players[1]})`;
  $("replay-title").textContent = `${who}: ${shown.result}`;
  drawValues();
  drawReplay();
}

function boardAt(i) {
  const flat = shown.boards[i];
  const rows = [];
  for (let r = 0; r < info.rows; r++) rows.push([...flat.slice(r * info.cols, (r + 1) * info.cols)].map(Number));
  return rows;
}

function drawReplay() {
  const moves = shown.move_list;
  const move = ply > 0 ? moves[ply - 1] : null;
  drawBoard($("board"), info, { board: boardAt(ply), last_point: move ? move.point : null });
  $("ply").value = ply;
  const box = $("move-info");
  box.dataset.ply = ply;
  if (!move) {
    box.textContent = `The empty board; ${moves.length} moves follow.`;
    delete box.dataset.value;
    return;
  }
  const mover = info.players[move.player];
  let line = `Move ${ply} of ${moves.length}: ${mover} ${move.text}.`;
  if (move.value !== undefined) {
    line += ` Search value ${signed(move.value, 3)} for ${mover} (expected score ` +
      `${percent((move.value + 1) / 2)}), ${move.visits} visits${move.full ? "" : ", a cheap search"}.`;
    box.dataset.value = move.value;
    box.dataset.visits = move.visits;
  } else {
    line += " No search was recorded for this game (gating games keep their moves only).";
    delete box.dataset.value;
  }
  if (ply === moves.length) line += ` Result: ${shown.result}.`;
  box.textContent = line;
}

function drawValues() {
  const moves = shown.move_list;
  const has = moves.some((m) => m.value !== undefined);
  $("value-plot").hidden = !has;
  if (!has) return;
  // From the first player's view, so the curve reads as the game's course.
  linePlot($("value-plot"), { title: `Search value by move, for ${info.players[0]}`, xLabel: "move",
    yLabel: `value for ${info.players[0]}`, yMin: -1, yMax: 1,
    series: [{ name: "value", points: moves.map((m, i) => [i + 1, m.player === 0 ? m.value : -m.value]) }] });
}

function step(to) {
  if (!shown) return;
  ply = Math.max(0, Math.min(shown.move_list.length, to));
  drawReplay();
}

// -- polling ------------------------------------------------------------------------------------
async function pollStatus() {
  const history = await api(statusNext === null ? "/api/status" : `/api/status?after=${statusNext}`);
  if (history.reset) points = [];
  points.push(...history.points);
  while (points.length > MAX_POINTS) points = points.filter((_, i) => i % 2 === 0 || i >= points.length - 100);
  statusNext = history.next;
  if (history.latest) latest = history.latest;
  return history.more;
}

async function pollLadder() {
  const answer = await api(`/api/ladder?known=${ladder.length}`);
  if (answer.reset) ladder = [];
  ladder.push(...answer.entries);
}

async function pollStrength() {
  const answer = await api(`/api/strength?known=${strength.length}`);
  if (answer.reset) strength = [];
  strength.push(...answer.evaluations);
}

async function pollGating() {
  gating = (await api("/api/gating")).matches;
}

async function pollGames() {
  const games = await api("/api/games");
  const seen = JSON.stringify(games);
  if (seen !== gamesSeen) {
    gamesSeen = seen;
    drawGames(games);
  }
}

async function poll() {
  try {
    let more = await pollStatus();
    while (more) more = await pollStatus();
    await pollLadder();
    await pollStrength();
    await pollGating();
    await pollGames();
    say("");
  } catch (error) {
    if (error instanceof Unauthorized) {
      askForToken("The token was refused: enter the right one.");
      return;
    }
    say(`Cannot read the run: ${error.message} (trying again)`);
  }
  drawLiveness();
  drawNow();
  drawLadderTable();
  drawPlots();
  document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
}

function askForToken(message) {
  clearInterval(polling);
  polling = null;
  $("run").hidden = true;
  $("liveness").textContent = "Waiting for the token.";
  showTokenForm(message, () => start().catch((error) => say(`Cannot start: ${error.message}`)));
}

async function start() {
  try {
    info = await api("/api/info");
  } catch (error) {
    if (error instanceof Unauthorized) {
      askForToken(hasToken() ? "The token was refused: enter the right one." : "");
      return;
    }
    throw error;
  }
  $("token-form").hidden = true;
  $("run").hidden = false;
  $("run-id").textContent = info.run_id;
  $("game-name").textContent = info.game;
  $("run-dir").textContent = info.run_dir;
  const c = info.config;
  $("settings").textContent = `${c.network}, ${c.simulations} simulations (${c.search}), gating: ${c.gating}, ` +
    `replay window ${formatNumber(c.replay_window)}, ` +
    `${c.keep_game_every ? `1 in ${c.keep_game_every} self-play games kept` : "no self-play games kept"}, ` +
    (c.redis === "none" ? "no Redis (single-process)" : `${c.redis} Redis`);
  await poll();
  polling = setInterval(poll, POLL_MS);
}

function setUp() {
  $("first").addEventListener("click", () => step(0));
  $("prev").addEventListener("click", () => step(ply - 1));
  $("next").addEventListener("click", () => step(ply + 1));
  $("last").addEventListener("click", () => step(Infinity));
  $("ply").addEventListener("input", () => step(Number($("ply").value)));
  document.addEventListener("keydown", (event) => {
    if (!shown || event.target.tagName === "INPUT") return;
    if (event.key === "ArrowLeft") step(ply - 1);
    if (event.key === "ArrowRight") step(ply + 1);
  });
  start().catch((error) => say(`Cannot start: ${error.message}`));
}

setUp();
