// The header (figures and a plain-language account of the run), the lease
// map, the conflicts, the landing queue, and cost and tokens. Each render*
// function redraws its container from the model; none holds state.

import { shownStatus } from "./graph.js";
import { landingNow, naturalCompare, TERMINAL } from "./model.js";
import { runOrigin, runWall } from "./describe.js";
import { clock, costText, fill, fmtCost, fmtCount, fmtDuration, fmtOffset, h, keyText, leaseLabel, PART_SEPARATOR, plural, spentText, splitLeaseKey, truncate } from "./util.js";

// -- header -------------------------------------------------------------------------

export function renderStats(container, view) {
  const { model } = view;
  const tasks = [...model.live.tasks.values()];
  const ok = tasks.filter((t) => t.status === "succeeded").length;
  const bad = tasks.filter((t) => t.status === "failed" || t.status === "blocked_upstream").length;
  const tokens = tasks.reduce((n, t) => n + (t.input_tokens || 0) + (t.output_tokens || 0), 0);
  const cost = tasks.reduce((n, t) => n + (t.cost_usd || 0), 0);
  const verify = model.history.finished?.payload?.verify;
  const stat = (label, value, cls = "") => h("div", { class: `stat ${cls}` }, h("dt", { text: label }), h("dd", { text: value }));
  fill(
    container,
    stat("Tasks", `${ok}/${tasks.length} succeeded`, bad ? "bad" : ok && ok === tasks.length ? "good" : ""),
    stat("Vetoes", String(model.history.vetoes.length), model.history.vetoes.length ? "has-veto" : ""),
    stat("Runners", String(model.runnerCount())),
    stat("Duration", model.history.attempts.length ? fmtDuration(runWall(model, view)) : "–"),
    stat("Tokens", fmtCount(tokens)),
    stat("Cost", costStat(cost, model.live.budget), model.live.budget?.exhausted ? "bad" : ""),
    verify ? stat("Verify", verify.ok ? "passed" : `failed (exit ${verify.exit_code})`, verify.ok ? "good" : "bad") : null,
  );
}

/** The fleet's cost, labelled when simulated, and the budget's cap if there is one. */
export function costStat(cost, budget) {
  const text = costText(cost, budget?.simulated);
  return budget?.max_cost_usd != null ? `${text} of ${fmtCost(budget.max_cost_usd)}` : text;
}

/** The limits banner: a usage-limit pause (with a live countdown and why), or a spent budget. */
export function renderPause(container, view) {
  const { pause, budget } = view.model.live;
  const spent = budget?.exhausted && budget.max_cost_usd != null;
  container.hidden = !pause && !spent;
  container.dataset.limit = pause ? "pause" : spent ? "budget" : "";
  if (!pause && spent) {
    return fill(
      container,
      h("strong", { text: "Fleet budget exhausted" }),
      ` · ${spentText(budget.spent_usd, budget.simulated)} of ${fmtCost(budget.max_cost_usd)} · no new task is assigned; `,
      budget.hard ? "running tasks were stopped and rolled back; " : "running tasks finish; ",
      h("code", { text: "codefleet budget USD" }),
      " raises it.",
    );
  }
  if (!pause) return fill(container);
  const left = Math.max(0, Date.parse(pause.until) - view.now);
  fill(
    container,
    h("strong", { text: "Fleet paused on a usage limit" }),
    ` · resumes in `,
    h("span", { class: "countdown", text: fmtDuration(left) }),
    ` (${clock(pause.until)}) · no task is assigned until then; running sessions carry on; `,
    h("code", { text: "codefleet resume" }),
    " lifts it. ",
    h("span", { class: "reason", text: truncate(pause.reason ?? "", 200) }),
  );
}

function holderAttemptAt(model, veto) {
  return model.history.attempts.find(
    (a) => a.task === veto.holderTask && a.start <= veto.at && !(a.end < veto.at),
  );
}

