// CodeFleet's web dashboard: live over the event stream. It only reads, but for
// a person's two actions (person.js): tell a task something, answer a question.
//
// Each (re)connect: GET /health (the server clock; a record other than the one
// shown, after `runs new` and a fresh `serve`, reloads the page), then the events after the
// last id held through GET /events, then GET /state (the snapshot, at least as
// recent as those events), /conflicts, /graph and /stats; paint that, then read
// /events/stream?since=<last id read> and fold every event into the model. So
// the first paint needs only plain JSON reads (a headless screenshot's virtual
// time waits for those, not for the stream), and nothing is missed or counted
// twice across the switch or a dropped stream; the same code replays a
// finished run. The snapshot and the conflicts are re-read shortly after
// events that change what only the server knows (tokens, cost, resolution of a
// conflict).

import { Api, AuthError, saveToken, takeToken } from "./api.js";
import { describeAnalysis, renderGraph } from "./graph.js";
import { describeEvent, EventLog } from "./log.js";
import { Model } from "./model.js";
import { renderConflicts, renderContention, renderCost, renderLanding, renderLandingHalt, renderLeases, renderPause, renderStats, renderStory } from "./panels.js";
import { PatchView } from "./patch.js";
import { PersonView, QUESTION_EVENTS } from "./person.js";
import { Timeline } from "./timeline.js";
import { Tooltip } from "./tooltip.js";
import { shown } from "./util.js";

const STATE_AFTER = new Set([
  "task_created", "task_succeeded", "task_failed", "task_requeued", "task_cancelled", "task_retried",
  "agent_registered", "agent_offline", "fleet_idle", "run_finished", "fleet_paused", "fleet_resumed",
  "fleet_budget_set", "fleet_budget_exhausted", "fleet_started", "landing_queued", "integration_failed",
  "repair_started",
]);
// `codefleet stats`' figures change when an attempt ends, a write is refused or a run ends.
const STATS_AFTER = new Set([
  "task_succeeded", "task_failed", "task_requeued", "task_cancelled", "lease_denied", "file_restored",
  "fleet_resumed", "run_finished",
]);
const CONFLICTS_AFTER = new Set(["lease_denied", "task_succeeded", "task_failed", "task_retried"]);
// The graph's analysis changes when tasks arrive or a veto widens a task's scope.
const GRAPH_AFTER = new Set(["task_created", "task_requeued", "task_retried"]);
const CONN_TEXT = {
  connecting: "Connecting…",
  loaded: "Loaded", // read up to now through JSON; the stream is opening
  live: "Live",
  offline: "Disconnected · retrying",
  auth: "Token needed",
};
const RUN_TEXT = { idle: "waiting for a fleet", running: "running", finishing: "drained, finishing", finished: "finished" };

const $ = (selector) => document.querySelector(selector);

const model = new Model();
const tooltip = new Tooltip();
let api = new Api(takeToken());
let stats = null; // GET /stats: the contention analytics
let conn = "connecting";
let selected = null;
let clockOffset = 0;
let database = null; // the `database_id` of the record this page shows
let frame = 0;
let analysis = null; // GET /graph: `graph check`'s analysis of the stored graph

const timeline = new Timeline($("#timeline-view"), { tooltip, onSelect: select });
const log = new EventLog($("#log-view"));
const patchView = new PatchView($("#patch-view"), () => api);
patchView.onChange = requestRender;
const personView = new PersonView($("#tell"), $("#questions-view"), () => api);
personView.onChange = requestRender;
log.onChange = requestRender;
log.onClearSelection = () => select(null);

function now() {
  return Date.now() + clockOffset;
}

function select(taskId) {
  selected = taskId && taskId !== selected ? taskId : null;
  requestRender();
}

function requestRender() {
  if (!frame) frame = requestAnimationFrame(render);
}

/** Draw now, not on the next frame (a headless screenshot's budget can run out before one). */
function renderNow() {
  if (frame) cancelAnimationFrame(frame);
  render();
}

