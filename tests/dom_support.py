"""The web page's own modules under node: a minimal document for them to draw into.

Elements with text, attributes and children, nothing more, stand in for the
browser's, so the text the page would show is read back exactly (`text`: each
element's text and its children's, joined by `separator`). A script goes on
after it with `dir` (the page's directory, node's first argument) in scope.
"""

from __future__ import annotations

from pathlib import Path

WEB = Path(__file__).resolve().parents[1] / "src" / "codefleet" / "server" / "web"


def minimal_dom(separator: str = " ") -> str:
    """The JavaScript that makes `Node` and `document`, for a script run with node."""
    return """
class Node {
  constructor(tag) { this.tag = tag; this.children = []; this.attrs = {}; this.style = {}; this.textContent = ""; }
  setAttribute(key, value) { this.attrs[key] = value; }
  addEventListener() {}
  append(...items) { this.children.push(...items); }
  replaceChildren() { this.children = []; }
  get text() { return this.textContent + this.children.map((c) => (c instanceof Node ? c.text : String(c))).join(SEPARATOR); }
}
globalThis.Node = Node;
globalThis.document = { createElement: (tag) => new Node(tag), createElementNS: (_, tag) => new Node(tag) };
""".replace("SEPARATOR", repr(separator).replace("'", '"'))