/** One sentence per veto: who reached for which file, who held it, what became of the task. */
export function vetoSentence(model, veto) {
  const when = fmtOffset(veto.at - runOrigin(model));
  const who = `${model.laneName(veto.agent)} (${veto.task})`;
  const holder = `${veto.holderName ?? "?"} (${veto.holderTask ?? "?"})`;
  const parts = [`At ${when}, ${who} tried to write ${leaseLabel(veto.path)} while ${holder} held it, and `, h("strong", { class: "veto-text", text: "the write was refused" })];
  if (veto.attempt?.restored.length) parts.push(`; its earlier edits were rolled back`);
  const attempts = model.attemptsOf(veto.task);
  const next = attempts[attempts.indexOf(veto.attempt) + 1];
  const task = model.live.tasks.get(veto.task);
  if (next) {
    const held = holderAttemptAt(model, veto);
    const after = held && Number.isFinite(held.end) && held.end <= next.start ? ` after ${veto.holderTask} finished` : "";
    const wait = Number.isFinite(veto.attempt?.end) ? ` (${fmtDuration(next.start - veto.attempt.end)} later)` : "";
    parts.push(`; ${veto.task} ran again on ${model.laneName(next.agent)}${after}${wait}${nextOutcome(next)}.`);
  } else if (task && !TERMINAL.has(task.status)) {
    parts.push(`; ${veto.task} is back in the queue until ${veto.holderTask} is done.`);
  } else {
    parts.push(".");
  }
  return parts;
}

function nextOutcome(attempt) {
  return { succeeded: " and succeeded", running: " and is running", vetoed: " and was refused again" }[attempt.outcome] ?? ` and was ${attempt.outcome} again`;
}

// What an attempt the operator stopped (Ctrl-C on `codefleet run`) reads as: not an infra failure.
export const INTERRUPTED_BY_YOU = "was interrupted by you (not charged)";

/** An attempt that ended without success for another reason: a failed check, an error, a timeout. */
export function setbackSentence(model, attempt) {
  const when = fmtOffset(attempt.end - runOrigin(model));
  const who = `${attempt.task}'s attempt ${attempt.n} on ${model.laneName(attempt.agent)}`;
  const failedCheck = attempt.checks.filter((c) => !c.passed).at(-1);
  const broke = attempt.kind === "integration_failed" ? model.history.landing.breaks.find((b) => b.task === attempt.task && b.attempt === attempt.n) : null;
  const why = attempt.byYou
    ? INTERRUPTED_BY_YOU
    : attempt.kind === "verify_failed" && failedCheck
    ? `failed its verify check "${failedCheck.name}"`
    : broke
      ? `broke the landing check "${broke.check}"${broke.conflictsWith.length ? ` with ${broke.conflictsWith.join(", ")}` : ""}`
      : `ended with ${attempt.kind ?? attempt.outcome}`;
  const parts = [`At ${when}, ${who} `, h("strong", { class: "warn", text: why })];
  if (attempt.restored.length) parts.push(`; its edits were rolled back (${plural(attempt.restored.length, "file")})`);
  const attempts = model.attemptsOf(attempt.task);
  const next = attempts[attempts.indexOf(attempt) + 1];
  if (next) parts.push(`; it ran again on ${model.laneName(next.agent)}${nextOutcome(next)}.`);
  else parts.push(attempt.outcome === "failed" ? "; the task failed." : "; it is back in the queue.");
  return parts;
}

function outcomeSentence(model, state) {
  const tasks = [...model.live.tasks.values()];
  const by = (status) => tasks.filter((t) => t.status === status).map((t) => t.id).sort(naturalCompare);
  const ok = by("succeeded");
  if (state === "finished" || state === "finishing") {
    if (ok.length === tasks.length) return `All ${plural(tasks.length, "task")} succeeded.`;
    const failed = by("failed");
    const blocked = by("blocked_upstream");
    return [
      `${ok.length} of ${plural(tasks.length, "task")} succeeded`,
      failed.length ? `; failed: ${failed.join(", ")}` : "",
      blocked.length ? `; blocked by a failure: ${blocked.join(", ")}` : "",
      ".",
    ].join("");
  }
  const shown = tasks.map((t) => shownStatus(model.live.tasks, t));
  const count = (...statuses) => shown.filter((st) => statuses.includes(st)).length;
  const landing = count("landing") ? `, ${count("landing")} waiting to land` : "";
  return `${ok.length} done, ${count("assigned", "running")} running${landing}, ${count("pending")} ready, ${count("waiting")} waiting on dependencies.`;
}

