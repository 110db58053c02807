// The dashboard's data, folded from the event log. No DOM here.
//
// Two folds over the same ordered events:
//   - history: every event since id 0 builds the timeline (one attempt per
//     task_assigned, closed by task_succeeded / task_failed / task_requeued /
//     task_cancelled / repair_started (a landing break its session repairs:
//     "repaired"), or by landing_queued: its runner is free while the task
//     waits to land, and the event that settles the task gives the attempt its
//     outcome), the vetoes (lease_denied), the rollbacks (file_restored),
//     per-file contention, landing (the queue, the checks, each landing's order,
//     the integration breaks, a halt) and the log. It never needs a snapshot.
//   - live: the current tasks, runners and leases are the last `/state`
//     snapshot plus the events after its `last_event_id`, so a snapshot taken
//     at any moment and the stream never disagree or count an event twice.
//
// The raw events are kept in a bounded window (the newest `maxEvents`, for the
// log): the folds above already hold what the timeline and counters need, so
// only events the last snapshot has seen (id <= its last_event_id) are dropped;
// `eventCount` still counts every event.

export const TERMINAL = new Set(["succeeded", "failed", "blocked_upstream", "cancelled"]);
export const IN_FLIGHT = new Set(["assigned", "running", "landing"]);

export const MAX_EVENTS = 10_000;
// The one lane the runners of earlier runs fold into (the server calls them `earlier`).
export const EARLIER_LANE = "earlier-runners";

export function ms(iso) {
  return iso ? Date.parse(iso) : NaN;
}

/** Landing as the events tell it (review/landinglog.py derives the same for the report). */
function emptyLanding() {
  return {
    queue: new Map(), // task id -> {at, attempt, position, checks}: waiting to land, in queue order
    waiting: new Map(), // task id -> its attempt ended at landing_queued, outcome not known yet
    checks: [], // {step, check, batch, purpose, base, start, end, verdict}
    landed: [], // {task, order, at, queuedAt, checks}
    orders: new Map(), // task id -> landing order number
    breaks: [], // {task, attempt, at, check, conflictsWith, blamed, tail}
    halts: [], // {at, check, lastLanded, tail, resumedAt, reason, body: the event's payload}
    seen: false,
  };
}

function emptyHistory() {
  return {
    lanes: new Map(), // agent id -> {id, name}
    attempts: [], // in order of assignment
    open: new Map(), // task id -> its open attempt
    latest: new Map(), // task id -> its latest attempt, open or ended (restores follow the end)
    vetoes: [],
    restores: [], // file_restored: the attempt's edits undone before its leases went
    files: new Map(), // path -> {path, tasks: [task ids in lease order], denials}
    titles: new Map(), // task id -> title (from task_created)
    typeCounts: new Map(),
    fleetStarts: [],
    idles: [],
    finished: null, // the last run_finished: {at, payload}
    landing: emptyLanding(),
    runs: { closed: 0, start: NaN, last: NaN }, // the runs' spans (describe.js runWall)
    first: NaN,
    last: NaN,
  };
}

export class Model {
  constructor({ maxEvents = MAX_EVENTS } = {}) {
    this.maxEvents = maxEvents;
    this.events = [];
    this.eventCount = 0;
    this.lastId = 0;
    this.snapshot = null;
    this.conflicts = [];
    this.history = emptyHistory();
    this.live = { tasks: new Map(), agents: new Map(), leases: new Map(), pause: null, budget: null };
  }

  /** Append events in id order; returns those that were new. */
  add(batch) {
    const fresh = [];
    for (const event of batch) {
      if (event.id <= this.lastId) continue;
      this.lastId = event.id;
      this.events.push(event);
      this.eventCount += 1;
      foldHistory(this.history, event);
      if (this.snapshot && event.id > this.snapshot.last_event_id) foldLive(this.live, event);
      fresh.push(event);
    }
    this.trim();
    return fresh;
  }

  /** Drop the oldest events past the window, never one a later setSnapshot still needs. */
  trim() {
    const excess = this.events.length - this.maxEvents;
    if (excess <= 0 || !this.snapshot) return;
    const seen = this.snapshot.last_event_id;
    let drop = 0;
    while (drop < excess && this.events[drop].id <= seen) drop += 1;
    if (drop) this.events.splice(0, drop);
  }

