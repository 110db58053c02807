// One shared tooltip for every bar, marker and node: shown on hover and on
// keyboard focus, and re-attached to the redrawn element after a live update.

import { fill, h } from "./util.js";

const KEYS = ["key", "node"]; // the data-* attribute naming a redrawable element

function keyOf(node) {
  for (const name of KEYS) if (node.dataset[name]) return [name, node.dataset[name]];
  return null;
}

export class Tooltip {
  constructor() {
    this.el = h("div", { class: "tooltip", role: "tooltip", id: "tooltip", hidden: true });
    document.body.append(this.el);
    this.anchor = null;
    this.key = null;
  }

  /** Give `node` this tooltip on hover and focus. */
  attach(node, lines) {
    node.tip = lines;
    node.addEventListener("mouseenter", () => this.show(node));
    node.addEventListener("mouseleave", () => this.hide(node));
    node.addEventListener("focus", () => this.show(node));
    node.addEventListener("blur", () => this.hide(node));
  }

  show(node) {
    this.anchor = node;
    this.key = keyOf(node);
    fill(this.el, node.tip.map((line, i) => h("div", { class: i === 0 ? "tip-title" : "tip-line", text: line })));
    this.el.hidden = false;
    this.place(node);
  }

  hide(node) {
    if (node && node !== this.anchor) return;
    this.el.hidden = true;
    this.anchor = null;
    this.key = null;
  }

  /** After `container` was redrawn: follow the anchor to its new element, or hide. */
  refresh(container) {
    if (!this.anchor || this.anchor.isConnected || !this.key) return;
    const [name, value] = this.key;
    const fresh = container.querySelector(`[data-${name}="${CSS.escape(value)}"]`);
    if (fresh) this.show(fresh);
    else if (container.contains(this.anchor) || !this.anchor.isConnected) this.hide();
  }

  place(node) {
    const box = node.getBoundingClientRect();
    const tip = this.el;
    const width = tip.offsetWidth;
    const height = tip.offsetHeight;
    let left = Math.min(window.innerWidth - width - 8, Math.max(8, box.left + box.width / 2 - width / 2));
    let top = box.top - height - 8;
    if (top < 8) top = box.bottom + 8;
    left = Math.max(8, left);
    tip.style.left = `${Math.round(left + window.scrollX)}px`;
    tip.style.top = `${Math.round(top + window.scrollY)}px`;
  }
}