export function renderStory(container, view) {
  const { model } = view;
  const tasks = model.live.tasks;
  const hist = model.history;
  const state = model.runState();
  if (!model.snapshot) return fill(container, "Connecting to the server…");
  if (!tasks.size) return fill(container, "No task graph loaded yet: post one with `codefleet load GRAPH.yaml`.");
  const sentences = [];
  if (!hist.attempts.length) {
    sentences.push(`${plural(tasks.size, "task")} loaded; none has started yet.`);
  } else {
    const took = fmtDuration(runWall(model, view));
    const runners = plural(model.runnerCount(), "runner");
    sentences.push(
      state === "running"
        ? `${runners} have been working through ${plural(tasks.size, "task")} for ${took}.`
        : `${runners} worked through ${plural(tasks.size, "task")} in ${took}.`,
    );
  }
  const setbacks = hist.attempts.filter((a) => a.vetoes.length || a.outcome === "requeued" || a.outcome === "failed");
  const when = (a) => (a.vetoes.length ? a.vetoes[0].at : a.end);
  setbacks.sort((a, b) => when(a) - when(b));
  for (const attempt of setbacks.slice(0, 3)) {
    sentences.push(attempt.vetoes.length ? vetoSentence(model, attempt.vetoes[0]) : setbackSentence(model, attempt));
  }
  if (setbacks.length > 3) sentences.push(`${plural(setbacks.length - 3, "more attempt")} ended early: see the timeline.`);
  sentences.push(outcomeSentence(model, state));
  const verify = hist.finished?.payload?.verify;
  if (verify) sentences.push(verify.ok ? "The verify command passed." : `The verify command failed (exit ${verify.exit_code}).`);
  fill(container, sentences.map((parts) => h("span", { class: "sentence" }, parts)));
}

// -- lease map ----------------------------------------------------------------------

// A lease held by a person's own Claude Code session (`codefleet join`), not by the fleet.
function personBadge() {
  return h("span", { class: "badge cat-person", title: "a person's own Claude Code session (codefleet join)", text: "person" });
}

export function renderLeases(container, view) {
  const { model, now } = view;
  const leases = [...model.live.leases.values()].sort((a, b) => byFileThenPart(a.path, b.path));
  const held = leases.length
    ? h(
        "table",
        { class: "table", "data-held": leases.length },
        h("caption", { class: "sr-only", text: "Files leased right now" }),
        h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "File" }), h("th", { scope: "col", text: "Holder" }), h("th", { scope: "col", text: "Task" }), h("th", { scope: "col", class: "num", text: "Held for" }))),
        h(
          "tbody",
          {},
          leases.map((l) =>
            h("tr", { "data-lease": l.path, "data-file": splitLeaseKey(l.path).file, "data-kind": l.kind ?? "task" }, h("td", { class: "path" }, keyText(l.path)), h("td", {}, model.laneName(l.agent_id), l.kind === "interactive" ? personBadge() : null), h("td", { text: l.task_id }), h("td", { class: "num", text: fmtDuration(now - Date.parse(l.acquired_at)) })),
          ),
        ),
      )
    : h("p", { class: "empty", "data-held": 0, text: "No file is leased right now." });
  fill(container, h("h3", { text: `Held now (${leases.length})` }), held, h("h3", { text: "Files of the run, most contested first" }), contention(model));
}

/** Lease keys in the order of their file, a file's whole key before its parts. */
function byFileThenPart(a, b) {
  const x = splitLeaseKey(a);
  const y = splitLeaseKey(b);
  return naturalCompare(x.file, y.file) || naturalCompare(x.part ?? "", y.part ?? "");
}

/** The run's lease keys (`model.history.files`) gathered by file: a file's vetoes and tasks are
 * its whole key's and its parts' together; `parts` are its parts, most refused first. */
function byFile(entries) {
  const files = new Map();
  for (const entry of entries) {
    const { file, part } = splitLeaseKey(entry.path);
    if (!files.has(file)) files.set(file, { path: file, keys: [], tasks: [], denials: 0, parts: [] });
    const f = files.get(file);
    f.keys.push(entry.path);
    f.denials += entry.denials;
    for (const task of entry.tasks) if (!f.tasks.includes(task)) f.tasks.push(task);
    if (part !== null) f.parts.push({ part, denials: entry.denials });
  }
  for (const f of files.values()) f.parts.sort((a, b) => b.denials - a.denials || naturalCompare(a.part, b.part));
  return [...files.values()];
}

