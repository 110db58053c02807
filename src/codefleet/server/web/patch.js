// The patch view: the selected task's recorded change, file by file.
//
// Select a task (a node of the graph, a bar of the timeline) and this panel
// reads GET /tasks/{id}/patch?format=json: the files the task changed, with
// their added and removed line counts, then each file's diff, lines colored by
// kind. A patch is recorded when a task succeeds (a failed attempt is rolled
// back and leaves none), so the view reads it again when the selected task's
// status or attempt changes. Text goes in through textContent only.

import { h } from "./util.js";

function lineClass(line) {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ")) return "d-file";
  if (line.startsWith("@@")) return "d-hunk";
  if (line.startsWith("+")) return "d-add";
  if (line.startsWith("-")) return "d-del";
  return "d-ctx";
}

function diffBlock(diff) {
  const lines = diff.replace(/\n$/, "").split("\n");
  return h("pre", { class: "diff" }, lines.map((line) => h("span", { class: lineClass(line) }, `${line}\n`)));
}

function fileList(files) {
  return h(
    "ul",
    { class: "patch-files", "aria-label": "Files the task changed" },
    files.map((f) =>
      h("li", {}, h("code", {}, f.path), " ", h("span", { class: "d-add" }, `+${f.added}`), " ", h("span", { class: "d-del" }, `−${f.removed}`)),
    ),
  );
}

export class PatchView {
  constructor(container, api) {
    this.container = container;
    this.api = api;
    this.key = null;
    this.patch = null;
    this.error = null;
  }

  /** view: {model, selected}; reads the patch again when the selection or its task changes. */
  render(view) {
    const task = view.selected ? view.model.live.tasks.get(view.selected) : null;
    const key = task ? `${task.id}:${task.status}:${task.attempts}` : null;
    if (key !== this.key) {
      this.key = key;
      this.patch = null;
      this.error = null;
      if (task) this.load(task.id, key);
    }
    this.paint(task);
  }

  async load(taskId, key) {
    try {
      const patch = await this.api().get(`/tasks/${encodeURIComponent(taskId)}/patch?format=json`);
      if (this.key === key) this.patch = patch;
    } catch (err) {
      if (this.key === key) this.error = String(err.message || err);
    }
    if (this.key === key) this.onChange?.();
  }

  paint(task) {
    const box = this.container;
    box.dataset.task = task ? task.id : "";
    if (!task) {
      box.replaceChildren(h("p", { class: "empty" }, "Select a task in the graph or the timeline to see the change it made."));
      return;
    }
    const head = h("h3", {}, `${task.id} · ${task.title}`);
    if (this.error) {
      box.replaceChildren(head, h("p", { class: "empty" }, `The patch could not be read: ${this.error}`));
      return;
    }
    if (!this.patch) {
      box.replaceChildren(head, h("p", { class: "empty" }, "Reading the patch…"));
      return;
    }
    const { files, added, removed } = this.patch;
    if (!files.length) {
      const why = task.status === "succeeded" ? "it succeeded without changing a file" : `it is ${task.status}; a patch is kept when a task succeeds`;
      box.replaceChildren(head, h("p", { class: "empty" }, `No recorded change: ${why}.`));
      return;
    }
    box.replaceChildren(
      head,
      h("p", { class: "patch-sum" }, `${files.length} file${files.length === 1 ? "" : "s"} · `, h("span", { class: "d-add" }, `+${added}`), " ", h("span", { class: "d-del" }, `−${removed}`)),
      fileList(files),
      ...files.map((f) => h("section", { class: "patch-file", "data-path": f.path }, h("h4", {}, h("code", {}, f.path)), diffBlock(f.diff))),
    );
  }
}
