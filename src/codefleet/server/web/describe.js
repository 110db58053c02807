// Plain words for what the timeline draws: the tooltip and the aria-label of
// an attempt or a veto, where the run's clock starts and how long the run took.

import { fmtCost, fmtDuration, fmtOffset, leaseLabel, plural, truncate } from "./util.js";

export const OUTCOME_TEXT = {
  running: "running",
  landing: "finished, waiting to land",
  succeeded: "succeeded",
  vetoed: "vetoed",
  requeued: "requeued",
  failed: "failed",
  cancelled: "cancelled",
  interrupted: "interrupted",
};

/** Time zero: the first fleet start, else the first assignment, else the first event. */
export function runOrigin(model) {
  const h = model.history;
  const candidates = [h.fleetStarts[0], h.attempts[0]?.start].filter(Number.isFinite);
  return candidates.length ? Math.min(...candidates) : h.first;
}

/**
 * The run's duration, counted as the report counts its wall time (review/facts.py `_wall`):
 * the sum of the runs' spans, each fleet start to its run_finished (a run that died: to its
 * last event), so time between runs on one database and events after a run (a runner that
 * goes stale, a commit) are not part of it; while a run goes on and the page is live, to now.
 * With no fleet start: the first event to the last run_finished (else the last event).
 */
export function runWall(model, view) {
  const h = model.history;
  const running = model.runState() === "running" && view.live;
  if (!h.fleetStarts.length) return (running ? view.now : h.finished ? h.finished.at : h.last) - h.first;
  const { closed, start, last } = h.runs;
  return closed + (Number.isFinite(start) ? Math.max(0, (running ? view.now : last) - start) : 0);
}

/** The words the tooltip and the screen reader get for one attempt. */
export function describeAttempt(model, attempt, t0) {
  const task = model.live.tasks.get(attempt.task);
  const of = task?.max_attempts ? ` of ${task.max_attempts}` : "";
  const end = Number.isFinite(attempt.end) ? attempt.end : NaN;
  const lines = [
    `${attempt.task} · ${model.title(attempt.task)}`,
    `attempt ${attempt.n}${of} on ${model.laneName(attempt.agent)}`,
    Number.isFinite(end)
      ? `${fmtOffset(attempt.start - t0)} → ${fmtOffset(end - t0)} (${fmtDuration(end - attempt.start)})`
      : `${fmtOffset(attempt.start - t0)} → running`,
  ];
  const earlier = model.attemptsOf(attempt.task).filter((a) => a.start < attempt.start).at(-1);
  if (earlier && Number.isFinite(earlier.end)) {
    lines.push(`retry: started ${fmtDuration(attempt.start - earlier.end)} after attempt ${earlier.n} ended`);
  }
  for (const veto of attempt.vetoes) {
    lines.push(`refused ${leaseLabel(veto.path)}: held by ${veto.holderName ?? "?"} (${veto.holderTask ?? "?"})`);
  }
  for (const check of attempt.checks) {
    const how = check.timedOut ? "timed out" : check.passed ? "passed" : `failed${check.exitCode != null ? ` (exit ${check.exitCode})` : ""}`;
    lines.push(`check ${check.name} ${how} at ${fmtOffset(check.at - t0)}`);
  }
  for (const wait of attempt.waits ?? []) {
    lines.push(`waited ${fmtDuration(wait.to - wait.from)} for ${leaseLabel(wait.path)} (held by ${wait.holder ?? "?"}): ${wait.outcome}`);
  }
  for (const run of attempt.commands ?? []) {
    const how = run.deniedOn ? `VETO on ${run.deniedOn}, nothing applied` : `applied ${run.applied.length ? run.applied.join(", ") : "nothing"}`;
    const ended = run.timedOut ? "timed out" : `exit ${run.exitCode}`;
    lines.push(truncate(`$ ${run.command} (${ended}; ${how}) at ${fmtOffset(run.at - t0)}`, 160));
  }
  for (const mark of attempt.stale) {
    const files = mark.paths.map((p) => `${p.path} (${p.gone ? "deleted by " : ""}${p.by.join(", ")})`).join(", ");
    const then = mark.outcome ? ` · reconciled: ${mark.outcome}` : "";
    lines.push(`stale read at ${fmtOffset(mark.at - t0)}: ${truncate(files, 140)}${then}`);
  }
  if (attempt.restored.length) lines.push(`rolled back: ${truncate(attempt.restored.map((r) => r.path).join(", "), 120)}`);
  if (attempt.outcome === "succeeded") {
    lines.push(`succeeded · ${fmtCost(attempt.cost)} · ${plural(attempt.changes, "file change")}`);
  } else if (attempt.outcome === "vetoed") {
    const path = attempt.blockedOn ? ` with ${attempt.blockedOn} added to its scope` : "";
    lines.push(`vetoed: the write never landed; ${attempt.task} went back to the queue${path}`);
  } else if (attempt.outcome !== "running") {
    const why = attempt.byYou ? " (interrupted by you, not charged)" : attempt.kind ? ` (${attempt.kind})` : "";
    lines.push(`${OUTCOME_TEXT[attempt.outcome]}${why}`);
    if (attempt.reason && !attempt.byYou) lines.push(truncate(attempt.reason, 160));
  }
  if (attempt.files.length) lines.push(`leased: ${truncate(attempt.files.map(leaseLabel).join(", "), 160)}`);
  return lines;
}

export function describeVeto(model, veto, t0) {
  return [
    `VETO at ${fmtOffset(veto.at - t0)}`,
    `${model.laneName(veto.agent)} (${veto.task}) was refused ${leaseLabel(veto.path)}`,
    `held by ${veto.holderName ?? "?"} (${veto.holderTask ?? "?"})`,
    `the write never reached the disk; ${veto.task} went back to the queue`,
  ];
}

export function describeRollback(model, attempt, t0) {
  const restored = attempt.restored;
  return [
    `ROLLBACK at ${fmtOffset(restored[0].at - t0)}`,
    `${attempt.task} attempt ${attempt.n} on ${model.laneName(attempt.agent)} ended without success`,
    ...restored.map((r) => `${r.path}: ${r.existed ? "restored to its content before the attempt" : "removed (it did not exist before)"}`),
    "undone while the task still held the lease, so nobody else saw the edit",
  ];
}
