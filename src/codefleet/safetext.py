"""Untrusted text made safe to show a person: control characters and bidi overrides escaped.

What an agent writes (a question, a summary, an error, a task title) may
carry terminal control sequences: a title change (OSC), a screen clear
(CSI), a carriage return over a line, a C1 CSI (U+009B), a bidi override
that reorders what is shown. `terminal_safe` shows each such character as a
visible escape (`\\x1b`, `\\x0d`, `\\x9b`, `\\u202e`): C0 but newline and tab,
DEL, C1, and the bidi controls. A colour sequence whole in the text (SGR,
`ESC [ ... m`, as a check's coloured output carries) is dropped instead:
colour is not content. `one_line` also escapes newline and tab, for a text
that must stay one line. Standard library only; the CLI's console, the
dashboard's frame and the report apply it (docs/security-checks.md, "What an agent
writes is shown escaped").
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["one_line", "terminal_safe"]

SGR: Final = re.compile(r"\x1b\[[0-9;:]*m")
# C0 but \t and \n, DEL, C1, and the bidi controls (marks, embeddings, overrides, isolates).
UNSAFE: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
UNSAFE_OR_BREAK: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """`text` with every control character shown as an escape; newlines and tabs kept."""
    return UNSAFE.sub(_shown, SGR.sub("", text))


def one_line(text: str) -> str:
    """`text` as `terminal_safe` shows it, with newlines and tabs escaped too: one line."""
    return UNSAFE_OR_BREAK.sub(_shown, SGR.sub("", text))
