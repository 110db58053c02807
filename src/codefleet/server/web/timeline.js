// The timeline: one lane per runner, one bar per attempt (task_assigned to its
// end), colored by outcome; a veto marker where a write was refused, with a
// dashed line to the lane of the runner that held the file; a dotted link from
// a failed attempt to the task's next attempt, labeled with the wait; a ↺ where
// a failed attempt's edits were rolled back; a tick inside a bar per check run (at the
// bottom) and per command (at the top; filled dark when the command was vetoed); a
// hatched segment where a write waited for a held file, with a dashed arrow to the
// holder's lane.
//
// Bars and markers are one tab stop (a roving tabindex, so a long run is not
// a hundred Tab presses): Tab enters at the last one focused, arrow keys move
// in time order (left, right) and across lanes (up, down). Each carries an
// aria-label with what its tooltip says.

import { describeAttempt, describeRollback, describeVeto, runOrigin } from "./describe.js";
import { fmtDuration, fmtOffset, h, plural, s, truncate } from "./util.js";

const LANE_H = 62;
const BAR_Y = 24;
const BAR_H = 28;
const AXIS_H = 26;
const FOOT_H = 26;
const PAD_L = 10;
const PAD_R = 28;
const MIN_SPAN_MS = 50;
const MIN_WIDTH = 280; // below this the lanes scroll sideways instead of squeezing
const ZOOMS = [1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64];