function partChips(parts) {
  if (!parts.length) return null;
  const chip = (p) => h("span", { class: "part", "data-part": p.part, "data-denials": p.denials, text: `${PART_SEPARATOR}${p.part}${p.denials ? ` · ${plural(p.denials, "veto", "vetoes")}` : ""}` });
  return h("span", { class: "tile-parts small" }, parts.map(chip));
}

function contention(model) {
  const files = byFile(model.history.files.values());
  if (!files.length) return h("p", { class: "empty", text: "No file has been leased yet." });
  files.sort((a, b) => b.denials - a.denials || naturalCompare(a.path, b.path));
  const shown = files.slice(0, 24);
  const tiles = shown.map((f) => {
    const holder = f.keys.map((key) => model.live.leases.get(key)).find(Boolean);
    return h(
      "li",
      { class: `tile${f.denials ? " contested" : ""}${holder ? " held" : ""}`, "data-file": f.path, "data-denials": f.denials },
      h("span", { class: "path", text: leaseLabel(f.path) }),
      f.denials ? h("span", { class: "denials", text: plural(f.denials, "veto", "vetoes") }) : null,
      partChips(f.parts),
      h("span", { class: "small muted", text: holder ? `held by ${model.laneName(holder.agent_id)} · ${holder.task_id}` : `leased by ${f.tasks.join(" → ")}` }),
    );
  });
  const more = files.length > shown.length ? h("p", { class: "muted small", text: `and ${plural(files.length - shown.length, "more file")}` }) : null;
  const none = model.history.vetoes.length ? null : h("p", { class: "muted small", text: "No write has been refused." });
  return [none, h("ul", { class: "tiles", "aria-label": "Files leased in this run, most contested first" }, tiles), more];
}

// -- landing ------------------------------------------------------------------------

/** One landing check in words: `test on T1, T2 (batch) over 2 landed`. */
function checkWords(c) {
  const what = c.batch.length ? c.batch.join(", ") : "the landed tree alone";
  return `${c.check} on ${what} (${c.purpose}) over ${c.base} landed`;
}

/** The landing halt, loud: its cause and the last landing as the log words it (`describe`:
 * log.js's `describeEvent`, handed in so this module needs no wording table), and the tail. */
export function renderLandingHalt(container, view, describe) {
  const { halted } = landingNow(view.model);
  container.hidden = !halted;
  if (!halted) return fill(container);
  const said = describe(view.model, { type: "landing_halted", payload: { ...halted.body, output_tail: null } });
  fill(container, h("strong", { text: said }), " ", h("span", { class: "reason", text: truncate(halted.tail, 200) }));
}

/** The landing queue in order, the check under way, the landings by order, the breaks. */
export function renderLanding(container, view) {
  const { model, now } = view;
  const l = model.history.landing;
  const tasks = model.live.tasks;
  const waiting = [...l.queue.keys()].filter((id) => !tasks.has(id) || tasks.get(id).status === "landing");
  for (const t of tasks.values()) if (t.status === "landing" && !waiting.includes(t.id)) waiting.push(t.id);
  if (!l.seen && !waiting.length) return fill(container, h("p", { class: "empty", text: "Nothing has waited to land yet." }));
  const { runningAll, halted, lastOrder } = landingNow(model);
  const queue = waiting.length
    ? h("ol", { class: "landing-queue", "aria-label": "Tasks waiting to land, in order" }, waiting.map((id) => {
        const q = l.queue.get(id);
        return h("li", { "data-queued": id }, h("strong", { text: id }), ` ${truncate(model.title(id), 40)}`, q ? h("span", { class: "muted small", text: ` · waiting ${fmtDuration(now - q.at)}` }) : null);
      }))
    : h("p", { class: "empty", "data-queued": "", text: "No task is waiting to land." });
  const check = runningAll.length
    ? runningAll.map((running) => h("p", { class: "landing-check", "data-check": running.purpose }, "Checking ", h("strong", { text: checkWords(running) }), ` for ${fmtDuration(now - running.start)}.`))
    : h("p", { class: "muted small landing-check", text: halted ? "No check runs while landing is halted." : "No landing check is running." });
  const head = h("p", { class: "landing-last", "data-last-order": lastOrder }, lastOrder ? `Last landed #${lastOrder}` : "Nothing landed yet", ` · ${plural(l.checks.filter((c) => c.verdict !== null).length, "landing check")} run · ${plural(l.breaks.length, "integration break")}`);
  fill(container, head, h("h3", { text: `Waiting to land (${waiting.length})` }), queue, check, landedTable(model, l), breakList(model, l));
}

