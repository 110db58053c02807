"""The test index (`tests/README.md`) is current, and every module has a test file or says why not.

Each module of `src/codefleet` with code is imported (or run with `-m`) by at
least one test file, or is listed in `testindex.THROUGH` with the module it is
tested through, which a test file imports and which imports it. An exception no
longer needed (a test file now imports the module) fails too, so the list stays short.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import testindex
from testindex import (
    INDEX,
    REGENERATE,
    exceptions,
    importers,
    product_modules,
    reaches,
    render,
    source_edges,
)


def test_the_index_is_current() -> None:
    assert INDEX.read_text(encoding="utf-8") == render(), (
        f"tests/README.md is stale: run `{REGENERATE}` and commit it"
    )


def test_every_module_is_imported_by_a_test_file_or_excepted_with_a_reason() -> None:
    found = importers()
    excepted = exceptions()
    modules = product_modules()
    untested = [
        m
        for m, p in modules.items()
        if testindex.has_code(p) and not found[m] and m not in excepted
    ]
    assert untested == [], (
        "no test file imports these modules: add a test that imports each, or a THROUGH "
        "entry in tests/testindex.py naming the module it is tested through and why"
    )


def test_each_exception_is_needed_and_reached_through_a_tested_module() -> None:
    found = importers()
    edges = source_edges()
    named = [m for _, _, group in testindex.THROUGH for m in group]
    assert len(named) == len(set(named)), "a module listed twice in THROUGH"
    wrong = []
    for module, (via, why) in sorted(exceptions().items()):
        if module not in edges:
            wrong.append((module, "no such module"))
        elif found[module]:
            wrong.append((module, "a test file imports it now: remove its THROUGH entry"))
        elif not found.get(via):
            wrong.append((module, f"no test file imports {via} either"))
        elif not reaches(edges, via, module):
            wrong.append((module, f"{via} does not import it"))
        elif not why:
            wrong.append((module, "no reason"))
        wrong.extend(
            (module, f"no test file {cited}")
            for cited in re.findall(r"`([\w/]+\.py)`", why)
            if not (testindex.TESTS / cited).is_file()
        )
    assert wrong == []


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_an_import_counts_for_the_module_it_names_and_a_dash_m_for_its_main(
    tmp_path: Path,
) -> None:
    src, tests = tmp_path / "src", tmp_path / "tests"
    write(
        src,
        {
            "codefleet/__init__.py": '"""The package."""\n',
            "codefleet/models.py": "X = 1\n",
            "codefleet/cli/__init__.py": '"""The command line."""\n',
            "codefleet/cli/__main__.py": "from codefleet.cli import app\n",
            "codefleet/cli/app.py": "from .. import models\n",
            "codefleet/cli/quiet.py": "Y = 2\n",
        },
    )
    write(
        tests,
        {
            "unit/test_models.py": '"""The models."""\nfrom codefleet.models import X\n',
            "unit/test_app.py": '"""The app."""\nfrom codefleet.cli import app\n',
            "integration/test_run.py": (
                '"""Runs it."""\nimport sys\n\n\ndef test_it():\n'
                '    cmd = [sys.executable, "-m", "codefleet.cli"]\n'
            ),
        },
    )
    found = importers(tests, src)
    assert {m: sorted(p.relative_to(tests).as_posix() for p in f) for m, f in found.items()} == {
        "codefleet": [],
        "codefleet.models": ["unit/test_models.py"],
        "codefleet.cli": [],
        "codefleet.cli.__main__": ["integration/test_run.py"],
        "codefleet.cli.app": ["unit/test_app.py"],
        "codefleet.cli.quiet": [],
    }
    edges = source_edges(src)
    assert edges["codefleet.cli.app"] == {"codefleet.models"}  # a relative import, resolved
    assert reaches(edges, "codefleet.cli.__main__", "codefleet.models")
    assert not reaches(edges, "codefleet.cli.__main__", "codefleet.cli.quiet")


def test_the_index_shows_a_modules_own_unit_file_first_and_skips_docstring_only_packages(
    tmp_path: Path,
) -> None:
    src, tests = tmp_path / "src", tmp_path / "tests"
    write(src, {"codefleet/__init__.py": '"""The package."""\n', "codefleet/models.py": "X = 1\n"})
    write(
        tests,
        {
            "integration/test_api.py": '"""The API | its models."""\nimport codefleet.models\n',
            "unit/test_models.py": '"""The models.\n\nMore."""\nfrom codefleet import models\n',
        },
    )
    text = render(tests, src)
    assert "| `codefleet.models` | **unit/test_models.py**, integration/test_api.py |" in text
    assert "| `codefleet` |" not in text
    assert "| [test_models.py](unit/test_models.py) | The models. |" in text
    assert "| [test_api.py](integration/test_api.py) | The API \\| its models. |" in text
    assert "1 modules: 1 imported by a test file, 0 tested through another module." in text


def test_every_test_file_has_a_docstring_for_its_line_in_the_index() -> None:
    missing = [
        p.name for p in testindex.test_files() if not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert missing == []
