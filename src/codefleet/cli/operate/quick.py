"""The commands a person types while a fleet runs, without the full command line.

`tasks`, `say`, `answer`, `questions`, `hold` and `release` are typed in a
second terminal beside a running fleet, where every second of start-up is
felt: through Typer (which builds each option with pydantic), the settings
(pydantic-settings), httpx and Rich they took 1 to 2 s to start on the project's
machine. The `codefleet` executable (`cli.launch`) hands them here first:
standard library only, the same requests, the same words and exit codes.

`run` answers None, and the launcher goes on to the full command line, for
anything it does not take exactly as Typer would: `--help`, an option it
does not know, a missing or extra argument, `--`, a setting it cannot read as
pydantic would (`cli.operate.quickio.Unsure`), and `tasks ID` without `--json` or
`--patch` (its detail view is Rich's). The Typer commands (`cli.operate.taskcmds`,
`cli.run.join`) stay the reference and the help; tests/unit/test_quick_commands.py
holds the two to the same output.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from codefleet.cli.operate.quickio import (
    Address,
    Failed,
    Unsure,
    address,
    call,
    error,
    not_codefleet_text,
    print_json,
    say,
)

__all__ = ["COMMANDS", "RELEASE_FORMS", "Parsed", "parse", "run"]

# What a bare `codefleet release` says: its two forms (it cannot guess which one is meant).
RELEASE_FORMS: Final = (
    "release needs what to give back: `codefleet release NAME...` gives back resources a "
    "person holds (codefleet hold NAME); `codefleet release --session ID` (or "
    "--all-interactive) frees the file leases of a person's Claude Code session (codefleet join)"
)
COMMON: Final = {"--server": True, "--token": True, "--json": False}  # True: takes a value
# Per command: the options (True: takes a value) and the positional arguments (least, most).
GRAMMAR: Final[dict[str, tuple[dict[str, bool], int, int | None]]] = {
    "tasks": ({**COMMON, "--status": True, "--patch": False}, 0, 1),
    "say": (COMMON, 2, 2),
    "answer": ({**COMMON, "--question": True}, 2, 2),
    "questions": (COMMON, 0, 0),
    "hold": ({**COMMON, "--user": True}, 1, None),
    "release": ({**COMMON, "--session": True, "--all-interactive": False}, 0, None),
}
COMMANDS: Final = frozenset(GRAMMAR)


class Parsed(NamedTuple):
    command: str
    args: tuple[str, ...]
    options: Mapping[str, Any]  # "--status" -> "failed"; a flag -> True

    def opt(self, name: str) -> Any:
        return self.options.get(name)


def parse(argv: Sequence[str]) -> Parsed | None:
    """`argv` (the command first) as the command's arguments and options, or None when it is
    anything Typer might read otherwise."""
    if not argv or argv[0] not in GRAMMAR:
        return None
    known, least, most = GRAMMAR[argv[0]]
    args: list[str] = []
    options: dict[str, Any] = {}
    rest = list(argv[1:])
    while rest:
        word = rest.pop(0)
        if not word.startswith("-") or word == "-":
            args.append(word)
            continue
        name, eq, value = word.partition("=")
        if name not in known or name in options:
            return None  # --help, --, an unknown or repeated option: Typer's to answer
        if not known[name]:
            if eq:
                return None
            options[name] = True
        elif eq:
            options[name] = value
        elif rest and not rest[0].startswith("-"):
            options[name] = rest.pop(0)
        else:
            return None
    if len(args) < least or (most is not None and len(args) > most):
        return None
    return Parsed(argv[0], tuple(args), options)


def run(argv: Sequence[str], env: Mapping[str, str]) -> int | None:
    """Run the command on the fast path: its exit status, or None for the full command line."""
    parsed = parse(argv)
    if parsed is None:
        return None
    command = COMMAND_FUNCS[parsed.command]
    where: list[Address] = []

    def at() -> Address:
        where.append(address(parsed.opt("--server"), parsed.opt("--token"), env))
        return where[-1]

    try:
        return command(parsed, at)
    except Unsure:
        return None
    except Failed as err:
        return error(str(err))
    except (KeyError, TypeError, AttributeError) as err:  # an answer CodeFleet never sends
        url = where[-1].url if where else "the server"
        return error(not_codefleet_text(url, f"{type(err).__name__}: {err}"))


Where = Callable[[], Address]


def _tasks(p: Parsed, where: Where) -> int | None:
    task_id = p.args[0] if p.args else None
    status, patch, as_json = p.opt("--status"), p.opt("--patch"), p.opt("--json")
    if task_id and not (patch or as_json):
        return None  # the detail view is Rich's (cli.operate.taskcmds)
    if status is not None:
        # fast path: loaded only by the command that needs it
        from codefleet.models import TaskStatus

        if status not in tuple(TaskStatus):
            return error(f"unknown status {status!r}: one of {', '.join(tuple(TaskStatus))}")
    if patch and not task_id:
        return error("--patch needs a task ID: `codefleet tasks ID --patch`")
    at = where()
    if task_id and patch:
        found = call(at, "GET", f"/tasks/{_part(task_id)}/patch?format=json")
        if as_json:
            print_json(found)
        elif not found["files"]:
            say(f"task {task_id} has no recorded change", stream=sys.stderr)
        else:
            sys.stdout.write("".join(f["diff"] for f in found["files"]))
        return 0
    if task_id:
        print_json(call(at, "GET", f"/tasks/{_part(task_id)}"))
        return 0
    query = "/tasks?limit=100000&offset=0" + (f"&status={_part(status)}" if status else "")
    rows = list(call(at, "GET", query)["tasks"])
    if as_json:
        print_json(rows)
    else:
        # fast path: loaded only by the command that needs it
        from codefleet.cli.operate.quicktable import NO_TASKS_HINT, task_table

        task_table(rows)
        if not rows and not status:
            print(NO_TASKS_HINT, file=sys.stderr)
    return 0


def _say(p: Parsed, where: Where) -> int:
    task_id, text = p.args
    said = call(where(), "POST", f"/tasks/{_part(task_id)}/messages", {"text": text})
    if p.opt("--json"):
        print_json(said)
        return 0
    how = {
        "running": "the running session gets it at its next turn boundary",
        "next_attempt": f"attempt {said['attempt']}'s prompt will carry it",
    }[str(said["delivered"])]
    say(f"{task_id}: message #{said['seq']} kept; {how}")
    return 0


def _questions(p: Parsed, where: Where) -> int:
    found = call(where(), "GET", "/questions")["questions"]
    if p.opt("--json"):
        print_json(found)
        return 0
    if not found:
        say("no open question")
    for q in found:
        say(
            f"{q['task_id']} asks ({q['question_id']}, attempt {q['attempt']}): "
            f'{q["text"]}\n  answer: codefleet answer {q["task_id"]} "..."'
        )
    return 0


def _answer(p: Parsed, where: Where) -> int:
    task_id, text = p.args
    body: dict[str, Any] = {"text": text}
    if p.opt("--question") is not None:
        body["question_id"] = p.opt("--question")
    answered = call(where(), "POST", f"/tasks/{_part(task_id)}/answers", body)
    if p.opt("--json"):
        print_json(answered)
        return 0
    say(f"{task_id}: answered {answered['question_id']}")
    return 0


def _hold(p: Parsed, where: Where) -> int:
    person = p.opt("--user") or _login()
    names = list(p.args)
    body = {"session_id": f"hold-{person}", "user": person, "names": names}
    answer = call(where(), "POST", "/interactive/hold", body)
    if p.opt("--json"):
        print_json(answer)
    if answer["decision"] != "allow":
        for denied in answer["denied"]:
            say(f"refused: {denied['message']}")
        return 1
    if not p.opt("--json"):
        say(
            f"{answer['holder']['name']} holds {', '.join(names)}; "
            f"`codefleet release {' '.join(names)}` gives it back"
        )
    return 0


def _login() -> str:
    # fast path: loaded only by the command that needs it
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in this environment
        return "you"


def _release(p: Parsed, where: Where) -> int:
    session, every = p.opt("--session"), bool(p.opt("--all-interactive"))
    if not p.args and (session is None) == (not every):
        error(RELEASE_FORMS)
        return 2
    at = where()
    if p.args:
        return _unhold(at, list(p.args), bool(p.opt("--json")))
    body: dict[str, Any] = {"all": True} if every else {"session_id": _session(at, session)}
    answer = call(at, "POST", "/interactive/release", body)
    if p.opt("--json"):
        print_json(answer)
        return 0
    if not answer["released"]:
        say("no interactive session held anything")
    for item in answer["released"]:
        paths = ", ".join(item["paths"]) or "no files"
        say(f"released {item['name']} ({item['session_id']}): {paths}")
    return 0


def _unhold(at: Address, names: list[str], as_json: bool) -> int:
    answer = call(at, "POST", "/interactive/unhold", {"names": names})
    if as_json:
        print_json(answer)
    else:
        for name in answer["released"]:
            say(f"released {name}")
        for name, why in answer["refused"].items():
            say(f"not released: {name} ({why})")
    return 1 if answer["refused"] else 0


def _session(at: Address, given: str) -> str:
    """A full session id from an id, a prefix, or the session's name (`cli.run.join`'s rule)."""
    agents = call(at, "GET", "/agents")["agents"]
    sessions = [a for a in agents if a.get("kind") == "interactive"]
    exact = [a for a in sessions if given in (a["session_id"], a["name"])]
    found = exact or [a for a in sessions if a["session_id"].startswith(given)]
    if len(found) == 1:
        return str(found[0]["session_id"])
    if not found:
        raise Failed(f"no interactive session matches {given!r}")
    names = ", ".join(a["name"] for a in found)
    raise Failed(f"{given!r} matches several sessions ({names}); give more of the id")


def _part(text: str) -> str:
    """`text` percent-encoded for a URL's path or query, as httpx sends it."""
    # fast path: loaded only by the command that needs it
    from urllib.parse import quote

    return quote(text, safe="")


COMMAND_FUNCS: Final[dict[str, Callable[[Parsed, Where], int | None]]] = {
    "tasks": _tasks,
    "say": _say,
    "answer": _answer,
    "questions": _questions,
    "hold": _hold,
    "release": _release,
}
