// A person in the loop (issue 31): tell a task something, answer its agent's questions.
//
// The "Tell this task" form follows the selected task and posts
// POST /tasks/{id}/messages; the questions panel lists GET /questions (the open
// ones), each with a box that posts POST /tasks/{id}/answers with its
// question_id. Both go with the page's bearer token (`Api.post`). The list is
// read again on `question_asked` / `question_answered` over the stream; the
// task graph marks a task with an open question (`asking`). Text goes in
// through textContent only.

import { AuthError } from "./api.js";
import { h } from "./util.js";

export const QUESTION_EVENTS = new Set(["question_asked", "question_answered"]);

/** The message a refused POST shows beside its form. */
function refusal(err) {
  return err instanceof AuthError ? "The server wants its token." : `Not sent: ${err.message}`;
}

/** `form` posts `send(text)` on submit; clears the box on success, says why not otherwise. */
function wire(form, input, status, send) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    status.textContent = "Sending…";
    try {
      await send(text);
      input.value = "";
      status.textContent = "Sent.";
    } catch (err) {
      status.textContent = refusal(err);
    }
  });
}

export class PersonView {
  /** `api()` is the current Api (it changes when a token is typed); `onChange` asks for a redraw. */
  constructor(tellForm, questionsView, api) {
    this.tellForm = tellForm;
    this.questionsView = questionsView;
    this.api = api;
    this.questions = []; // GET /questions: the open ones
    this.shownKey = null;
    this.onChange = () => {};
    const input = tellForm.querySelector("textarea");
    const status = tellForm.querySelector(".form-status");
    wire(tellForm, input, status, (text) => this.api().post(`/tasks/${encodeURIComponent(this.task)}/messages`, { text }));
  }

  async read() {
    this.questions = (await this.api().get("/questions")).questions;
    this.onChange();
  }

  /** The ids of the tasks with an open question (the graph's badge). */
  asking() {
    return new Set(this.questions.map((q) => q.task_id));
  }

  /** view: {selected}; the form names the selected task, the panel lists the open questions. */
  render(view) {
    this.task = view.selected;
    this.tellForm.hidden = !view.selected;
    this.tellForm.querySelector(".tell-task").textContent = view.selected ?? "";
    const key = this.questions.map((q) => q.question_id).join(",");
    if (key === this.shownKey) return; // keep a half-typed answer across redraws
    this.shownKey = key;
    this.questionsView.replaceChildren(
      this.questions.length
        ? h("ul", { class: "questions" }, this.questions.map((q) => this.item(q)))
        : h("p", { class: "empty" }, "No open questions."),
    );
  }

  item(question) {
    const input = h("input", { type: "text", "aria-label": `Answer to ${question.task_id}`, autocomplete: "off" });
    const status = h("span", { class: "form-status", role: "status" });
    const form = h("form", { class: "answer-form" }, input, h("button", { type: "submit", class: "btn" }, "Send"), status);
    wire(form, input, status, (text) =>
      this.api().post(`/tasks/${encodeURIComponent(question.task_id)}/answers`, { text, question_id: question.question_id }),
    );
    return h(
      "li",
      { "data-question": question.question_id, "data-task": question.task_id },
      h("p", {}, h("strong", {}, question.task_id), ` (attempt ${question.attempt}) asks: `, h("q", {}, question.text)),
      form,
    );
  }
}
