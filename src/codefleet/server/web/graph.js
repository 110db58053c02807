// The task graph: one column per dependency depth, an arrow from each task to
// the tasks waiting on it, every node showing its status in words and color on
// a row of its own (a long id or title never runs into it). Clicking a node
// selects its task everywhere, the patch view included.

import { naturalCompare } from "./model.js";
import { attemptsText, fmtCost, fmtCount, plural, s, truncate } from "./util.js";

const W = 184;
const H = 72;
const GAP_X = 44;
const GAP_Y = 14;
const PAD = 10;

const STATUS = {
  pending: ["○", "queued"],
  waiting: ["◌", "waiting"],
  assigned: ["◔", "assigned"],
  running: ["●", "running"],
  landing: ["⇣", "landing"],
  succeeded: ["✓", "succeeded"],
  failed: ["✕", "failed"],
  blocked_upstream: ["⊘", "blocked"],
  cancelled: ["–", "cancelled"],
};

/** Status as shown: a pending task whose dependencies are not all done is "waiting". */
export function shownStatus(tasks, task) {
  if (task.status !== "pending") return task.status;
  const unmet = (task.depends_on ?? []).some((d) => tasks.get(d)?.status !== "succeeded");
  return unmet ? "waiting" : "pending";
}

export function statusWords(status) {
  return STATUS[status] ?? ["?", status];
}

function depths(tasks) {
  const depth = new Map();
  const visit = (id, trail) => {
    if (depth.has(id)) return depth.get(id);
    if (trail.has(id)) return 0; // the server rejects cycles; never loop on one anyway
    trail.add(id);
    const deps = (tasks.get(id)?.depends_on ?? []).filter((d) => tasks.has(d));
    const d = deps.length ? 1 + Math.max(...deps.map((p) => visit(p, trail))) : 0;
    trail.delete(id);
    depth.set(id, d);
    return d;
  };
  for (const id of tasks.keys()) visit(id, new Set());
  return depth;
}

/** Grid positions: columns by depth; a task sits level with the middle of its parents if free. */
export function layout(tasks) {
  const depth = depths(tasks);
  const columns = [];
  for (const [id, d] of depth) (columns[d] ??= []).push(id);
  const row = new Map();
  columns.forEach((ids, col) => {
    const wanted = (id) => {
      const parents = (tasks.get(id).depends_on ?? []).filter((p) => row.has(p));
      return parents.length ? parents.reduce((sum, p) => sum + row.get(p), 0) / parents.length : 0;
    };
    if (col === 0) ids.sort(naturalCompare);
    else ids.sort((a, b) => wanted(a) - wanted(b) || naturalCompare(a, b));
    let next = 0;
    for (const id of ids) {
      const at = col === 0 ? next : Math.max(next, Math.round(wanted(id)));
      row.set(id, at);
      next = at + 1;
    }
  });
  return { columns, row, depth };
}

/** Where a task stands in landing: its order number, its place in the queue, its breaks. */
export function landingOf(model, taskId) {
  const l = model.history.landing;
  const queue = [...l.queue.keys()];
  const place = queue.indexOf(taskId);
  return { order: l.orders.get(taskId) ?? null, place: place < 0 ? null : place + 1, queued: queue.length, breaks: l.breaks.filter((b) => b.task === taskId) };
}

function landingLines(model, task) {
  const { order, place, queued, breaks } = landingOf(model, task.id);
  const lines = [];
  if (order != null) lines.push(`landed #${order}`);
  if (place != null) lines.push(`waiting to land: ${place} of ${queued} in the queue`);
  for (const b of breaks) lines.push(`attempt ${b.attempt ?? "?"} broke ${b.check}${b.conflictsWith.length ? ` with ${b.conflictsWith.join(", ")}` : ""}: rolled back for rework`);
  return lines;
}

/** The status row of a node: the word, and the landing order (#2) or the place in the queue (1/3). */
function statusRow(model, task, icon, word) {
  const { order, place, queued } = landingOf(model, task.id);
  if (order != null) return `${icon} ${word} #${order}`;
  if (place != null) return `${icon} ${word} ${place}/${queued}`;
  return `${icon} ${word}`;
}

export function describeTask(model, task) {
  const status = shownStatus(model.live.tasks, task);
  const vetoes = model.history.vetoes.filter((v) => v.task === task.id).length;
  const lines = [
    `${task.id} · ${task.title}`,
    `${statusWords(status)[1]}${task.attempts ? ` · ${task.max_attempts ? `attempts ${attemptsText(task)}` : plural(task.attempts, "attempt")}` : ""}`,
    ...landingLines(model, task),
  ];
  if (task.depends_on?.length) lines.push(`depends on ${task.depends_on.join(", ")}`);
  if (vetoes) lines.push(`${plural(vetoes, "veto", "vetoes")}`);
  if (task.file_scope?.length) lines.push(`scope: ${truncate(task.file_scope.join(", "), 120)}`);
  if (task.input_tokens || task.output_tokens || task.cost_usd) {
    lines.push(`${fmtCount(task.input_tokens)} in / ${fmtCount(task.output_tokens)} out tokens · ${fmtCost(task.cost_usd)}`);
  }
  return lines;
}

