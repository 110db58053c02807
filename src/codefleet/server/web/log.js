// The event log: newest first, filtered by type (toggle buttons), by a text
// match on task, runner or file, and by the task selected elsewhere.

import { naturalCompare } from "./model.js";
import { runOrigin } from "./describe.js";
import { clock, fmtCost, fmtOffset, h, truncate } from "./util.js";

const MAX_ROWS = 300;

const ORDER = [
  "task_created", "task_assigned", "task_started", "task_succeeded", "task_requeued", "task_failed",
  "task_unblocked", "task_blocked_upstream", "task_cancelled", "task_retried",
  "lease_acquired", "lease_denied", "lease_released", "file_changed", "file_restored",
  "check_defined", "check_started", "check_finished",
  "agent_registered", "agent_online", "agent_offline", "fleet_started", "fleet_idle", "run_finished",
  "task_committed", "fleet_paused", "fleet_resumed", "fleet_budget_set", "fleet_budget_exhausted",
];

export function category(type) {
  if (type === "lease_denied") return "veto";
  if (type === "task_succeeded") return "ok";
  if (type === "task_failed" || type === "task_blocked_upstream" || type === "fleet_budget_exhausted") return "bad";
  if (type === "task_requeued" || type === "file_restored" || type === "fleet_paused") return "warn";
  return type.split("_")[0];
}

/** One line of plain words for an event. */
export function describeEvent(model, e) {
  const b = e.payload ?? {};
  switch (e.type) {
    case "task_created": return `${b.title ?? ""}${b.depends_on?.length ? ` (after ${b.depends_on.join(", ")})` : ""}`;
    case "task_assigned": return `attempt ${b.attempt} → ${b.agent_name}`;
    case "task_started": return `attempt ${b.attempt} started`;
    case "task_succeeded": return `${b.summary ?? "succeeded"} · ${fmtCost(b.cost_usd)}`;
    case "task_requeued": return `${b.error_kind}: ${truncate(b.reason, 140)}${b.blocked_on_path ? ` · scope + ${b.blocked_on_path}` : ""}`;
    case "task_failed": return `${b.error_kind}: ${truncate(b.error, 160)}`;
    case "task_unblocked": return `ready: ${b.by} succeeded`;
    case "task_blocked_upstream": return `blocked: ${b.upstream} failed`;
    case "task_retried": return "reset for another try";
    case "task_cancelled": return "cancelled";
    case "lease_acquired": return `${b.path} (${b.tool})${b.kind === "interactive" ? " · a person's session" : ""}`;
    case "lease_denied": return `VETO ${b.path}: held by ${b.holder_agent_name ?? "?"} (${b.holder_task_id ?? "?"})`;
    case "lease_released": return `${b.path} (${b.reason})`;
    case "file_changed": return `${b.path} (${b.tool})`;
    case "file_restored": return `${b.path} ${b.existed === false ? "removed: it did not exist before the attempt" : "restored to its state before the attempt"}`;
    case "check_defined": return `${b.name}: ${truncate(b.command, 120)}${b.replaced ? " (replaced)" : ""}`;
    case "check_started": return `${b.name} (${b.purpose}) started`;
    case "check_finished": return `${b.name}: ${b.timed_out ? "timed out" : b.passed ? "passed" : "failed"}${b.exit_code != null ? ` (exit ${b.exit_code})` : ""}${b.duration_ms != null ? ` in ${b.duration_ms} ms` : ""}`;
    case "agent_registered": return b.kind === "interactive" ? `${b.name}: a person's session joined the lock` : `${b.name} registered (epoch ${b.epoch})`;
    case "agent_online": return b.kind === "interactive" ? `${b.name}: a person's session writes again` : `${b.name} back online`;
    case "agent_offline": return b.kind === "interactive" ? `${b.name} released ${(b.paths ?? []).join(", ") || "nothing"} (${b.reason})` : `${b.name} offline (${b.reason})`;
    case "fleet_started": return `${b.runners} runners`;
    case "fleet_idle": return `drained: ${Object.entries(b.counts ?? {}).map(([k, v]) => `${v} ${k}`).join(", ")}`;
    case "run_finished": return `${b.ok ? "ok" : "NOT ok"}${b.verify ? ` · verify exit ${b.verify.exit_code}` : ""}`;
    case "task_committed": return `committed ${String(b.commit ?? "").slice(0, 10)} on ${b.branch}`;
    case "fleet_paused": return `paused until ${clock(b.until)}${b.change === "extended" ? " (extended)" : ""}: ${truncate(b.reason, 160)}`;
    case "fleet_resumed": return `resumed (${b.reason}) after ${b.paused_s} s`;
    case "fleet_budget_set": return b.max_cost_usd == null ? "no budget" : `budget ${fmtCost(b.max_cost_usd)}${b.hard ? " (hard stop)" : ""}`;
    case "fleet_budget_exhausted": return `budget exhausted: ${fmtCost(b.spent_usd)} of ${fmtCost(b.max_cost_usd)}; no new task is assigned${b.hard ? "; running tasks stopped" : ""}`;
    default: return truncate(JSON.stringify(b), 160);
  }
}