  /** A `/state` answer: the live view becomes it plus every later event we hold. */
  setSnapshot(state) {
    this.snapshot = state;
    this.live = {
      tasks: new Map(state.tasks.map((t) => [t.id, { ...t }])),
      agents: new Map(state.agents.map((a) => [a.id, { ...a }])),
      leases: new Map(state.leases.map((l) => [l.path, { ...l }])),
      pause: state.pause ?? null, // a usage limit: {since, until, reason, task_id}
      budget: state.budget ?? null, // {max_cost_usd, hard, spent_usd, exhausted, simulated}
    };
    for (const event of this.events) {
      if (event.id > state.last_event_id) foldLive(this.live, event);
    }
    this.trim();
  }

  laneName(agentId) {
    return (
      this.history.lanes.get(agentId)?.name ?? this.live.agents.get(agentId)?.name ?? agentId ?? "?"
    );
  }

  title(taskId) {
    return this.live.tasks.get(taskId)?.title ?? this.history.titles.get(taskId) ?? "";
  }

  /** Ordered lanes: this run's runners (every one that registered or holds an attempt), by
   * name, then one lane `{id: EARLIER_LANE, name, members}` for the runners of earlier runs. */
  lanes() {
    const lanes = new Map(this.history.lanes);
    for (const agent of this.live.agents.values()) {
      if (!lanes.has(agent.id)) lanes.set(agent.id, { id: agent.id, name: agent.name });
    }
    const sorted = [...lanes.values()].sort((a, b) => naturalCompare(a.name, b.name));
    const earlier = sorted.filter((lane) => this.live.agents.get(lane.id)?.earlier);
    const current = sorted.filter((lane) => !this.live.agents.get(lane.id)?.earlier);
    if (!earlier.length) return current;
    const name = `${earlier.length} earlier runner${earlier.length > 1 ? "s" : ""}`;
    return [...current, { id: EARLIER_LANE, name, members: earlier.map((lane) => lane.id) }];
  }

  /** This run's runners: the lanes but the folded one. */
  runnerCount() {
    return this.lanes().filter((lane) => !lane.members).length;
  }

  attemptsOf(taskId) {
    return this.history.attempts.filter((a) => a.task === taskId);
  }

  /** idle (no fleet yet) | running | finishing (drained, verify running) | finished. */
  runState() {
    const h = this.history;
    const lastStart = h.fleetStarts.at(-1);
    if (h.finished && (lastStart === undefined || h.finished.at >= lastStart)) return "finished";
    const tasks = [...this.live.tasks.values()];
    if (h.open.size > 0 || tasks.some((t) => IN_FLIGHT.has(t.status))) return "running";
    if (lastStart !== undefined) {
      const idle = h.idles.at(-1);
      return idle !== undefined && idle >= lastStart ? "finishing" : "running";
    }
    return tasks.length && tasks.every((t) => TERMINAL.has(t.status)) ? "finished" : "idle";
  }
}

function attemptFor(h, event) {
  return h.open.get(event.task_id) ?? null;
}

function close(h, event, outcome, extra) {
  const attempt = attemptFor(h, event);
  if (!attempt) return settle(h, event, outcome, extra);
  Object.assign(attempt, { end: ms(event.at), outcome, endEvent: event.id }, extra);
  h.open.delete(event.task_id);
}

/** An attempt that ended when its task began to wait to land takes the outcome that settles it. */
function settle(h, event, outcome, extra) {
  const attempt = h.landing.waiting.get(event.task_id);
  if (!attempt || outcome === "interrupted") return;
  Object.assign(attempt, { outcome, settledEvent: event.id }, extra);
  h.landing.waiting.delete(event.task_id);
}

function leaveQueue(l, taskId) {
  l.queue.delete(taskId);
}