function niceStep(raw) {
  const power = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

function charWidth(text) {
  return text.length * 6.6; // 12px sans-serif, roughly; only used to place labels
}

export class Timeline {
  constructor(root, { tooltip, onSelect }) {
    this.tooltip = tooltip;
    this.onSelect = onSelect;
    this.zoom = 1;
    this.followEnd = true;
    this.zoomLabel = h("span", { class: "zoom-level", "aria-live": "polite", text: "1×" });
    const button = (label, text, action) =>
      h("button", { type: "button", class: "btn", "aria-label": label, title: label, onclick: action }, text);
    const tools = h(
      "div",
      { class: "tl-tools", role: "group", "aria-label": "Timeline zoom" },
      button("Zoom out", "−", () => this.setZoom(this.stepZoom(-1))),
      this.zoomLabel,
      button("Zoom in", "+", () => this.setZoom(this.stepZoom(1))),
      button("Fit the whole run", "Fit", () => this.setZoom(1)),
    );
    this.labels = h("div", { class: "tl-labels", "aria-hidden": "true" });
    this.scroller = h("div", { class: "tl-scroll" });
    this.empty = h("p", { class: "empty", hidden: true });
    root.append(
      h("div", { class: "tl-head" }, legend(), tools),
      h("div", { class: "tl-body" }, this.labels, this.scroller),
      this.empty,
    );
    this.scroller.addEventListener("wheel", (e) => this.onWheel(e), { passive: false });
    this.scroller.addEventListener("scroll", () => {
      const max = this.scroller.scrollWidth - this.scroller.clientWidth;
      this.followEnd = this.scroller.scrollLeft >= max - 4;
    });
    root.addEventListener("keydown", (e) => this.onKey(e));
    this.scroller.addEventListener("focusin", (e) => this.rove(e.target.closest?.("[data-key]")));
    this.current = null; // the one bar or marker in the tab order; arrows move from there
    this.view = null;
  }

  stepZoom(direction) {
    const at = ZOOMS.findIndex((z) => z >= this.zoom - 1e-9);
    const index = Math.min(ZOOMS.length - 1, Math.max(0, (at < 0 ? 0 : at) + direction));
    return ZOOMS[index];
  }

  setZoom(zoom, anchorFraction = 0.5) {
    const sc = this.scroller;
    const anchorX = sc.clientWidth * anchorFraction;
    const at = (sc.scrollLeft + anchorX) / Math.max(1, sc.scrollWidth);
    this.zoom = zoom;
    this.zoomLabel.textContent = `${zoom}×`;
    if (this.view) this.render(this.view);
    sc.scrollLeft = at * sc.scrollWidth - anchorX;
  }

  onWheel(event) {
    if (!(event.ctrlKey || event.metaKey)) return;
    event.preventDefault();
    const box = this.scroller.getBoundingClientRect();
    const fraction = (event.clientX - box.left) / Math.max(1, box.width);
    this.setZoom(this.stepZoom(event.deltaY < 0 ? 1 : -1), fraction);
  }

  onKey(event) {
    if (event.target.closest?.("input, button")) return;
    if (event.key === "+" || event.key === "=") this.setZoom(this.stepZoom(1));
    else if (event.key === "-" || event.key === "_") this.setZoom(this.stepZoom(-1));
    else if (event.key === "0") this.setZoom(1);
    else return this.onArrow(event);
    event.preventDefault();
  }

  onArrow(event) {
    const current = event.target.closest?.("[data-key]");
    if (!current || !this.scroller.contains(current)) return;
    const items = [...this.scroller.querySelectorAll("[data-key]")];
    const index = items.indexOf(current);
    let next = null;
    if (event.key === "ArrowRight") next = items[index + 1];
    else if (event.key === "ArrowLeft") next = items[index - 1];
    else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      const lane = Number(current.dataset.laneIndex) + (event.key === "ArrowDown" ? 1 : -1);
      const t = Number(current.dataset.t);
      const candidates = items.filter((i) => Number(i.dataset.laneIndex) === lane);
      candidates.sort((a, b) => Math.abs(a.dataset.t - t) - Math.abs(b.dataset.t - t));
      next = candidates[0];
    } else if (event.key === "Enter" || event.key === " ") {
      this.onSelect(current.dataset.task);
    } else return;
    event.preventDefault();
    next?.focus();
  }

  /** Make `item` the timeline's single tab stop (a roving tabindex). */
  rove(item) {
    if (!item) return;
    this.current = item.dataset.key;
    for (const other of this.scroller.querySelectorAll('[data-key][tabindex="0"]')) other.setAttribute("tabindex", "-1");
    item.setAttribute("tabindex", "0");
  }

  /** view: {model, now, live, selected} */
  render(view) {
    this.view = view;
    const { model } = view;
    const lanes = model.lanes();
    const hist = model.history;
    const focusedKey = document.activeElement?.closest?.("[data-key]")?.dataset.key;
    if (!lanes.length) {
      this.empty.hidden = false;
      this.empty.textContent = "No runner has registered yet: start a fleet (`codefleet run`).";
      this.labels.replaceChildren();
      this.scroller.replaceChildren();
      return;
    }
    this.empty.hidden = true;
    const t0 = runOrigin(model);
    const open = hist.open.size > 0 && view.live;
    let t1 = Math.max(hist.last, ...hist.attempts.map((a) => a.start));
    if (open) t1 = Math.max(t1, view.now);
    const span = Math.max(t1 - t0, MIN_SPAN_MS) * 1.02;
    const width = Math.max(MIN_WIDTH, this.scroller.clientWidth || 800) * this.zoom;
    const x = (t) => PAD_L + ((t - t0) / span) * (width - PAD_L - PAD_R);
    // a folded lane's members draw on it: the runners of earlier runs share one lane
    const laneIndex = new Map(lanes.flatMap((lane, i) => (lane.members ?? [lane.id]).map((id) => [id, i])));
    const laneTop = (agent) => AXIS_H + (laneIndex.get(agent) ?? 0) * LANE_H;
    const height = AXIS_H + lanes.length * LANE_H + FOOT_H;
    const geo = { x, laneTop, laneIndex, t0, now: view.now, width, height, model, view };
    geo.vetoLabels = placeLabels(geo);

    const svg = s(
      "svg",
      {
        class: "tl-svg",
        width,
        height,
        viewBox: `0 0 ${width} ${height}`,
        role: "group",
        "aria-label": `Timeline of ${plural(hist.attempts.length, "attempt")} on ${plural(lanes.length, "runner")}`,
      },
      defs(),
      lanes.map((lane, i) =>
        s("rect", { class: `lane ${i % 2 ? "odd" : "even"}`, x: 0, y: AXIS_H + i * LANE_H, width, height: LANE_H }),
      ),
      axis(geo, span),
      milestones(geo),
      retryLinks(geo),
      focusables(geo, this),
    );
    this.labels.replaceChildren(
      h("div", { class: "tl-axis-spacer" }),
      ...lanes.map((lane) => laneLabel(model, lane)),
    );
    const atEnd = this.followEnd;
    this.scroller.replaceChildren(svg);
    if (atEnd && this.zoom > 1) this.scroller.scrollLeft = this.scroller.scrollWidth;
    const find = (key) => (key ? this.scroller.querySelector(`[data-key="${CSS.escape(key)}"]`) : null);
    const stop = find(this.current) ?? this.scroller.querySelector("[data-key]");
    stop?.setAttribute("tabindex", "0");
    if (focusedKey) find(focusedKey)?.focus({ preventScroll: true });
    this.tooltip.refresh(this.scroller);
  }
}