export class EventLog {
  constructor(root) {
    this.hidden = new Set();
    this.text = "";
    this.types = [];
    this.chips = h("div", { class: "chips", role: "group", "aria-label": "Show event types" });
    this.search = h("input", { type: "search", id: "log-search", placeholder: "task, runner or file", "aria-label": "Filter events by task, runner or file" });
    this.search.addEventListener("input", () => {
      this.text = this.search.value.trim().toLowerCase();
      this.onChange();
    });
    const preset = (label, action) => h("button", { type: "button", class: "btn small", onclick: () => { action(); this.syncChips(); this.onChange(); } }, label);
    this.status = h("p", { class: "muted small", "aria-live": "polite" });
    this.selection = h("span", { class: "selection" });
    this.body = h("tbody", {});
    root.append(
      h(
        "div",
        { class: "log-controls" },
        h("label", { for: "log-search", class: "small muted", text: "Filter" }),
        this.search,
        preset("All types", () => this.hidden.clear()),
        preset("Vetoes and outcomes", () => {
          this.hidden = new Set(this.types.filter((t) => !["lease_denied", "task_succeeded", "task_failed", "task_requeued", "run_finished"].includes(t)));
        }),
        this.selection,
      ),
      this.chips,
      this.status,
      h(
        "div",
        { class: "log-scroll" },
        h(
          "table",
          { class: "table log" },
          h("caption", { class: "sr-only", text: "Events, newest first" }),
          h("thead", {}, h("tr", {}, ["Time", "Event", "Runner", "Task", "Detail"].map((c) => h("th", { scope: "col", text: c })))),
          this.body,
        ),
      ),
    );
    this.onChange = () => {};
    this.onClearSelection = () => {};
  }

  syncChips() {
    for (const chip of this.chips.children) chip.setAttribute("aria-pressed", String(!this.hidden.has(chip.dataset.type)));
  }

  buildChips(model) {
    const present = [...model.history.typeCounts.keys()];
    present.sort((a, b) => (ORDER.indexOf(a) + 1 || 99) - (ORDER.indexOf(b) + 1 || 99) || naturalCompare(a, b));
    if (present.join() !== this.types.join()) {
      this.types = present;
      this.chips.replaceChildren(
        ...present.map((type) =>
          h("button", { type: "button", class: `chip cat-${category(type)}`, "data-type": type, "aria-pressed": "true", onclick: () => {
            if (this.hidden.has(type)) this.hidden.delete(type);
            else this.hidden.add(type);
            this.syncChips();
            this.onChange();
          } }, h("span", { class: "chip-name", text: type.replaceAll("_", " ") }), h("span", { class: "chip-count" })),
        ),
      );
      this.syncChips();
    }
    for (const chip of this.chips.children) chip.lastChild.textContent = String(model.history.typeCounts.get(chip.dataset.type) ?? 0);
  }

  render(view) {
    const { model, selected } = view;
    this.buildChips(model);
    this.selection.replaceChildren(
      selected ? h("button", { type: "button", class: "btn small", "aria-label": `Stop showing only task ${selected}`, onclick: () => this.onClearSelection() }, `only ${selected} ✕`) : "",
    );
    const t0 = runOrigin(model);
    const matches = (e) => {
      if (this.hidden.has(e.type)) return false;
      if (selected && e.task_id !== selected && e.payload?.holder_task_id !== selected) return false;
      if (!this.text) return true;
      const hay = `${e.type} ${e.task_id ?? ""} ${model.laneName(e.agent_id)} ${e.payload?.path ?? ""} ${e.payload?.name ?? ""}`.toLowerCase();
      return hay.includes(this.text);
    };
    const rows = [];
    let count = 0;
    for (let i = model.events.length - 1; i >= 0; i--) {
      const e = model.events[i];
      if (!matches(e)) continue;
      count += 1;
      if (rows.length < MAX_ROWS) rows.push(this.row(model, e, t0));
    }
    this.body.replaceChildren(...rows);
    const total = model.events.length;
    this.status.textContent = count > MAX_ROWS ? `Showing the newest ${MAX_ROWS} of ${count} matching events (${total} in all).` : `${count} of ${total} events.`;
  }

  row(model, e, t0) {
    const cat = category(e.type);
    return h(
      "tr",
      { class: `ev cat-${cat}`, "data-event": e.id, "data-type": e.type },
      h("td", { class: "num", title: `#${e.id} · ${clock(e.at)}`, text: fmtOffset(Date.parse(e.at) - t0) }),
      h("td", {}, h("span", { class: `badge cat-${cat}`, text: e.type.replaceAll("_", " ") })),
      h("td", { text: e.agent_id ? model.laneName(e.agent_id) : "" }),
      h("td", { text: e.task_id ?? "" }),
      h("td", { class: "detail", text: describeEvent(model, e) }),
    );
  }
}