function landedTable(model, l) {
  if (!l.landed.length) return null;
  const t0 = runOrigin(model);
  return [
    h("h3", { text: "Landed, in order" }),
    h(
      "table",
      { class: "table" },
      h("caption", { class: "sr-only", text: "Tasks in landing order" }),
      h("thead", {}, h("tr", {}, ["Order", "Task", "Landed", "Waited", "Checks"].map((c) => h("th", { scope: "col", text: c })))),
      h(
        "tbody",
        {},
        l.landed.map((x) =>
          h(
            "tr",
            { "data-landed": x.task, "data-order": x.order },
            h("td", { class: "num", text: `#${x.order}` }),
            h("td", { title: model.title(x.task) }, x.task, h("span", { class: "muted small", text: ` ${truncate(model.title(x.task), 32)}` })),
            h("td", { class: "num", text: fmtOffset(x.at - t0) }),
            h("td", { class: "num", text: Number.isFinite(x.queuedAt) ? fmtDuration(x.at - x.queuedAt) : "–" }),
            h("td", { text: x.checks.join(", ") || "nothing to check" }),
          ),
        ),
      ),
    ),
  ];
}

function breakList(model, l) {
  if (!l.breaks.length) return null;
  return [
    h("h3", { text: "Integration breaks" }),
    h(
      "ul",
      { class: "landing-breaks" },
      l.breaks.map((b) => {
        const landed = l.orders.get(b.task);
        const then = landed != null ? ` · reworked, landed #${landed}` : " · rolled back for rework";
        return h(
          "li",
          { "data-break": b.task },
          h("strong", { class: "bad", text: `${b.task} broke ${b.check}` }),
          b.conflictsWith.length ? ` with ${b.conflictsWith.join(", ")}` : "",
          ` (attempt ${b.attempt ?? "?"})${then}`,
          b.tail ? h("code", { class: "small tail", text: truncate(b.tail, 160) }) : null,
        );
      }),
    ),
  ];
}

// -- conflicts ----------------------------------------------------------------------

export function renderConflicts(container, view) {
  const { model } = view;
  const rows = model.conflicts;
  if (!rows.length) return fill(container, h("p", { class: "empty", text: "No conflicts: no write has been refused." }));
  const t0 = runOrigin(model);
  fill(
    container,
    h(
      "table",
      { class: "table" },
      h("caption", { class: "sr-only", text: "Refused writes" }),
      h("thead", {}, h("tr", {}, ["When", "File", "Refused", "Held by", "Outcome"].map((c) => h("th", { scope: "col", text: c })))),
      h(
        "tbody",
        {},
        rows.map((c) =>
          h(
            "tr",
            { "data-conflict": c.event_id },
            h("td", { class: "num", title: clock(c.at), text: fmtOffset(Date.parse(c.at) - t0) }),
            h("td", { class: "path" }, keyText(c.path)),
            h("td", { text: `${c.agent_name ?? "?"} · ${c.task_id}` }),
            h("td", { text: `${c.holder_agent_name ?? "?"} · ${c.holder_task_id ?? "?"}` }),
            h("td", { class: c.resolved ? "good" : "warn", text: c.resolved ? `✓ ${c.task_id} succeeded later` : "open" }),
          ),
        ),
      ),
    ),
  );
}

// -- contention (GET /stats, the same figures as `codefleet stats`) -----------------------

const secs = (s) => fmtDuration((s ?? 0) * 1000);

