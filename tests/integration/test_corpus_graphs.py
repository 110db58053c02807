"""The bad-graph corpus through both doors: `codefleet load FILE` and `POST /tasks`.

Each item is a YAML text. Through the CLI (Typer's runner, in process, with the
token) it must exit 1 with a one-line `error:` naming the problem and no
traceback; through HTTP (the same graph as JSON, or the raw bytes when it is
not even a JSON value) it must be a 422 in the error envelope. Either way the
database and the tree are exactly as before. The server already holds task
`T1`, so a graph may depend on it, and may not reuse its id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from corpus_support import Witness, assert_envelope
from fleet_support import server_settings
from typer.testing import CliRunner

from codefleet.api.wire import MAX_DESCRIPTION, MAX_TASKS
from codefleet.cli.app import app
from codefleet.server.thread import ServerThread

TOKEN = "corpus-token"


@dataclass(frozen=True)
class Bad:
    text: str | Callable[[], str] | bytes
    says: str  # what the CLI's message must contain
    code: str = "invalid_request"  # the HTTP error code
    status: int = 422
    through_cli: bool = (
        True  # False where parsing the YAML alone takes many seconds, or the CLI accepts it
    )
    body: Callable[[], bytes] | None = None  # the HTTP body, when not the YAML as JSON

    def content(self) -> str | bytes:
        return self.text() if callable(self.text) else self.text

    def http_body(self) -> bytes:
        """The graph as JSON when it parses to a JSON value; its raw bytes otherwise."""
        if self.body is not None:
            return self.body()
        content = self.content()
        try:
            return json.dumps(yaml.safe_load(content)).encode()
        except (yaml.YAMLError, RecursionError, TypeError, ValueError):
            return content.encode() if isinstance(content, str) else content


def many_tasks() -> str:
    return "tasks:\n" + "".join(
        f"  - {{title: t{n}, description: d}}\n" for n in range(MAX_TASKS + 1)
    )


def many_tasks_json() -> bytes:
    return json.dumps(
        {"tasks": [{"title": f"t{n}", "description": "do it"} for n in range(MAX_TASKS + 1)]}
    ).encode()


def alias_bomb() -> str:
    """Nine levels of nine aliases: 9**8 strings if anything ever expanded it."""
    lines = [
        "tasks:",
        "  - title: t",
        "    description: d",
        "    file_scope:",
        "      - &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
    ]
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"      - &{name} [{', '.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


def graph(*tasks: str) -> str:
    return "tasks:\n" + "".join(f"  - {t}\n" for t in tasks)


CORPUS: dict[str, Bad] = {
    "malformed YAML": Bad("tasks:\n  - id: A\n    title: [unclosed\n", "is not valid YAML"),
    "tabs for indentation": Bad("tasks:\n\t- title: a\n", "is not valid YAML"),
    "not UTF-8": Bad(b"tasks:\n  - title: \xff\xfe\n", "is not UTF-8 text", "http_error", 400),
    "nested too deeply to parse": Bad("tasks: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    "an empty file": Bad("", "must be a mapping with a 'tasks' list"),
    "a top-level list": Bad("- id: A\n  title: a\n", "must be a mapping"),
    "a scalar": Bad("just some words\n", "must be a mapping"),
    "no tasks key": Bad("jobs:\n  - title: a\n", "unknown top-level key 'jobs' (known keys: checks, integration, lease_granularity, on_stale_read, sequences, shell, shell_network, tasks)"),
    "an unknown top-level key": Bad(graph("{id: A, title: a, description: d}") + "version: 2\n", "unknown top-level key 'version'"),
    "a misspelled top-level key": Bad("task:\n  - title: a\n", "unknown top-level key 'task' (did you mean tasks?)"),
    "an empty task list": Bad("tasks: []\n", "'tasks' must be a non-empty list"),
    "a task that is a string": Bad(graph("just a string"), "task #1 must be a mapping"),
    "a two-task cycle": Bad(graph("{id: A, title: a, depends_on: [B], description: d}", "{id: B, title: b, depends_on: [A], description: d}"), "cycle: A -> B -> A", "invalid_graph"),
    "a three-task cycle": Bad(graph("{id: A, title: a, depends_on: [C], description: d}", "{id: B, title: b, depends_on: [A], description: d}", "{id: C, title: c, depends_on: [B], description: d}"), "cycle: A -> C -> B -> A", "invalid_graph"),
    "a self-dependency": Bad(graph("{id: A, title: a, depends_on: [A], description: d}"), "cycle: A -> A", "invalid_graph"),
    "duplicate ids": Bad(graph("{id: A, title: a, description: d}", "{id: A, title: again, description: d}"), "used twice", "invalid_graph"),
    "the id of a stored task": Bad(graph("{id: T1, title: again, description: d}"), "task T1 is already loaded on the server: nothing was created", "invalid_graph", through_cli=False),  # `load` redefines a task not started (test_graph_edits)
    "an unknown dependency": Bad(graph("{id: A, title: a, depends_on: [T1, ghost], description: d}"), "depends on unknown task ghost", "invalid_graph"),
    "an invalid id": Bad(graph("{id: 'has space', title: a, description: d}"), "must be 1-64 letters", "invalid_graph"),
    "an id YAML reads as a boolean": Bad(graph("{id: yes, title: a, description: d}"), "id: Input should be a valid string"),
    "a title YAML reads as a date": Bad(graph("{title: 2026-01-01, description: d}"), "title: Input should be a valid string"),
    "a missing title": Bad(graph("{id: A, description: d}"), "title: Field required"),
    "priority 0": Bad(graph("{title: a, priority: 0, description: d}"), "priority: Input should be greater than or equal to 1"),
    "priority 6": Bad(graph("{title: a, priority: 6, description: d}"), "priority: Input should be less than or equal to 5"),
    "priority as a word": Bad(graph("{title: a, priority: high, description: d}"), "priority: Input should be a valid integer"),
    "priority as a float": Bad(graph("{title: a, priority: 3.5, description: d}"), "priority: Input should be a valid integer"),
    "max_attempts 0": Bad(graph("{title: a, max_attempts: 0, description: d}"), "max_attempts: Input should be greater than or equal to 1"),
    "file_scope as a string": Bad(graph("{title: a, file_scope: a.py, description: d}"), "file_scope: Input should be a valid list"),
    "depends_on as a number": Bad(graph("{title: a, depends_on: 7, description: d}"), "depends_on: Input should be a valid list"),
    "a scope outside the tree": Bad(graph("{title: a, file_scope: [../../etc/passwd], description: d}"), "resolves outside the working tree", "invalid_graph"),
    "a scope inside .git": Bad(graph("{title: a, file_scope: [.git/config], description: d}"), "is a protected path", "invalid_graph"),
    "an unknown key in a task": Bad(graph("{title: a, blocked_by: [T1], description: d}"), "unknown key 'blocked_by' (known keys: agent, ask, depends_on, description,"),
    "a misspelled key in a task": Bad(graph("{title: a, file_scopes: [a.py], description: d}"), "task #1: unknown key 'file_scopes' (did you mean file_scope?)"),
    "a missing description": Bad(graph("{id: OK, title: fine, description: d}", "{id: A, title: a}"), "task #2 (A): description: Field required"),
    "an empty description": Bad(graph("{id: A, title: a, description: ''}"), "task #1 (A): description: String should have at least 1 character"),
    "a description of only whitespace": Bad(graph("{id: A, title: a, description: '  \t '}"), "task #1 (A): description: Value error, a task needs a description"),
    "a huge description": Bad(lambda: graph("{title: a, description: " + "x" * (MAX_DESCRIPTION + 1) + "}"), "description: String should have at most 100000 characters"),
    # The CLI's YAML parse of 50,001 tasks alone takes ~13 s here; its refusal is the server's.
    "more tasks than a graph may hold": Bad(many_tasks, "List should have at most 50000 items", through_cli=False, body=many_tasks_json),
    # JSON has no aliases: expanded, the bomb is over the body limit; posted as it is, not JSON.
    "an alias bomb": Bad(alias_bomb, "file_scope.0: Input should be a valid string", body=lambda: alias_bomb().encode()),
}  # fmt: skip


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, Witness]]:
    root = tmp_path_factory.mktemp("graphs")
    tree = root / "tree"
    (tree / ".git").mkdir(parents=True)
    (tree / "a.py").write_text("A = 1\n")
    settings = server_settings(root, tree, token=TOKEN)
    with ServerThread(settings) as server:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        httpx.post(
            f"{server.url}/tasks",
            json={"tasks": [{"id": "T1", "title": "t", "description": "do it"}]},
            headers=headers,
        ).raise_for_status()
        yield server, Witness(settings.db, tree)


@pytest.mark.parametrize("item", [n for n, b in CORPUS.items() if b.through_cli])
def test_a_bad_graph_file_is_refused_by_load_with_a_clear_error_and_changes_nothing(
    door: tuple[ServerThread, Witness], tmp_path: Path, item: str
) -> None:
    server, witness = door
    bad = CORPUS[item]
    content = bad.content()
    graph_file = tmp_path / "graph.yaml"
    graph_file.write_bytes(content.encode() if isinstance(content, str) else content)
    before = witness.picture()

    result = CliRunner().invoke(
        app, ["load", str(graph_file), "--server", server.url, "--token", TOKEN]
    )

    said = " ".join(result.stderr.split())  # rich wraps long lines
    assert result.exit_code == 1, result.output
    assert said.startswith("error:") and bad.says in said, said
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert witness.picture() == before


@pytest.mark.parametrize("item", CORPUS, ids=list(CORPUS))
def test_the_same_bad_graph_posted_is_a_422_envelope_and_changes_nothing(
    door: tuple[ServerThread, Witness], item: str
) -> None:
    server, witness = door
    bad = CORPUS[item]
    before = witness.picture()

    response = httpx.post(
        f"{server.url}/tasks",
        content=bad.http_body(),
        timeout=60,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )

    assert_envelope(response, bad.status, bad.code)
    assert witness.picture() == before


def test_the_corpus_names_every_kind_the_issue_lists() -> None:
    kinds = [
        "malformed",
        "a top-level list",
        "cycle",
        "self-dependency",
        "duplicate ids",
        "unknown dependency",
        "as a word",
        "priority 6",
        "empty file",
        "huge",
        "unknown key",
        "missing description",
        "empty description",
        "only whitespace",
    ]
    assert all(any(kind in name for name in CORPUS) for kind in kinds)


def test_a_good_graph_still_loads_after_the_corpus(
    door: tuple[ServerThread, Witness], tmp_path: Path
) -> None:
    server, _ = door
    graph_file = tmp_path / "good.yaml"
    graph_file.write_text(graph("{id: G, title: good, depends_on: [T1], description: d}"))

    result = CliRunner().invoke(
        app, ["load", str(graph_file), "--server", server.url, "--token", TOKEN, "--json"]
    )

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"created": ["G"], "redefined": []}


def test_a_task_without_a_description_is_refused_naming_the_file_and_the_task(
    door: tuple[ServerThread, Witness], tmp_path: Path
) -> None:
    server, witness = door
    graph_file = tmp_path / "no-prompt.yaml"
    graph_file.write_text(graph("{id: P1, title: fine, description: d}", "{id: P2, title: bare}"))
    before = witness.picture()

    result = CliRunner().invoke(
        app, ["load", str(graph_file), "--server", server.url, "--token", TOKEN]
    )

    said = "".join(result.stderr.split())  # rich may wrap the path anywhere
    assert result.exit_code == 1
    assert "no-prompt.yaml:task#2(P2):description:Fieldrequired" in said, result.stderr
    assert witness.picture() == before
