"""Whether a check's command can start: its programs, looked up the way a check runs them.

A check runs through `/bin/sh -c` in a view of the tree with `check_env`
(CodeFleet's own virtualenv off PATH). A shell that cannot find a command's
program exits 127, one that finds it but cannot execute it 126 (`NOT_RUNNABLE`):
no attempt of the agent can change that, so a verify that exits so is
`check_unrunnable` (the task fails at once, not retried), and `graph check`,
`load` and `doctor` warn beforehand (`check_warnings`).

The lookup is a best effort over simple commands: a word after `&&`, `||`, `;`,
`|`, `&` or a parenthesis starts a new command; `NAME=value` prefixes,
redirection targets, shell builtins and words with expansions are skipped,
never guessed. A program with a `/` is looked up in the tree (the check's copy
of it); any other on the checks' PATH.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from codefleet.fleet.views.shell import check_env

__all__ = [
    "NOT_RUNNABLE",
    "check_warnings",
    "command_programs",
    "missing_programs",
    "not_started_text",
]

NOT_RUNNABLE: Final = {126: "is not executable", 127: "was not found"}
_SHELL_WORDS: Final = frozenset(
    [
        "!",
        "{",
        "}",
        "[",
        "[[",
        ":",
        ".",
        "alias",
        "break",
        "case",
        "cd",
        "command",
        "continue",
        "do",
        "done",
        "echo",
        "elif",
        "else",
        "env",
        "esac",
        "eval",
        "exec",
        "exit",
        "export",
        "false",
        "fi",
        "for",
        "function",
        "if",
        "in",
        "printf",
        "pwd",
        "read",
        "return",
        "set",
        "shift",
        "source",
        "test",
        "then",
        "time",
        "true",
        "type",
        "ulimit",
        "umask",
        "unset",
        "until",
        "wait",
        "while",
    ]
)
_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PUNCTUATION: Final = frozenset("();<>|&")


def command_programs(command: str) -> list[str]:
    """The program word of each simple command in `command` (see the module docstring)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unterminated quote: the shell will say so itself
        return []
    programs: list[str] = []
    starts, target = True, False
    for word in words:
        if set(word) <= _PUNCTUATION:
            target = "<" in word or ">" in word
            starts = starts or not target
            continue
        if target or (starts and _ASSIGNMENT.match(word)):
            target = False
            continue
        if starts and word not in _SHELL_WORDS and not set(word) & set("$`*?~"):
            programs.append(word)
        starts = False
    return programs


def missing_programs(command: str, tree: Path, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """`(program, why)` for each program of `command` that would make the shell exit 126/127."""
    found = []
    for program in command_programs(command):
        if "/" in program:
            path = tree / program
            if not path.is_file():
                found.append((program, NOT_RUNNABLE[127]))
            elif not os.access(path, os.X_OK):
                found.append((program, NOT_RUNNABLE[126]))
        elif shutil.which(program, path=env.get("PATH", "")) is None:
            found.append((program, NOT_RUNNABLE[127]))
    return found


def not_started_text(found: Sequence[tuple[str, str]], exit_code: int) -> tuple[str, str]:
    """`(what could not start, what to install)` after an exit of 126/127.

    `found` is `missing_programs` for the command; empty when the missing program is
    deeper (in a script the command runs), and then the words say "a program it names".
    """
    named = found or [("a program it names", NOT_RUNNABLE.get(exit_code, "could not start"))]
    what = "; ".join(f"{program} {why}" for program, why in named)
    return what, " and ".join(program for program, _ in found) or "the program"


def check_warnings(checks: Mapping[str, str], tree: Path) -> list[str]:
    """One line per check whose command names a program that cannot start where checks run."""
    env = check_env(tree)
    return [
        f"check {name}: {program} {why} where checks run (CodeFleet's own environment is off "
        f"their PATH): the check would exit {127 if why == NOT_RUNNABLE[127] else 126} and a task "
        f"it verifies fail at once (check_unrunnable). Install it, or fix the command: {command}"
        for name, command in sorted(checks.items())
        for program, why in missing_programs(command, tree, env)
    ]