/** Per file: vetoes, the tasks involved, attempt time lost; the fleet's parallelism and stretch. */
export function renderContention(container, stats) {
  if (!stats || !stats.tasks.length) return fill(container, h("p", { class: "empty", text: "No attempt has ended yet." }));
  const f = stats.fleet;
  const stretch = f.stretch == null ? "–" : `${f.stretch.toFixed(1)}×`;
  const summary = h(
    "p",
    { class: "contention-summary" },
    `${f.runners} runners, ${f.busy_mean.toFixed(2)} busy on average (${Math.round(100 * f.parallelism)}%) · `,
    `makespan ${secs(f.makespan_s)} vs critical path ${secs(f.critical_path_s)} (${f.critical_path.join(" → ") || "–"}): ${stretch} · `,
    `lost to vetoes ${secs(f.veto_lost_s)}, to rollbacks ${secs(f.rollback_lost_s)}`,
    f.pauses ? ` · ${f.pauses} usage-limit pause(s), ${secs(f.paused_s)}` : "",
  );
  const resources = resourceTable(stats.resources ?? []);
  const landing = landingSummary(stats.landing);
  if (!stats.files.length) return fill(container, summary, landing, h("p", { class: "empty", text: "No write was refused and no attempt was rolled back." }), resources);
  const table = h(
    "table",
    { class: "table" },
    h("caption", { class: "sr-only", text: "What collisions cost, per file" }),
    h("thead", {}, h("tr", {}, ["File", "Vetoes", "Tasks", "Lost to vetoes", "Lost to rollbacks"].map((c) => h("th", { scope: "col", text: c })))),
    h(
      "tbody",
      {},
      stats.files.map((file) => [
        h(
          "tr",
          { "data-file": file.path },
          h("td", { class: "path", text: file.path }),
          h("td", { class: "num", text: String(file.vetoes) }),
          h("td", { text: file.tasks.join(", ") || "–" }),
          h("td", { class: "num", text: secs(file.veto_lost_s) }),
          h("td", { class: "num", text: secs(file.rollback_lost_s) }),
        ),
        // A file leased by part: its total above, each part (and its whole key) beneath it.
        (file.parts ?? []).map((p) =>
          h(
            "tr",
            { "data-part-of": file.path, "data-part": p.part ?? "", class: "part-row" },
            h("td", { class: "path part", text: p.part === null ? "(whole file)" : `${PART_SEPARATOR}${p.part}` }),
            h("td", { class: "num", text: String(p.vetoes) }),
            h("td", { text: p.tasks.join(", ") || "–" }),
            h("td", { class: "num", text: secs(p.veto_lost_s) }),
            h("td", { class: "num muted", title: "a rollback puts the whole file back: counted on its row", text: "–" }),
          ),
        ),
      ]),
    ),
  );
  fill(container, summary, landing, table, resources);
}

/** `stats.landing` in one line, as `codefleet stats` says it (cli/results/statscmds.py `landing_line`). */
function landingSummary(landing) {
  if (!landing) return null;
  const per = landing.checks_per_landed == null ? "" : ` (${landing.checks_per_landed.toFixed(2)} per landed task)`;
  const mean = landing.landed ? landing.waited_s / landing.landed : 0;
  return h(
    "p",
    { class: "contention-summary", "data-landing": landing.landed },
    `Landing: ${landing.landed} landed · ${plural(landing.checks, "landing check")}${per} · waited to land ${secs(mean)} on average, ${secs(landing.waited_max_s)} at most · `,
    `${plural(landing.breaks, "integration break")}, ${landing.reworked} reworked and landed · ${plural(landing.halts, "halt")}`,
  );
}

/** Per resource (`stats.resources`): how often a task was refused it, the tasks involved, the time lost. */
function resourceTable(resources) {
  if (!resources.length) return null;
  return h(
    "table",
    { class: "table" },
    h("caption", { class: "sr-only", text: "What collisions cost, per resource" }),
    h("thead", {}, h("tr", {}, ["Resource", "Vetoes", "Tasks", "Lost to vetoes"].map((c) => h("th", { scope: "col", text: c })))),
    h(
      "tbody",
      {},
      resources.map((r) =>
        h(
          "tr",
          { "data-resource": r.name },
          h("td", { class: "path", text: leaseLabel(`/resource:${r.name}`) }),
          h("td", { class: "num", text: String(r.vetoes) }),
          h("td", { text: r.tasks.join(", ") || "–" }),
          h("td", { class: "num", text: secs(r.veto_lost_s) }),
        ),
      ),
    ),
  );
}

