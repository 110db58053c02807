"""`codefleet init`: a starter graph for the repository in the current directory.

`find_checks` reads what the repository says about itself (a `pyproject.toml`
that uses pytest, a `package.json` test script, a Makefile `test` target, a
`Cargo.toml`, a `go.mod`) and returns named checks run with the project's own
runner (`uv run --project . ...`, `npm test`, `make test`), each with the file
it came from. `starter_graph` renders `codefleet.yaml`: those checks and two
example tasks that fit any repository (a CONTRIBUTING.md, then a README
section pointing to it). `starter_scripts` renders, for those two tasks, a
dry-run script and an offline model script, so the plumbing can be tried on
the repository with no key. Pure functions over the files they are handed;
the command writes.
"""

from __future__ import annotations

import configparser
import json
import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

__all__ = [
    "EXAMPLE_TASK_IDS",
    "FoundCheck",
    "find_checks",
    "readme_of",
    "starter_graph",
    "starter_model_script",
    "starter_script",
]

NPM_NO_TEST: Final = "no test specified"
TEST_EXTRAS: Final = ("test", "tests", "testing", "dev")
CONTRIBUTING: Final = "CONTRIBUTING.md"
EXAMPLE_TASK_IDS: Final = ("T1", "T2")  # the starter graph's tasks, which the scripts play


@dataclass(frozen=True, slots=True)
class FoundCheck:
    name: str
    command: str
    source: str  # why: the file (and what in it) the check was inferred from


def find_checks(root: Path, have_uv: bool | None = None) -> list[FoundCheck]:
    """Named checks inferred from the repository's own files, best first, one per name."""
    uv = shutil.which("uv") is not None if have_uv is None else have_uv
    found = [*_python(root, uv), *_node(root), *_make(root), *_other(root)]
    first: dict[str, FoundCheck] = {}
    for check in found:
        first.setdefault(check.name, check)
    return list(first.values())


def _python(root: Path, uv: bool) -> list[FoundCheck]:
    pyproject = root / "pyproject.toml"
    data: dict[str, Any] = {}
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            data = {}
    where, extra = _pytest_in(data)
    poetry: list[str] = []
    if not where:
        where, poetry = _pytest_in_poetry(data)
    configured = "pyproject.toml ([tool.pytest])" if "pytest" in data.get("tool", {}) else ""
    configured = configured or _pytest_configured(root)
    if not (where or configured or (root / "setup.py").is_file() or pyproject.is_file()):
        return []
    if where or configured:
        source = f"pyproject.toml ({where})" if where else configured
        run = "pytest" if _quiet_already(root, data) else "pytest -q"
    elif (root / "tests").is_dir() or (root / "test").is_dir():
        source, run = "a tests/ directory", "python -m unittest discover -q"
    else:
        return []
    if not uv:
        command = f"python -m {run}" if run.startswith("pytest") else run
    elif extra:
        command = f"uv run --project . --extra {extra} {run}"
    elif poetry:  # uv does not read poetry's groups: the group's packages come alongside
        command = "uv run --project . " + " ".join(f"--with {p}" for p in poetry) + f" {run}"
    elif where.startswith("dependency-groups") or not run.startswith("pytest"):
        command = f"uv run --project . {run}"
    else:
        command = f"uv run --project . --with pytest {run}"
    return [FoundCheck("test", command, source)]


def _quiet_already(root: Path, data: dict[str, Any]) -> bool:
    """Whether the project's own pytest options say -q: a second one drops the `N passed`
    line a check's output should end with."""
    options = data.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("addopts", "")
    words = options.split() if isinstance(options, str) else [str(o) for o in options]
    for name, section in (
        ("pytest.ini", "pytest"),
        ("tox.ini", "pytest"),
        ("setup.cfg", "tool:pytest"),
    ):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(_text(root / name))
        except configparser.Error:
            continue
        words += parser.get(section, "addopts", fallback="").split()
    return any(w == "--quiet" or re.fullmatch(r"-q+", w) for w in words)


def _pytest_configured(root: Path) -> str:
    """Where pytest is configured or used (a file, a section, a test module), or ''."""
    for name in ("pytest.ini", "conftest.py", "tests/conftest.py"):
        if (root / name).is_file():
            return name
    for name, section in (("setup.cfg", "[tool:pytest]"), ("tox.ini", "[pytest]")):
        if section in _text(root / name):
            return f"{name} ({section})"
    candidates = [
        *root.glob("test_*.py"),
        *root.glob("*_test.py"),
        *root.glob("tests/test_*.py"),
        *root.glob("*/test_*.py"),  # test modules inside the package
    ]
    for module in sorted(candidates)[:50]:
        if re.search(r"^\s*(import|from) pytest\b", _text(module), re.M):
            return f"{module.relative_to(root)}, which imports pytest"
    return ""


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _pytest_in(data: dict[str, Any]) -> tuple[str, str | None]:
    """Where pytest is declared (for the message) and the extra to install it with, if any."""
    groups = data.get("dependency-groups", {})
    for group, deps in groups.items():
        if group == "dev" and _names_pytest(deps):
            return f"dependency-groups.{group}", None
    extras = data.get("project", {}).get("optional-dependencies", {})
    for extra in sorted(extras, key=lambda e: (e not in TEST_EXTRAS, e)):
        if _names_pytest(extras[extra]):
            return f"optional-dependencies.{extra}", extra
    for group, deps in groups.items():
        if _names_pytest(deps):
            return f"dependency-groups.{group}", None
    return "", None