function foldLanding(h, event, at, body) {
  const l = h.landing;
  const same = (c) => c.step === body.step && c.check === body.check && String(c.batch) === String(body.batch ?? []);
  switch (event.type) {
    case "landing_queued": {
      const attempt = attemptFor(h, event);
      if (attempt) {
        Object.assign(attempt, { end: at, outcome: "landing", endEvent: event.id });
        h.open.delete(event.task_id);
        l.waiting.set(event.task_id, attempt);
      }
      l.queue.delete(event.task_id);
      l.queue.set(event.task_id, { at, attempt: body.attempt, position: body.position ?? null, checks: body.checks ?? [] });
      break;
    }
    case "landing_check_started": {
      // one of the same key that never finished was interrupted (a restart runs it again)
      const stale = l.checks.findLastIndex((c) => c.verdict === null && same(c));
      if (stale >= 0) l.checks.splice(stale, 1);
      l.checks.push({ step: body.step, check: body.check ?? "", batch: body.batch ?? [], purpose: body.purpose ?? "batch", base: body.base ?? 0, start: at, end: NaN, verdict: null });
      break;
    }
    case "landing_check_finished": {
      const open = l.checks.findLast((c) => c.verdict === null && same(c));
      const check = open ?? { step: body.step, check: body.check ?? "", batch: body.batch ?? [], purpose: body.purpose ?? "batch", base: body.base ?? 0, start: at };
      Object.assign(check, { end: at, verdict: body.verdict ?? "did_not_run", durationMs: body.duration_ms ?? null, tail: body.output_tail ?? "" });
      if (!open) l.checks.push(check);
      break;
    }
    case "landed":
      l.landed.push({ task: event.task_id, order: body.order, at, queuedAt: l.queue.get(event.task_id)?.at ?? NaN, checks: body.checks ?? [] });
      if (Number.isFinite(body.order)) l.orders.set(event.task_id, body.order);
      leaveQueue(l, event.task_id);
      break;
    case "repair_started":
      if (body.cause === "integration") leaveQueue(l, event.task_id);
      return;
    case "integration_failed":
      l.breaks.push({ task: event.task_id, attempt: body.attempt, at, check: body.check ?? "", conflictsWith: body.conflicts_with ?? [], blamed: body.blamed ?? [], tail: body.output_tail ?? "" });
      leaveQueue(l, event.task_id);
      break;
    case "landing_halted":
      l.halts.push({ at, check: body.check ?? "", lastLanded: body.last_landed ?? null, tail: body.output_tail ?? "", resumedAt: NaN, reason: "", body });
      break;
    case "landing_resumed": {
      const halt = l.halts.at(-1);
      if (halt && !Number.isFinite(halt.resumedAt)) Object.assign(halt, { resumedAt: at, reason: body.reason ?? "" });
      break;
    }
    case "task_succeeded":
      if (Number.isFinite(body.order)) l.orders.set(event.task_id, body.order);
      leaveQueue(l, event.task_id);
      return;
    case "task_requeued":
    case "task_failed":
    case "task_cancelled":
      leaveQueue(l, event.task_id);
      return;
    default:
      return;
  }
  l.seen = true;
}

/** The landing check under way (the latest started; `runningAll`: every one, steps run in
 * parallel), the halt in force (null when none), the last landing order. */
export function landingNow(model) {
  const l = model.history.landing;
  const halt = l.halts.at(-1);
  return {
    running: l.checks.findLast((c) => c.verdict === null) ?? null,
    runningAll: l.checks.filter((c) => c.verdict === null),
    halted: halt && !Number.isFinite(halt.resumedAt) ? halt : null,
    lastOrder: Math.max(0, ...l.orders.values()),
  };
}

function fileEntry(h, path) {
  let entry = h.files.get(path);
  if (!entry) {
    entry = { path, tasks: [], denials: 0 };
    h.files.set(path, entry);
  }
  return entry;
}

/** A run spans its fleet_started to its run_finished (a run that died: to its last event). */
function foldRunSpan(runs, type, at) {
  if (type === "fleet_started") {
    if (Number.isFinite(runs.start)) runs.closed += Math.max(0, runs.last - runs.start);
    runs.start = at;
    runs.last = at;
  } else if (Number.isFinite(runs.start)) {
    runs.last = at;
    if (type === "run_finished") {
      runs.closed += Math.max(0, at - runs.start);
      runs.start = NaN;
    }
  }
}