// -- cost and tokens ----------------------------------------------------------------

function shareBar(value, total) {
  const fillEl = h("span", { class: "meter-fill" });
  fillEl.style.width = total > 0 ? `${(100 * value) / total}%` : "0";
  return h("span", { class: "meter", "aria-hidden": "true" }, fillEl);
}

function usageTable(caption, head, rows, totals) {
  return h(
    "table",
    { class: "table usage" },
    h("caption", { class: "sr-only", text: caption }),
    h("thead", {}, h("tr", {}, head.map(([text, cls]) => h("th", { scope: "col", class: cls, text })))),
    h("tbody", {}, rows),
    totals ? h("tfoot", {}, totals) : null,
  );
}

function attemptSummary(model, agentId) {
  const counts = new Map();
  for (const a of model.history.attempts) if (a.agent === agentId) counts.set(a.outcome, (counts.get(a.outcome) ?? 0) + 1);
  return [...counts].map(([outcome, n]) => `${n} ${outcome}`).join(" · ");
}

// A runner in its own clone of the landed line says so, with the landed commit it is level with.
export function workspaceNote(agent) {
  if (agent.workspace !== "clone") return null;
  return h("span", { class: "muted small", "data-workspace": "clone", title: agent.head ?? "", text: ` clone@${(agent.head ?? "-").slice(0, 8)}` });
}

export function renderCost(container, view) {
  const { model } = view;
  const tasks = [...model.live.tasks.values()].sort((a, b) => naturalCompare(a.id, b.id));
  // A person's own session spends nothing of the fleet's: only runners have usage.
  const agents = [...model.live.agents.values()].filter((a) => a.kind !== "interactive").sort((a, b) => naturalCompare(a.name, b.name));
  const tok = (x) => (x.input_tokens || 0) + (x.output_tokens || 0);
  const totalCost = tasks.reduce((n, t) => n + (t.cost_usd || 0), 0);
  const totalTokens = tasks.reduce((n, t) => n + tok(t), 0);
  const byCost = totalCost > 0;
  const weight = (x) => (byCost ? x.cost_usd || 0 : tok(x));
  const total = byCost ? totalCost : totalTokens;
  const num = (text) => h("td", { class: "num", text });
  const head = (first) => [[first, ""], ["In", "num"], ["Out", "num"], ["Cost", "num"], [byCost ? "Cost share" : "Token share", "share"]];
  const runnerRows = agents.map((a) =>
    h("tr", { "data-runner": a.name }, h("td", {}, a.name, workspaceNote(a), h("span", { class: "muted small", text: ` ${attemptSummary(model, a.id)}` })), num(fmtCount(a.input_tokens)), num(fmtCount(a.output_tokens)), num(fmtCost(a.cost_usd)), h("td", { class: "share" }, shareBar(weight(a), total))),
  );
  const taskRows = tasks.map((t) =>
    h("tr", { "data-task-cost": t.id }, h("td", { title: t.title }, t.id, h("span", { class: "muted small", text: ` ${truncate(t.title, 28)}${t.attempts > 1 ? ` · ${t.attempts} tries` : ""}` })), num(fmtCount(t.input_tokens)), num(fmtCount(t.output_tokens)), num(fmtCost(t.cost_usd)), h("td", { class: "share" }, shareBar(weight(t), total))),
  );
  const totals = h("tr", {}, h("th", { scope: "row", text: "Total" }), num(fmtCount(tasks.reduce((n, t) => n + (t.input_tokens || 0), 0))), num(fmtCount(tasks.reduce((n, t) => n + (t.output_tokens || 0), 0))), num(costText(totalCost, model.live.budget?.simulated)), h("td", {}));
  const note = total > 0 ? null : h("p", { class: "muted small", text: "No usage reported yet (a dry run uses no model)." });
  fill(
    container,
    note,
    h("h3", { text: "Per runner" }),
    agents.length ? usageTable("Tokens and cost per runner", head("Runner"), runnerRows) : h("p", { class: "empty", text: "No runner yet." }),
    h("h3", { text: "Per task" }),
    usageTable("Tokens and cost per task", head("Task"), taskRows, totals),
  );
}