def _pytest_in_poetry(data: dict[str, Any]) -> tuple[str, list[str]]:
    """The poetry group that names pytest, and its packages (pytest first), or ('', [])."""
    poetry = data.get("tool", {}).get("poetry", {})
    groups = {
        f"tool.poetry.group.{g}.dependencies": v.get("dependencies")
        for g, v in poetry.get("group", {}).items()
        if isinstance(v, dict)
    }
    groups["tool.poetry.dev-dependencies"] = poetry.get("dev-dependencies")
    for where, deps in groups.items():
        if isinstance(deps, dict) and "pytest" in deps:
            names = [str(n) for n in deps if n not in ("pytest", "python")]
            return where, ["pytest", *names]
    return "", []


def _names_pytest(deps: Any) -> bool:
    return isinstance(deps, list) and any(
        isinstance(d, str) and re.match(r"pytest\b(?![-_])", d.strip()) for d in deps
    )


def _node(root: Path) -> list[FoundCheck]:
    try:
        scripts = json.loads((root / "package.json").read_text(encoding="utf-8")).get("scripts")
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(scripts, dict):
        return []
    found = []
    test = scripts.get("test")
    if isinstance(test, str) and NPM_NO_TEST not in test:
        found.append(FoundCheck("test", "npm test", "package.json (scripts.test)"))
    if isinstance(scripts.get("lint"), str):
        found.append(FoundCheck("lint", "npm run lint", "package.json (scripts.lint)"))
    return found


def _make(root: Path) -> list[FoundCheck]:
    for name in ("Makefile", "makefile", "GNUmakefile"):
        try:
            text = (root / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        targets = set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, re.MULTILINE))
        return [
            FoundCheck(t, f"make {t}", f"{name} (target {t})")
            for t in ("test", "lint")
            if t in targets
        ]
    return []


def _other(root: Path) -> list[FoundCheck]:
    if (root / "Cargo.toml").is_file():
        return [FoundCheck("test", "cargo test", "Cargo.toml")]
    if (root / "go.mod").is_file():
        return [FoundCheck("test", "go test ./...", "go.mod")]
    return []


def readme_of(root: Path) -> str:
    """The repository's README file name (README.md when there is none yet)."""
    for name in ("README.md", "README.rst", "README.txt", "README"):
        if (root / name).is_file():
            return name
    return "README.md"


def starter_graph(root: Path, checks: list[FoundCheck]) -> str:
    """The text of a starter `codefleet.yaml`: the checks found and two example tasks."""
    readme = readme_of(root)
    verify = "    verify: test\n" if any(c.name == "test" for c in checks) else ""
    lines = [f"  {c.name}: {_scalar(c.command)}  # from {c.source}" for c in checks]
    check_block = "checks:\n" + "\n".join(lines) + "\n\n" if lines else _NO_CHECKS
    if verify:  # every task lands only once the suite passes on all that landed before it
        check_block += INTEGRATION
    return _GRAPH.format(
        repo=root.resolve().name,
        checks=check_block,
        readme=readme,
        verify=verify,
        contributing=CONTRIBUTING,
    )


def _scalar(text: str) -> str:
    dumped: str = yaml.safe_dump(text, default_style=None, width=10_000).strip()
    return dumped.removesuffix("\n...").removesuffix("...").strip()


def _contributing(root: Path, checks: list[FoundCheck]) -> str:
    test = next((c.command for c in checks if c.name == "test"), None)
    how = (
        f"Run the tests with `{test}`."
        if test
        else "Run the project's tests before you send a change."
    )
    return (
        f"# Contributing to {root.resolve().name}\n\n"
        "1. Fork and clone the repository, and create a branch for your change.\n"
        f"2. {how}\n"
        "3. Add a test for what you changed, and describe the change in the pull request.\n"
    )


def _readme_section(readme: str) -> str:
    if readme.endswith(".rst"):
        return f"\nContributing\n------------\n\nSee `{CONTRIBUTING} <{CONTRIBUTING}>`_.\n"
    return f"\n## Contributing\n\nSee [{CONTRIBUTING}]({CONTRIBUTING}).\n"


def starter_script(root: Path, checks: list[FoundCheck]) -> str:
    """A dry-run script (`run --dry-run --script`) playing the two example tasks."""
    readme = readme_of(root)
    script = {  # EXAMPLE_TASK_IDS
        "T1": [{"write": {"path": CONTRIBUTING, "content": _contributing(root, checks)}}],
        "T2": [{"append": {"path": readme, "text": _readme_section(readme)}}],
    }
    return _SCRIPT_HEADER + _dump(script)