function foldHistory(h, event) {
  const at = ms(event.at);
  const body = event.payload ?? {};
  if (Number.isNaN(h.first)) h.first = at;
  h.last = at;
  h.typeCounts.set(event.type, (h.typeCounts.get(event.type) ?? 0) + 1);
  foldRunSpan(h.runs, event.type, at);
  foldLanding(h, event, at, body);
  switch (event.type) {
    case "task_created":
      h.titles.set(event.task_id, body.title ?? "");
      break;
    case "agent_registered":
    case "agent_online":
      h.lanes.set(event.agent_id, { id: event.agent_id, name: body.name ?? event.agent_id });
      break;
    case "task_assigned": {
      close(h, event, "interrupted", {});
      h.landing.waiting.delete(event.task_id);
      if (!h.lanes.has(event.agent_id)) {
        h.lanes.set(event.agent_id, { id: event.agent_id, name: body.agent_name ?? event.agent_id });
      }
      const attempt = {
        key: `${event.task_id}#${body.attempt}#${event.id}`,
        task: event.task_id,
        n: body.attempt,
        agent: event.agent_id,
        start: at,
        started: NaN,
        end: NaN,
        outcome: "running",
        files: [],
        changes: 0,
        vetoes: [],
        restored: [],
        checks: [],
        commands: [],
        stale: [], // stale_read events of this attempt: { at, paths, outcome (set by reconciled) }
        waits: [], // lease_waited events of this attempt: { from, to, path, holder, holderAgent, outcome }
      };
      h.attempts.push(attempt);
      h.open.set(event.task_id, attempt);
      h.latest.set(event.task_id, attempt);
      break;
    }
    case "task_started": {
      const attempt = attemptFor(h, event);
      if (attempt) attempt.started = at;
      break;
    }
    case "lease_acquired": {
      attemptFor(h, event)?.files.push(body.path);
      const entry = fileEntry(h, body.path);
      if (entry.tasks.at(-1) !== event.task_id) entry.tasks.push(event.task_id);
      break;
    }
    case "file_changed": {
      const attempt = attemptFor(h, event);
      if (attempt) attempt.changes += 1;
      break;
    }
    case "lease_denied": {
      fileEntry(h, body.path).denials += 1;
      // A person's own session has no lane: its refusal is in the log and the lease map only.
      if (body.kind === "interactive") break;
      const veto = {
        id: event.id,
        at,
        task: event.task_id,
        agent: event.agent_id,
        path: body.path,
        tool: body.tool,
        holderAgent: body.holder_agent_id,
        holderName: body.holder_agent_name,
        holderTask: body.holder_task_id,
        attempt: attemptFor(h, event),
      };
      h.vetoes.push(veto);
      veto.attempt?.vetoes.push(veto);
      break;
    }
    case "file_restored": {
      // A failed attempt's files are put back after the event that ended it (a restore
      // commits on its own, after the file I/O): it belongs to the task's latest attempt.
      const restore = { id: event.id, at, task: event.task_id, path: body.path, existed: body.existed !== false };
      const attempt = attemptFor(h, event) ?? h.latest.get(event.task_id) ?? null;
      restore.attempt = attempt;
      h.restores.push(restore);
      attempt?.restored.push(restore);
      break;
    }
    case "stale_read":
      attemptFor(h, event)?.stale.push({ at, paths: (body.paths ?? []).map((p) => ({ path: p.path, by: p.changed_by ?? [], gone: p.now_sha256 == null })), outcome: null });
      break;
    case "lease_waited": {
      const waited = Number(body.waited_s ?? 0) * 1000;
      const holder = body.holder_task_id ?? null;
      // The holder's lane, for the arrow: its attempt may have ended just before the grant.
      const holderAgent = (h.open.get(holder) ?? h.latest.get(holder))?.agent ?? null;
      attemptFor(h, event)?.waits.push({ from: at - waited, to: at, path: body.path, holder, holderAgent, outcome: body.outcome ?? "" });
      break;
    }
    case "reconciled":
      for (const mark of attemptFor(h, event)?.stale ?? []) mark.outcome = body.outcome ?? null;
      break;
    case "check_finished":
      attemptFor(h, event)?.checks.push({ at, name: body.name, passed: body.passed === true, exitCode: body.exit_code, timedOut: body.timed_out === true });
      break;
    case "command_finished":
      attemptFor(h, event)?.commands.push({ at, command: body.command ?? "", exitCode: body.exit_code ?? null, timedOut: body.timed_out === true, applied: body.applied ?? [], deniedOn: body.denied_on ?? null });
      break;
    case "task_succeeded":
      close(h, event, "succeeded", { cost: body.cost_usd ?? 0, summary: body.summary ?? "" });
      break;
    case "task_requeued":
      close(h, event, body.error_kind === "veto" ? "vetoed" : "requeued", {
        kind: body.error_kind,
        reason: body.reason ?? "",
        blockedOn: body.blocked_on_path ?? null,
        byYou: body.reason === "interrupted", // the operator stopped the run: not charged
      });
      break;
    case "task_failed":
      close(h, event, "failed", { kind: body.error_kind, reason: body.error ?? "" });
      break;
    case "repair_started": // a landing break: the session that made the change repairs it
      if (body.cause === "integration") close(h, event, "repaired", { kind: "integration_failed", reason: "repaired in its own session" });
      break;
    case "task_cancelled":
      close(h, event, "cancelled", { kind: "cancelled", reason: "cancelled" });
      break;
    case "fleet_started":
      h.fleetStarts.push(at);
      break;
    case "fleet_idle":
      h.idles.push(at);
      break;
    case "run_finished":
      h.finished = { at, payload: body };
      break;
    default:
      break;
  }
}

