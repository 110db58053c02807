"""The web dashboard shows an agent's control characters and bidi overrides escaped.

Every text the page shows goes in through `util.js`'s builders (textContent,
never innerHTML); node runs them over a minimal document and reads back the
text a browser would show.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tool_support import require_tool

WEB = Path(__file__).resolve().parents[2] / "src" / "codefleet" / "server" / "web"
HOSTILE = "\x1b]0;pwned\x07\x1b[2Jq\rall tasks PASS \x9b31m \u202egnp.exe \x7f"

SCRIPT = """
class Node {
  constructor(tag) { this.tag = tag; this.children = []; this.attrs = {}; this.textContent = ""; }
  setAttribute(key, value) { this.attrs[key] = value; }
  addEventListener() {}
  append(...items) { this.children.push(...items); }
}
globalThis.Node = Node;
globalThis.document = { createElement: (tag) => new Node(tag), createElementNS: (_, tag) => new Node(tag) };
const { h } = await import(process.argv[1]);
const text = process.argv[2];
const cell = h("td", { text, title: text }, text);
process.stdout.write(JSON.stringify([cell.textContent, cell.attrs.title, ...cell.children]));
"""


def test_the_pages_builders_show_a_hostile_text_escaped_in_text_titles_and_children():
    node = require_tool("node", "runs the page's util.js", package="nodejs")
    ran = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT, (WEB / "util.js").as_uri(), HOSTILE],
        capture_output=True,
        text=True,
        check=True,
    )

    for shown in json.loads(ran.stdout):
        assert re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", shown) is None
        assert "\\x1b]0;pwned\\x07\\x1b[2J" in shown and "\\u202egnp.exe" in shown


def test_no_page_module_writes_html_from_a_string():
    writes = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write")
    code = {p.name: re.sub(r"//.*", "", p.read_text()) for p in WEB.glob("*.js")}  # not comments
    assert [name for name, text in code.items() if writes.search(text)] == []