def starter_model_script(root: Path, checks: list[FoundCheck]) -> str:
    """An offline model script (`run --offline --model-script`) for the two example tasks."""
    readme = readme_of(root)
    path = root / readme
    before = path.read_text(encoding="utf-8") if path.is_file() else ""
    readme_turns: list[dict[str, Any]] = [
        _turn(
            f"Writing the Contributing section of {readme}.",
            {
                "name": "Write",
                "input": {"file_path": readme, "content": before + _readme_section(readme)},
            },
        ),
    ]
    if before:
        readme_turns.insert(
            0, _turn(f"Reading {readme}.", {"name": "Read", "input": {"file_path": readme}})
        )
    script = {
        "T1": [
            _turn(
                f"Writing {CONTRIBUTING}.",
                {
                    "name": "Write",
                    "input": {"file_path": CONTRIBUTING, "content": _contributing(root, checks)},
                },
            ),
            {"content": [{"text": f"{CONTRIBUTING} is written."}]},
        ],
        "T2": [*readme_turns, {"content": [{"text": f"{readme} links to {CONTRIBUTING}."}]}],
    }
    return _MODEL_HEADER + _dump(script)


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, so a script reads like the file it writes."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100)


def _turn(text: str, tool_use: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"text": text}, {"tool_use": tool_use}]}


INTEGRATION: Final = """\
# Every task lands only once `test` passes on everything landed before it plus its
# own work: two tasks that each pass alone and break together are caught, and the
# later one is reworked (docs/landing.md, "Landing").
integration: test

"""

_NO_CHECKS: Final = """\
# No test command was found. Name your checks here; agents run them by name
# and `verify:` makes one decide whether a task succeeded:
# checks:
#   test: uv run --project . pytest -q

"""

_GRAPH: Final = """\
# CodeFleet task graph for {repo}, written by `codefleet init`.
#
#   codefleet graph check  # the critical path and overlapping scopes; nothing spent
#   codefleet serve &      # the coordination server, for this directory's tree
#   codefleet run          # loads this file, runs the tasks, prints the verdict;
#                          # `codefleet watch` shows it live
#
# A task: id, title, description (the prompt), file_scope (a scheduling HINT: tasks
# whose scopes overlap never run side by side; the lock is the per-file lease taken
# at write time), depends_on, priority (1-5), max_attempts, verify (a check below
# that must pass for the task to succeed). Unknown keys are an error.
#
# The checks run in a throwaway view of the tree with the project's own tools, not
# CodeFleet's environment. The two tasks are examples: replace them with yours.

{checks}tasks:
  - id: T1
    title: Write {contributing}
    file_scope: [{contributing}]
{verify}    description: |
      Write {contributing} for this repository: how to set up a development
      environment, how to run the tests, and how to propose a change. Read the
      README and the build files first, and keep it short. Change only
      {contributing}.

  - id: T2
    title: Point the README to {contributing}
    depends_on: [T1]
    file_scope: [{readme}]
    description: |
      Add a short "Contributing" section at the end of {readme} that points
      to {contributing}. Keep everything else in {readme} as it is. Change only
      {readme}.
"""

_SCRIPT_HEADER: Final = """\
# Scripted agents for the example tasks of codefleet.yaml, written by `codefleet init`:
#   codefleet run --dry-run --script codefleet.script.yaml
# No model and no key: each task's steps write through the same lease check as a
# real session's hook. The format: `codefleet run --help`, under "Dry-run script".
#
# Your own tasks: say a change as a diff next to this file (`patch: t3.diff`, from
# `git diff`) or a file to copy (`write_from: {path: P, from: FILE}`). Two tasks
# that pass alone and break together land in the order their checks finish, so
# give each the steps it plays if it is the one reworked (`rework: true`):
#   T3:                              # renames f to g
#   - patch: t3.diff
#   - rework: true                   # T4 landed first and calls f: keep f
#     append: {path: lib.py, text: "\\nf = g\\n"}
#   T4:                              # adds a caller of f
#   - write_from: {path: caller.py, from: t4/caller.py}
#   - rework: true                   # T3 landed first: call g
#     edit: {path: caller.py, old: "f(", new: "g("}
# A wait_succeeded waits while the task it names is alive (600 s at most; set it
# with `timeout: S` on the step or `wait_timeout: S` at the top of this file).
"""

_MODEL_HEADER: Final = """\
# CodeFleet's scripted model for the example tasks of codefleet.yaml, written by
# `codefleet init`:
#   codefleet run --offline --model-script codefleet.model.yaml
# Real Claude Code sessions (the bundled CLI, the real hook) against this script
# instead of a model: no key, no cost. The format: `codefleet run --help`, under
# "Offline model script".
"""