function legend() {
  const item = (cls, text) => h("li", {}, h("span", { class: `swatch ${cls}`, "aria-hidden": "true" }), text);
  return h(
    "ul",
    { class: "legend", "aria-label": "Legend" },
    item("out-succeeded", "succeeded"),
    item("out-running", "running"),
    item("out-landing", "waiting to land"),
    item("out-vetoed", "vetoed (write refused)"),
    item("out-requeued", "requeued"),
    item("out-failed", "failed"),
    h("li", {}, h("span", { class: "veto-key", "aria-hidden": "true" }), "veto"),
    h("li", {}, h("span", { class: "wait-key", "aria-hidden": "true" }), "waited for a held file"),
    h("li", {}, h("span", { class: "rollback-key", "aria-hidden": "true", text: "↺" }), "rollback"),
  );
}

function defs() {
  return s(
    "defs",
    {},
    s(
      "marker",
      { id: "arrow-veto", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-veto" }),
    ),
    s(
      "marker",
      { id: "arrow-retry", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" },
      s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-retry" }),
    ),
    s(
      "marker",
      { id: "arrow-wait", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" },
      s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-wait" }),
    ),
    s(
      "pattern",
      { id: "hatch-wait", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
      s("rect", { width: 6, height: 6, class: "hatch-ground" }),
      s("line", { x1: 0, y1: 0, x2: 0, y2: 6, class: "hatch-line" }),
    ),
  );
}

function laneLabel(model, lane) {
  const agent = model.live.agents.get(lane.id);
  const members = new Set(lane.members ?? [lane.id]);
  const count = model.history.attempts.filter((a) => members.has(a.agent)).length;
  const status = lane.members ? "offline" : (agent?.status ?? "");
  return h(
    "div",
    { class: "tl-label", "data-lane": lane.name },
    h("strong", { text: lane.name }),
    h("span", { class: `agent-status st-${status}`, text: `${status}${status ? " · " : ""}${plural(count, "attempt")}` }),
  );
}

function axis(geo, span) {
  const { x, width, height, t0 } = geo;
  const step = niceStep(span / Math.max(2, Math.floor(width / 110)));
  const ticks = [];
  for (let t = 0; t <= span; t += step) {
    const px = x(t0 + t);
    const text = t === 0 ? "0" : fmtOffset(t);
    ticks.push(s("line", { class: "tick", x1: px, x2: px, y1: AXIS_H - 6, y2: height - FOOT_H }));
    if (px + 3 + charWidth(text) <= width) ticks.push(s("text", { class: "tick-label", x: px + 3, y: AXIS_H - 9, text }));
  }
  return s("g", { class: "axis", "aria-hidden": "true" }, ticks);
}

function milestones(geo) {
  const { x, model, height, view } = geo;
  const hist = model.history;
  const marks = [
    ...hist.fleetStarts.map((t) => [t, "fleet started", "ms-start", 1]),
    ...hist.idles.map((t) => [t, "drained", "ms-idle", 0]),
  ];
  if (hist.finished) {
    const ok = hist.finished.payload.ok;
    marks.push([hist.finished.at, ok === false ? "finished ✗" : "finished ✓", ok === false ? "ms-bad" : "ms-done", 2]);
  }
  if (view.live && hist.open.size > 0) marks.push([geo.now, "now", "ms-now", 3]);
  const lines = marks.map(([t, , cls]) => s("line", { class: `milestone ${cls}`, x1: x(t), x2: x(t), y1: AXIS_H, y2: height - FOOT_H + 4 }));
  const placed = []; // [left, right] of the labels drawn so far, most important first
  const labels = [];
  for (const [t, text, cls] of [...marks].sort((a, b) => b[3] - a[3])) {
    const px = x(t);
    const w = charWidth(text);
    const anchorEnd = px + 3 + w > geo.width - 4;
    const left = anchorEnd ? px - 3 - w : px + 3;
    if (placed.some(([l, r]) => left < r + 8 && left + w > l - 8)) continue; // the line alone says it
    placed.push([left, left + w]);
    labels.push(s("text", { class: `milestone-label ${cls}`, x: anchorEnd ? px - 3 : px + 3, y: height - 8, "text-anchor": anchorEnd ? "end" : "start", text }));
  }
  return s("g", { class: "milestones", "aria-hidden": "true" }, lines, labels);
}

function barEnd(geo, attempt) {
  return Number.isFinite(attempt.end) ? attempt.end : Math.max(geo.now, attempt.start);
}

/** Place the veto labels, then the rollback labels; the spans they take, per lane, go in `taken`. */
function placeLabels(geo) {
  geo.taken = new Map();
  const placed = new Map();
  for (const veto of geo.model.history.vetoes) {
    const [text, left] = vetoLabel(veto, geo.x(veto.at), geo.width);
    placed.set(veto.id, [text, left]);
    take(geo, geo.laneIndex.get(veto.agent), left, left + charWidth(text));
  }
  geo.rollbackLabels = new Map();
  for (const attempt of geo.model.history.attempts) {
    if (!attempt.restored.length) continue;
    const lane = geo.laneIndex.get(attempt.agent);
    const px = geo.x(attempt.restored[0].at) + 12;
    const many = attempt.restored.length > 1;
    for (const text of [`undone: ${many ? `${attempt.restored.length} files` : attempt.restored[0].path}`, "undone"]) {
      const right = Math.min(px + charWidth(text), geo.width - 2);
      if (!isFree(geo, lane, right - charWidth(text), right)) continue;
      take(geo, lane, right - charWidth(text), right);
      geo.rollbackLabels.set(attempt.key, [text, right - charWidth(text)]);
      break;
    }
  }
  return placed;
}

function take(geo, lane, left, right) {
  if (!geo.taken.has(lane)) geo.taken.set(lane, []);
  geo.taken.get(lane).push([left, right]);
}

function isFree(geo, lane, left, right) {
  return !(geo.taken.get(lane) ?? []).some(([l, r]) => left < r + 6 && right > l - 6);
}

function retryLinks(geo) {
  const { x, laneTop, laneIndex, model } = geo;
  const byTask = new Map();
  for (const attempt of model.history.attempts) {
    if (!byTask.has(attempt.task)) byTask.set(attempt.task, []);
    byTask.get(attempt.task).push(attempt);
  }
  const out = [];
  for (const attempts of byTask.values()) {
    for (let i = 1; i < attempts.length; i++) {
      const [a, b] = [attempts[i - 1], attempts[i]];
      if (!Number.isFinite(a.end)) continue;
      const x1 = x(a.end);
      const x2 = x(b.start);
      const y1 = laneTop(a.agent) + BAR_Y + BAR_H / 2;
      const y2 = laneTop(b.agent) + BAR_Y + BAR_H / 2;
      const bend = Math.max(12, (x2 - x1) / 2);
      out.push(s("path", { class: "retry-link", d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2 - 1},${y2}`, "marker-end": "url(#arrow-retry)" }));
      const lane = laneIndex.get(b.agent);
      const wait = fmtDuration(b.start - a.end);
      for (const text of [`↻ retry after ${wait}`, `↻ ${wait}`]) {
        const right = Math.min(x2 + 2 + charWidth(text), geo.width - 2);
        const left = right - charWidth(text);
        if (!isFree(geo, lane, left, right)) continue; // else the bar's tooltip still says it
        take(geo, lane, left, right);
        out.push(s("text", { class: "retry-label", x: left, y: laneTop(b.agent) + BAR_Y - 6, text }));
        break;
      }
    }
  }
  return s("g", { class: "retries", "aria-hidden": "true" }, out);
}

function focusables(geo, timeline) {
  const { model } = geo;
  const items = [
    ...model.history.attempts.map((a) => [a.start, 0, () => bar(geo, a, timeline)]),
    ...model.history.vetoes.map((v) => [v.at, 1, () => vetoMark(geo, v, timeline)]),
    ...model.history.attempts
      .filter((a) => a.restored.length)
      .map((a) => [a.restored[0].at, 2, () => rollbackMark(geo, a, timeline)]),
  ];
  items.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return s("g", { class: "items" }, items.map(([, , make]) => make()));
}

function interactive(node, timeline, lines, task) {
  timeline.tooltip.attach(node, lines);
  node.addEventListener("click", () => timeline.onSelect(task));
  return node;
}

function bar(geo, attempt, timeline) {
  const { x, laneTop, model, laneIndex, view } = geo;
  const x1 = x(attempt.start);
  const w = Math.max(3, x(barEnd(geo, attempt)) - x1);
  const y = laneTop(attempt.agent) + BAR_Y;
  const multi = model.attemptsOf(attempt.task).length > 1 || attempt.n > 1;
  const name = `${attempt.task}${multi ? ` #${attempt.n}` : ""}`;
  const lines = describeAttempt(model, attempt, geo.t0);
  const selected = view.selected && view.selected === attempt.task;
  const dim = view.selected && !selected;
  const room = Math.floor((w - 12) / 7.2); // bold 12px characters that fit inside the bar
  const full = `${name}  ${model.title(attempt.task)}`;
  const text = room >= name.length + 4 ? truncate(full, room) : room >= name.length ? name : null;
  const label = text ? s("text", { class: "bar-label", x: x1 + 6, y: y + BAR_H / 2 + 4, text }) : null;
  const group = s(
    "g",
    {
      class: `bar out-${attempt.outcome}${selected ? " selected" : ""}${dim ? " dim" : ""}`,
      tabindex: -1,
      role: "button",
      "aria-label": lines.join(". "),
      "data-key": attempt.key,
      "data-task": attempt.task,
      "data-outcome": attempt.outcome,
      "data-lane": model.laneName(attempt.agent),
      "data-lane-index": laneIndex.get(attempt.agent) ?? 0,
      "data-t": attempt.start,
    },
    s("rect", { class: "bar-body", x: x1, y, width: w, height: BAR_H, rx: 4 }),
    label,
    attempt.checks.map((c) => s("rect", { class: `check-mark ${c.passed ? "pass" : "fail"}`, x: x(c.at) - 2, y: y + BAR_H - 7, width: 4, height: 7, rx: 1 })),
    attempt.waits.map((w) => s("rect", { class: `wait-mark wait-${w.outcome}`, x: x(w.from), y: y + 1, width: Math.max(2, x(w.to) - x(w.from)), height: BAR_H - 2, "data-wait": w.path, "data-holder": w.holder ?? "" })),
    attempt.waits.map((w) => waitLink(geo, attempt, w)),
    (attempt.commands ?? []).map((c) => s("rect", { class: `command-mark ${c.deniedOn ? "veto" : "ran"}`, x: x(c.at) - 2, y, width: 4, height: 7, rx: 1 })),
    attempt.stale.map((m) => s("rect", { class: `stale-mark${m.outcome === "clean" ? " reconciled" : ""}`, x: x(m.at) - 3, y: y, width: 6, height: 7, rx: 1, "data-stale": m.paths.map((p) => p.path).join(" ") })),
  );
  return interactive(group, timeline, lines, attempt.task);
}

/** A wait's arrow, from the middle of its hatched segment to the holder's bar (as a veto's). */
function waitLink(geo, attempt, wait) {
  const { x, laneTop, laneIndex } = geo;
  if (!wait.holderAgent || !laneIndex.has(wait.holderAgent) || wait.holderAgent === attempt.agent) return null;
  const px = x((wait.from + wait.to) / 2);
  const top = laneTop(attempt.agent);
  const holderTop = laneTop(wait.holderAgent);
  const down = holderTop > top;
  const y1 = down ? top + BAR_Y + BAR_H : top + BAR_Y;
  const y2 = down ? holderTop + BAR_Y - 1 : holderTop + BAR_Y + BAR_H + 1;
  return s("line", { class: "wait-link", x1: px, y1, x2: px, y2, "marker-end": "url(#arrow-wait)", "data-wait": wait.path, "data-holder": wait.holder ?? "" });
}

/** The marker's words and where they start: beside the marker, the long form if it fits. */
function vetoLabel(veto, px, width) {
  const long = `VETO ${veto.path} · held by ${veto.holderName ?? "?"} (${veto.holderTask ?? "?"})`;
  for (const text of [long, `VETO ${veto.path}`]) {
    const w = charWidth(text);
    if (px + 11 + w <= width - 4) return [text, px + 11];
    if (px - 11 - w >= 4) return [text, px - 11 - w];
  }
  return ["VETO", px + 11 + charWidth("VETO") <= width - 4 ? px + 11 : px - 11 - charWidth("VETO")];
}

function vetoMark(geo, veto, timeline) {
  const { x, laneTop, laneIndex, model } = geo;
  const px = x(veto.at);
  const top = laneTop(veto.agent);
  const cy = top + BAR_Y - 10;
  const lines = describeVeto(model, veto, geo.t0);
  const parts = [];
  if (veto.holderAgent && laneIndex.has(veto.holderAgent) && veto.holderAgent !== veto.agent) {
    const holderTop = laneTop(veto.holderAgent);
    const down = holderTop > top;
    const y2 = down ? holderTop + BAR_Y - 1 : holderTop + BAR_Y + BAR_H + 1;
    parts.push(s("line", { class: "veto-link", x1: px, y1: down ? cy + 6 : cy - 6, x2: px, y2, "marker-end": "url(#arrow-veto)" }));
  }
  parts.push(s("line", { class: "veto-cut", x1: px, x2: px, y1: cy, y2: top + BAR_Y + BAR_H + 3 }));
  parts.push(s("path", { class: "veto-diamond", d: `M${px},${cy - 7} L${px + 7},${cy} L${px},${cy + 7} L${px - 7},${cy} z` }));
  const [text, left] = geo.vetoLabels.get(veto.id);
  parts.push(s("text", { class: "veto-label", x: left, y: cy + 4, text }));
  const group = s(
    "g",
    {
      class: `veto${geo.view.selected && geo.view.selected !== veto.task ? " dim" : ""}`,
      tabindex: -1,
      role: "button",
      "aria-label": lines.join(". "),
      "data-key": `veto-${veto.id}`,
      "data-task": veto.task,
      "data-lane": model.laneName(veto.agent),
      "data-lane-index": laneIndex.get(veto.agent) ?? 0,
      "data-t": veto.at,
      "data-path": veto.path,
    },
    parts,
  );
  return interactive(group, timeline, lines, veto.task);
}

function rollbackMark(geo, attempt, timeline) {
  const { x, laneTop, laneIndex, model } = geo;
  const px = x(attempt.restored[0].at);
  const cy = laneTop(attempt.agent) + BAR_Y + BAR_H / 2;
  const lines = describeRollback(model, attempt, geo.t0);
  const label = geo.rollbackLabels.get(attempt.key);
  const group = s(
    "g",
    {
      class: `rollback${geo.view.selected && geo.view.selected !== attempt.task ? " dim" : ""}`,
      tabindex: -1,
      role: "button",
      "aria-label": lines.join(". "),
      "data-key": `rollback-${attempt.key}`,
      "data-task": attempt.task,
      "data-lane": model.laneName(attempt.agent),
      "data-lane-index": laneIndex.get(attempt.agent) ?? 0,
      "data-t": attempt.restored[0].at,
      "data-paths": attempt.restored.map((r) => r.path).join(" "),
    },
    s("circle", { class: "rollback-dot", cx: px, cy, r: 9 }),
    s("text", { class: "rollback-glyph", x: px, y: cy + 4, "text-anchor": "middle", text: "↺" }),
    label ? s("text", { class: "rollback-label", x: label[1], y: laneTop(attempt.agent) + BAR_Y - 6, text: label[0] }) : null,
  );
  return interactive(group, timeline, lines, attempt.task);
}
