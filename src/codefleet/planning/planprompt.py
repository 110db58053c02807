"""What the planning session is told: the goal, what runs well here, the answer's shape.

The first message teaches what makes a graph run well on a CodeFleet fleet
(small tasks, disjoint file scopes, explicit dependencies, a short critical
path, a verify check where the repository has tests, descriptions that are
complete prompts) and demands ONE fenced YAML block in exactly the task-graph
file's shape. A feedback message lists the problems `graph check` found,
plainly, and asks for the whole corrected graph. A `marker` (the offline
fake model's script selector) is appended only when given. Pure text.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["build_feedback", "build_plan_prompt"]

PLAN_RULES = """\
You are planning work for CodeFleet. Several Claude Code agents will edit ONE shared working \
tree (your current directory) at the same time, each running one task of the task graph you \
write. First explore the repository with Read, Glob and Grep (you cannot write files or run \
commands here), then answer with the graph.

What makes a graph run well on this fleet:
- Small tasks. One task is one agent session of about 5 to 30 minutes with a clear end. Split \
big changes into several tasks, but never split one file's edit across two tasks that could \
run at the same time.
- Disjoint file scopes. `file_scope` lists every file the task will create or edit, new tests \
and docs included, as paths relative to the tree root. Two tasks whose scopes share a file \
never run at the same time, so a shared file serializes the fleet, and a file in three or \
more scopes is a hotspot. Give each file one owner. If two tasks must edit one file, make one \
depend on the other.
- Explicit dependencies. When a task needs another task's output (a function it calls, a \
module it imports, a route it documents), list that task's id in `depends_on`. A missing \
dependency sends an agent into a file another agent holds: its write is refused and the task \
is retried later. A needless dependency makes a long chain that the fleet must wait for.
- A short critical path. The longest chain of dependencies bounds how fast the fleet can \
finish: prefer a wide graph to a long chain, and give the first links of the longest chain a \
higher `priority` (1-5, default 3; higher runs first).
- Verification. If the repository has tests, define a check under `checks:` (a shell command \
run from the tree root, e.g. `test: python -m pytest -q`), put `verify: test` on the tasks the \
tests cover, and ask for new tests in the task that makes the change (in its own file_scope).
- Complete descriptions. The agent running a task sees only its title and description: not \
the goal, not the other tasks, not this conversation. Write each description as a complete \
prompt: what to change, in which files, how it must behave, which existing functions to use, \
which files NOT to touch. Agents cannot run shell commands; they can run the named checks.
- `estimate_min`: your estimate of the task's length in minutes (an integer), used to find \
the critical path.

Your final message must contain exactly ONE fenced YAML block, ```yaml ... ```, holding the \
whole graph in exactly this shape (no other keys: an unknown key is an error):

```yaml
checks:                        # optional: check name -> shell command
  test: python -m pytest -q
tasks:
  - id: T1                     # short and unique: letters, digits, _ . : -
    title: One line saying what the task does
    description: |
      The complete prompt for the agent that runs this task.
    file_scope: [pkg/module.py, tests/test_module.py]
    depends_on: []             # ids of the tasks that must succeed first
    priority: 3                # 1-5, higher runs first
    estimate_min: 15
    verify: test               # optional: the name of a check defined above
```

Allowed keys per task: id, title, description, file_scope, depends_on, priority, \
estimate_min, verify, max_attempts. Top-level keys: tasks, checks. CodeFleet validates the \
graph and checks it (cycles, unknown ids, paths outside the tree); if it finds errors it \
will tell you, and you answer again with the whole corrected graph."""

FEEDBACK = """\
CodeFleet cannot use this graph yet. `graph check` found:
{problems}
Answer again with the whole corrected graph: exactly one fenced YAML block, in the same \
shape. Keep what was right; fix every error above."""


def build_plan_prompt(goal: str, tasks: int | None = None, marker: str | None = None) -> str:
    """The first user message of a planning session."""
    size = (
        f"Aim for about {tasks} tasks."
        if tasks
        else "Use as many tasks as the work needs, usually between 3 and 10."
    )
    parts = [PLAN_RULES, f"# The goal\n\n{goal.strip()}\n\n{size}"]
    if marker:
        parts.append(marker)
    return "\n\n".join(parts) + "\n"


def build_feedback(errors: Sequence[str], warnings: Sequence[str] = ()) -> str:
    """The message that sends a graph back: its errors (and warnings) one per line."""
    lines = [f"- error: {e}" for e in errors] + [f"- warning: {w}" for w in warnings]
    return FEEDBACK.format(problems="\n".join(lines))
