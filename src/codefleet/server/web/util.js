// DOM and SVG builders and number formatting. Text always goes in through
// textContent (never innerHTML): paths, titles and summaries come from agents.
// It also goes through shown(): a control character or a bidi override (which
// would reorder what a person reads) is shown as an escape, as the terminal's
// safetext.terminal_safe shows it (docs/security-checks.md).

import { leaseLabel, PART_SEPARATOR, splitLeaseKey } from "./wording.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** `text` with each control character and bidi control shown as `\x1b` / `\u202e`. */
export function shown(text) {
  return String(text).replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = shown(value);
    else if (key === "title") node.setAttribute(key, shown(value));
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
}

function appendAll(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : shown(child));
  }
}

/** An HTML element: h("td", {class: "num"}, "12"). */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  appendAll(node, children);
  return node;
}

/** An SVG element. */
export function s(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  appendAll(node, children);
  return node;
}

export function fmtDuration(millis) {
  if (!Number.isFinite(millis)) return "–";
  const abs = Math.abs(millis);
  if (abs < 1000) return `${Math.round(millis)} ms`;
  if (abs < 10_000) return `${(millis / 1000).toFixed(2)} s`;
  if (abs < 60_000) return `${(millis / 1000).toFixed(1)} s`;
  const minutes = Math.floor(abs / 60_000);
  const seconds = Math.round((abs % 60_000) / 1000);
  if (minutes < 60) return `${minutes} min ${String(seconds).padStart(2, "0")} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
}

/** A time relative to the run's start: "+1.25 s". */
export function fmtOffset(millis) {
  if (!Number.isFinite(millis)) return "–";
  return `${millis < 0 ? "−" : "+"}${fmtDuration(Math.abs(millis))}`;
}

export function fmtCost(usd) {
  const value = Number(usd) || 0;
  return `$${value.toFixed(value >= 100 ? 2 : 4)}`;
}

// After a cost no real model ran up (the server's `budget.simulated`); as `wording.SIMULATED`.
export const SIMULATED = " simulated, nothing spent";

/** A cost, labelled when it was simulated (`wording.cost_text`). */
export function costText(usd, simulated) {
  return `${fmtCost(usd)}${simulated ? SIMULATED : ""}`;
}

/** What a budget has spent (`wording.spent_text`). */
export function spentText(usd, simulated) {
  return simulated ? costText(usd, true) : `${fmtCost(usd)} spent`;
}

/** A task's attempts: the charged ones of its allowance, then the free ones and those a retry
 * set aside, apart (`wording.AttemptCounts.short`): `1/3`, `0/3 +3 free`, `1/3 +3 before retry`. */
export function attemptsText(task) {
  const uncharged = task.uncharged_attempts || 0;
  const retried = task.retried_attempts || 0;
  const free = uncharged - retried;
  let text = `${(task.attempts || 0) - uncharged}/${task.max_attempts}`;
  if (free) text += ` +${free} free`;
  return retried ? `${text} +${retried} before retry` : text;
}

export function fmtCount(n) {
  const value = Number(n) || 0;
  if (value < 1000) return String(value);
  if (value < 1_000_000) return `${(value / 1000).toFixed(value < 10_000 ? 1 : 0)}k`;
  return `${(value / 1_000_000).toFixed(1)}M`;
}

export function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

export { leaseLabel, PART_SEPARATOR, splitLeaseKey }; // said once, where the event words are

/** A lease key's cell text: the file (or `resource db`), then its part, if any, as its own span. */
export function keyText(key) {
  const { file, part } = splitLeaseKey(key);
  return part === null ? [leaseLabel(key)] : [file, h("span", { class: "part", "data-part": part, text: `${PART_SEPARATOR}${part}` })];
}

export function truncate(text, max) {
  const value = String(text ?? "");
  return value.length <= max ? value : `${value.slice(0, Math.max(1, max - 1))}…`;
}

/** Wall-clock time of day for an ISO timestamp, in the viewer's zone. */
export function clock(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : date.toLocaleTimeString([], { hour12: false });
}

/** Replace the children of `node`. */
export function fill(node, ...children) {
  node.replaceChildren();
  appendAll(node, children);
}
