// The event log: newest first, filtered by type (toggle buttons), by a text
// match on task, runner or file, and by the task selected elsewhere.

import { naturalCompare } from "./model.js";
import { runOrigin } from "./describe.js";
import { clock, fmtOffset, h, truncate } from "./util.js";
import { loadWording, phrase } from "./wording.js";

const MAX_ROWS = 300;

const ORDER = [
  "task_created", "task_assigned", "task_started", "task_succeeded", "task_requeued", "task_failed",
  "task_unblocked", "task_blocked_upstream", "task_cancelled", "task_retried",
  "lease_acquired", "lease_denied", "lease_released", "lease_waiting", "lease_waited",
  "file_changed", "file_restored",
  "check_defined", "check_started", "check_finished", "command_started", "command_finished",
  "agent_registered", "agent_online", "agent_offline", "fleet_started", "fleet_idle", "run_finished",
  "task_committed", "fleet_paused", "fleet_resumed", "fleet_budget_set", "fleet_budget_exhausted",
  "stale_read", "reconciled", "operator_message", "operator_message_delivered",
  "question_asked", "question_answered",
  "landing_queued", "landing_check_started", "landing_check_finished", "landed", "integration_failed",
  "landing_halted", "landing_resumed",
];

export function category(type) {
  if (type === "lease_denied") return "veto";
  if (type === "task_succeeded" || type === "landed") return "ok";
  if (type === "task_failed" || type === "task_blocked_upstream" || type === "fleet_budget_exhausted") return "bad";
  if (type === "integration_failed" || type === "landing_halted") return "bad";
  if (type === "task_requeued" || type === "file_restored" || type === "fleet_paused" || type === "stale_read") return "warn";
  return type.split("_")[0];
}

const WORDING = await loadWording();

/** One line of plain words for an event (the words are wording.json's). */
export function describeEvent(model, e) {
  return phrase(WORDING, e.type, { task_id: e.task_id, ...(e.payload ?? {}) }) ?? truncate(JSON.stringify(e.payload ?? {}), 160);
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
          this.hidden = new Set(this.types.filter((t) => !["lease_denied", "task_succeeded", "task_failed", "task_requeued", "run_finished", "integration_failed", "landing_halted"].includes(t)));
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
      if (selected && e.task_id !== selected && e.payload?.holder_task_id !== selected && !(e.payload?.batch ?? []).includes(selected)) return false;
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
    const total = model.eventCount;
    const kept = model.events.length < total ? ` The log keeps the newest ${model.events.length}.` : "";
    this.status.textContent = (count > MAX_ROWS ? `Showing the newest ${MAX_ROWS} of ${count} matching events (${total} in all).` : `${count} of ${total} events.`) + kept;
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