function freeAgentOf(live, taskId) {
  for (const agent of live.agents.values()) {
    if (agent.current_task_id === taskId) {
      agent.current_task_id = null;
      if (agent.status === "busy") agent.status = "idle";
    }
  }
}

function setTask(live, event, fields) {
  const task = live.tasks.get(event.task_id);
  if (task) Object.assign(task, fields);
  return task;
}

function foldLive(live, event) {
  const body = event.payload ?? {};
  switch (event.type) {
    case "task_created":
      live.tasks.set(event.task_id, {
        id: event.task_id,
        title: body.title ?? "",
        priority: body.priority,
        file_scope: body.file_scope ?? [],
        depends_on: body.depends_on ?? [],
        status: "pending",
        attempts: 0,
        max_attempts: null,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: 0,
      });
      break;
    case "task_assigned": {
      setTask(live, event, {
        status: "assigned",
        attempts: body.attempt,
        assigned_agent_id: event.agent_id,
      });
      const agent = live.agents.get(event.agent_id);
      if (agent) Object.assign(agent, { status: "busy", current_task_id: event.task_id });
      break;
    }
    case "task_started":
      setTask(live, event, { status: "running" });
      break;
    case "landing_queued": // its runner is free; its leases are kept until it lands
      setTask(live, event, { status: "landing" });
      freeAgentOf(live, event.task_id);
      break;
    case "task_succeeded": {
      const task = setTask(live, event, { status: "succeeded", ...(Number.isFinite(body.order) ? { order: body.order } : {}) });
      if (task) task.cost_usd = (task.cost_usd ?? 0) + (body.cost_usd ?? 0);
      freeAgentOf(live, event.task_id);
      break;
    }
    case "task_requeued": {
      const task = setTask(live, event, {
        status: "pending",
        file_scope: body.file_scope ?? [],
        error_kind: body.error_kind,
      });
      if (task && body.charged === false) task.uncharged_attempts = (task.uncharged_attempts ?? 0) + 1;
      freeAgentOf(live, event.task_id);
      break;
    }
    case "task_failed":
      setTask(live, event, { status: "failed", error_kind: body.error_kind, error: body.error });
      freeAgentOf(live, event.task_id);
      break;
    case "task_blocked_upstream":
      setTask(live, event, { status: "blocked_upstream" });
      break;
    case "task_cancelled":
      setTask(live, event, { status: "cancelled" });
      freeAgentOf(live, event.task_id);
      break;
    case "task_retried": {
      // its attempts so far are kept, set aside (not charged); `attempt` was 0 before they were
      const kept = body.set_aside ?? 0;
      setTask(live, event, { status: "pending", attempts: body.attempt ?? 0, uncharged_attempts: kept, retried_attempts: kept });
      break;
    }
    case "lease_acquired":
      live.leases.set(body.path, {
        path: body.path,
        agent_id: event.agent_id,
        task_id: event.task_id,
        acquired_at: event.at,
        kind: body.kind ?? "task", // "interactive": a person's own Claude Code session
      });
      break;
    case "lease_released":
      live.leases.delete(body.path);
      break;
    case "fleet_paused":
      live.pause = { since: body.since, until: body.until, reason: body.reason ?? "", task_id: event.task_id };
      break;
    case "fleet_resumed":
      live.pause = null;
      break;
    case "fleet_budget_exhausted":
      live.budget = { ...live.budget, max_cost_usd: body.max_cost_usd, hard: body.hard, spent_usd: body.spent_usd, exhausted: true, simulated: body.simulated ?? live.budget?.simulated };
      break;
    case "fleet_budget_set": {
      const spent = body.spent_usd ?? live.budget?.spent_usd ?? 0;
      const cap = body.max_cost_usd;
      live.budget = { max_cost_usd: cap, hard: body.hard, spent_usd: spent, exhausted: cap != null && spent >= cap, simulated: live.budget?.simulated };
      break;
    }
    case "agent_registered":
    case "agent_online": {
      const agent = live.agents.get(event.agent_id) ?? { id: event.agent_id, tasks_succeeded: 0 };
      const kind = body.kind ?? agent.kind ?? "runner";
      live.agents.set(event.agent_id, { ...agent, name: body.name, kind, status: kind === "interactive" ? "busy" : "idle" });
      break;
    }
    case "agent_offline": {
      const agent = live.agents.get(event.agent_id);
      if (agent) Object.assign(agent, { status: "offline", current_task_id: null });
      break;
    }
    default:
      break;
  }
}

const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

export function naturalCompare(a, b) {
  return collator.compare(String(a ?? ""), String(b ?? ""));
}