export function renderGraph(container, view, { tooltip, onSelect }) {
  const { model, selected } = view;
  const tasks = model.live.tasks;
  if (!tasks.size) {
    container.replaceChildren(s("svg", { class: "graph-svg", width: 1, height: 1, "aria-hidden": "true" }));
    return false;
  }
  const focusedKey = document.activeElement?.closest?.("[data-node]")?.dataset.node;
  const { columns, row } = layout(tasks);
  const rows = 1 + Math.max(...row.values());
  const width = PAD * 2 + columns.length * W + (columns.length - 1) * GAP_X;
  const height = PAD * 2 + rows * H + (rows - 1) * GAP_Y;
  const pos = (id) => {
    const col = columns.findIndex((c) => c.includes(id));
    return { x: PAD + col * (W + GAP_X), y: PAD + row.get(id) * (H + GAP_Y) };
  };
  const where = new Map([...tasks.keys()].map((id) => [id, pos(id)]));
  const edges = [];
  for (const task of tasks.values()) {
    for (const dep of task.depends_on ?? []) {
      if (!where.has(dep)) continue;
      const a = where.get(dep);
      const b = where.get(task.id);
      const [x1, y1, x2, y2] = [a.x + W, a.y + H / 2, b.x - 2, b.y + H / 2];
      const met = tasks.get(dep).status === "succeeded";
      edges.push(
        s("path", { class: `edge${met ? " met" : ""}`, d: `M${x1},${y1} C${x1 + GAP_X / 2},${y1} ${x2 - GAP_X / 2},${y2} ${x2},${y2}`, "marker-end": "url(#arrow-dep)" }),
      );
    }
  }
  const order = [...tasks.values()].sort((a, b) => where.get(a.id).x - where.get(b.id).x || where.get(a.id).y - where.get(b.id).y);
  const nodes = order.map((task) => node(model, task, where.get(task.id), selected, { tooltip, onSelect, asking: view.asking }));
  const svg = s(
    "svg",
    { class: "graph-svg", width, height, viewBox: `0 0 ${width} ${height}`, role: "group", "aria-label": `Task graph: ${plural(tasks.size, "task")}` },
    s(
      "defs",
      {},
      s(
        "marker",
        { id: "arrow-dep", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-dep" }),
      ),
    ),
    s("g", { class: "edges", "aria-hidden": "true" }, edges),
    s("g", { class: "nodes" }, nodes),
  );
  container.replaceChildren(svg);
  if (focusedKey) container.querySelector(`[data-node="${CSS.escape(focusedKey)}"]`)?.focus({ preventScroll: true });
  tooltip.refresh(container);
  return true;
}

function node(model, task, { x, y }, selected, { tooltip, onSelect, asking: askers }) {
  const status = shownStatus(model.live.tasks, task);
  const [icon, word] = statusWords(status);
  const vetoes = model.history.vetoes.filter((v) => v.task === task.id).length;
  const asking = askers?.has(task.id);
  const lines = describeTask(model, task).concat(asking ? ["Asks you a question (see Open questions)"] : []);
  const tries = task.attempts > 1 ? `${task.attempts} tries` : "";
  const group = s(
    "g",
    {
      class: `node st-${status}${selected === task.id ? " selected" : ""}${selected && selected !== task.id ? " dim" : ""}`,
      tabindex: 0,
      role: "button",
      "aria-label": lines.join(". "),
      "data-node": task.id,
      "data-status": task.status,
      "data-order": landingOf(model, task.id).order,
      "data-asking": asking ? "true" : null,
    },
    s("rect", { class: "node-box", x, y, width: W, height: H, rx: 6 }),
    s("rect", { class: "node-stripe", x, y, width: 6, height: H, rx: 3 }),
    // Three rows, so no label can run into another whatever its length: the id, the
    // title, then the status with the tries at the right.
    s("text", { class: "node-id", x: x + 14, y: y + 20, text: truncate(task.id, 18) }),
    s("text", { class: "node-title", x: x + 14, y: y + 40, text: truncate(task.title, 24) }),
    s("text", { class: "node-status", x: x + 14, y: y + 60, text: statusRow(model, task, icon, word) }),
    tries ? s("text", { class: "node-tries", x: x + W - 10, y: y + 60, "text-anchor": "end", text: tries }) : null,
    asking ? s("g", { class: "node-asking" }, s("circle", { cx: x + W - 30, cy: y, r: 9 }), s("text", { x: x + W - 30, y: y + 4, "text-anchor": "middle", text: "?" })) : null,
    vetoes
      ? s("path", { class: "veto-diamond small", d: `M${x + W - 10},${y - 6} l6,6 l-6,6 l-6,-6 z` })
      : null,
  );
  tooltip.attach(group, lines);
  group.addEventListener("click", () => onSelect(task.id));
  group.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      onSelect(task.id);
    }
  });
  return group;
}

/** One line of `graph check`'s analysis (GET /graph), scopes as they stand now; "" for none. */
export function describeAnalysis(analysis) {
  if (!analysis || !analysis.tasks) return "";
  const path = analysis.critical_path.tasks.join(" → ");
  const p = analysis.parallelism;
  const parts = [
    `width ${analysis.max_width}`,
    `critical path ${path}`,
    `${p.predicted.toFixed(2)} busy on ${p.runners} runners at best`,
    plural(analysis.overlaps.length, "overlapping pair"),
    plural(analysis.hotspots.length, "hotspot"),
  ];
  const pairs = analysis.overlaps.map((o) => `${o.tasks.join(" + ")}: ${o.paths.join(", ")}`);
  return `graph check: ${parts.join(" · ")}${pairs.length ? ` (${pairs.join("; ")})` : ""}`;
}
