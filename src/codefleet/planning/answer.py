"""Reading a planning session's answer: the one fenced YAML block, loaded and checked.

`extract_block` finds the fenced blocks of a reply (a closing fence sits at
the opening fence's indentation, so an indented ``` inside a YAML block
scalar does not end it) and picks the one YAML block: the blocks tagged
`yaml`/`yml`, or failing those the untagged ones; none or several is a
problem the model is told about. `judge_answer` then runs the loader `load`
uses (`api.graphfile.parse_graph`) and `graph check` (`check.check_graph`) on it, and
returns every error as one plain line (e.g. `cycle: A -> B -> A`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from codefleet.analysis.graphanalysis import GraphAnalysis
from codefleet.api.graphfile import GraphError, GraphTasks, parse_graph
from codefleet.paths import TreeRoot
from codefleet.planning.check import check_graph

__all__ = ["Verdict", "extract_block", "judge_answer"]

WHERE = "your graph"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```[ \t]*(?P<tag>[\w.+-]*)[^\n`]*\n", re.MULTILINE)
YAML_TAGS = frozenset({"yaml", "yml"})


class AnswerError(ValueError):
    """The answer has no usable YAML block; the message is written for the model."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A checked answer: the block's text, and either the graph and analysis or the errors."""

    block: str | None
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    graph: GraphTasks | None = field(default=None, compare=False)
    analysis: GraphAnalysis | None = None

    @property
    def ok(self) -> bool:
        return not self.errors and self.graph is not None


def extract_block(text: str) -> str:
    """The text of the answer's one YAML block, or `AnswerError`."""
    blocks = _blocks(text)
    tagged = [body for tag, body in blocks if tag.lower() in YAML_TAGS]
    chosen = tagged or [body for tag, body in blocks if not tag]
    if len(chosen) == 1:
        return chosen[0]
    if not chosen:
        raise AnswerError(
            "the answer has no fenced YAML block; end with exactly one ```yaml block "
            "holding the whole graph"
        )
    raise AnswerError(
        f"the answer has {len(chosen)} fenced YAML blocks; answer with exactly one, "
        "holding the whole graph"
    )


def _blocks(text: str) -> list[tuple[str, str]]:
    """`(tag, body)` of each fenced block, in order; an unclosed block runs to the end."""
    found: list[tuple[str, str]] = []
    pos = 0
    while match := FENCE.search(text, pos):
        indent = re.escape(match["indent"])
        close = re.compile(rf"^{indent}```[ \t]*$", re.MULTILINE).search(text, match.end())
        end = close.start() if close else len(text)
        found.append((match["tag"], text[match.end() : end]))
        pos = close.end() if close else len(text)
    return found


def judge_answer(text: str, tree: TreeRoot, runners: int = 3) -> Verdict:
    """Extract, load and check one answer; every problem comes back as one plain line."""
    try:
        block = extract_block(text)
    except AnswerError as err:
        return Verdict(None, (str(err),))
    try:
        raw = yaml.safe_load(block)
    except yaml.YAMLError as err:
        return Verdict(block, (f"{WHERE} is not valid YAML: {' '.join(str(err).split())}",))
    except RecursionError:
        return Verdict(block, (f"{WHERE} is nested too deeply to be a task graph",))
    try:
        graph = parse_graph(raw, WHERE)
    except GraphError as err:
        return Verdict(block, (str(err),))
    analysis = check_graph(graph, tree, runners)
    return Verdict(
        block,
        tuple(f.message for f in analysis.errors),
        tuple(f.message for f in analysis.warnings),
        graph,
        analysis,
    )