function render() {
  frame = 0;
  const view = { model, now: now(), live: conn === "live", selected, asking: personView.asking() };
  const run = model.runState();
  document.body.dataset.conn = conn;
  document.body.dataset.run = run;
  document.body.dataset.lastEvent = String(model.lastId);
  const caughtUp = conn === "live" || conn === "loaded";
  $("#conn").textContent = caughtUp ? `${CONN_TEXT[conn]} · ${RUN_TEXT[run]}` : CONN_TEXT[conn];
  $("#conn").className = `pill conn-${conn} run-${run}`;
  renderStats($("#stats"), view);
  renderStory($("#story"), view);
  renderPause($("#pause"), view);
  renderLandingHalt($("#landing-halt"), view, describeEvent);
  timeline.render(view);
  const hasTasks = renderGraph($("#graph-view"), view, { tooltip, onSelect: select });
  $("#graph-empty").hidden = hasTasks;
  $("#graph-analysis").textContent = shown(describeAnalysis(analysis));
  $("#graph-analysis").hidden = !hasTasks || !analysis;
  renderLanding($("#landing-view"), view);
  renderLeases($("#leases-view"), view);
  renderConflicts($("#conflicts-view"), view);
  renderContention($("#contention-view"), stats);
  renderCost($("#cost-view"), view);
  patchView.render(view);
  personView.render(view);
  log.render(view);
}

/** Run `fn` at most once per `wait` ms, and always once after the last call. */
function throttled(fn, wait) {
  let timer = 0;
  return () => {
    if (timer) return;
    timer = setTimeout(async () => {
      timer = 0;
      await fn();
    }, wait);
  };
}

async function readSnapshot() {
  model.setSnapshot(await api.get("/state"));
}

async function readConflicts() {
  model.conflicts = (await api.get("/conflicts")).conflicts;
}

async function readStats() {
  stats = await api.get("/stats");
}

async function readGraph() {
  analysis = await api.get("/graph");
}

function quietly(read) {
  return async () => {
    try {
      await read();
      requestRender();
    } catch (err) {
      if (err instanceof AuthError) askForToken();
      // else: the stream loop notices a dead server and reconnects; nothing to do here
    }
  };
}

const refreshState = throttled(quietly(readSnapshot), 250);
const refreshConflicts = throttled(quietly(readConflicts), 250);
const refreshGraph = throttled(quietly(readGraph), 500);
const refreshStats = throttled(quietly(readStats), 500);
const refreshQuestions = throttled(quietly(() => personView.read()), 100);

function onEvents(batch) {
  const fresh = model.add(batch);
  if (fresh.some((e) => STATE_AFTER.has(e.type))) refreshState();
  if (fresh.some((e) => CONFLICTS_AFTER.has(e.type))) refreshConflicts();
  if (fresh.some((e) => GRAPH_AFTER.has(e.type))) refreshGraph();
  if (fresh.some((e) => STATS_AFTER.has(e.type))) refreshStats();
  if (fresh.some((e) => QUESTION_EVENTS.has(e.type))) refreshQuestions();
  if (fresh.length) requestRender();
}

function setConn(value) {
  conn = value;
  requestRender();
}

const sleep = (millis) => new Promise((resolve) => setTimeout(resolve, millis));

async function connect() {
  let delay = 500;
  for (;;) {
    try {
      const health = await api.get("/health");
      // another record behind the same address (`runs new`, a fresh `serve`): start over on it
      if (database && health.database_id !== database) return window.location.reload();
      database = health.database_id;
      clockOffset = Date.parse(health.server_time) - Date.now();
      model.add(await api.eventsAfter(model.lastId));
      await readSnapshot();
      await readConflicts();
      await readGraph();
      await readStats();
      await personView.read();
      conn = "loaded";
      renderNow();
      await api.stream(model.lastId, {
        onOpen: () => {
          delay = 500;
          setConn("live");
        },
        onEvents,
      });
    } catch (err) {
      if (err instanceof AuthError) return askForToken();
    }
    setConn("offline");
    await sleep(delay);
    delay = Math.min(delay * 2, 5000);
  }
}

function askForToken() {
  setConn("auth");
  const form = $("#auth");
  form.hidden = false;
  $("#token-input").focus();
}

$("#auth").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("#token-input").value.trim();
  if (!token) return;
  saveToken(token);
  api = new Api(token);
  $("#auth").hidden = true;
  setConn("connecting");
  connect();
});

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape") {
    tooltip.hide();
    if (selected) select(null);
  }
});

window.addEventListener("resize", requestRender);
setInterval(() => {
  if (conn === "live" && (model.history.open.size || model.live.leases.size || model.live.pause || model.history.landing.queue.size)) requestRender();
}, 1000);

connect();
