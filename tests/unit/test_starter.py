"""`codefleet init`'s reading of a repository: which checks it names, and the files it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from codefleet.api.graphfile import parse_graph
from codefleet.cli.start.starter import (
    find_checks,
    starter_graph,
    starter_model_script,
    starter_script,
)
from codefleet.fleet.scripted import parse_script
from codefleet.offlinemodels.modelscripts import scripts_from_dict


def found(root: Path, uv: bool = True) -> list[tuple[str, str]]:
    return [(c.name, c.command) for c in find_checks(root, have_uv=uv)]


def test_pytest_in_the_dev_group_runs_through_the_projects_own_uv_environment(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text('[dependency-groups]\ndev = ["pytest>=8"]\n')

    assert found(tmp_path) == [("test", "uv run --project . pytest -q")]
    assert found(tmp_path, uv=False) == [("test", "python -m pytest -q")]


def test_pytest_in_an_extra_installs_that_extra(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[project.optional-dependencies]\ntest = ["pytest", "hypothesis"]\n'
    )

    assert found(tmp_path) == [("test", "uv run --project . --extra test pytest -q")]


def test_test_modules_that_import_pytest_without_any_config_get_pytest_alongside(
    tmp_path: Path,
) -> None:
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "test_lib.py").write_text("import pytest\n")

    [check] = find_checks(tmp_path, have_uv=True)
    assert check.command == "uv run --project . --with pytest pytest -q"
    assert check.source == "test_lib.py, which imports pytest"


def test_pytest_in_a_poetry_dev_group_runs_with_that_groups_packages(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "x"\n[tool.poetry.dependencies]\npython = ">=3.7"\n'
        '[tool.poetry.group.dev.dependencies]\nmypy = "*"\npytest = "*"\nhypothesis = "*"\n'
    )

    [check] = find_checks(tmp_path, have_uv=True)
    assert (
        check.command == "uv run --project . --with pytest --with mypy --with hypothesis pytest -q"
    )
    assert check.source == "pyproject.toml (tool.poetry.group.dev.dependencies)"
    assert found(tmp_path, uv=False) == [("test", "python -m pytest -q")]


def test_poetrys_older_dev_dependencies_table_is_read_too(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.poetry.dev-dependencies]\npytest = "^7"\n')

    assert found(tmp_path) == [("test", "uv run --project . --with pytest pytest -q")]


def test_a_test_module_inside_the_package_that_imports_pytest_is_found(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "test_lib.py").write_text("import pytest\n")

    [check] = find_checks(tmp_path, have_uv=True)
    assert check.source == "lib/test_lib.py, which imports pytest"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"package.json": json.dumps({"scripts": {"test": "vitest", "lint": "eslint ."}})},
            [("test", "npm test"), ("lint", "npm run lint")],
        ),
        (
            {
                "package.json": json.dumps(
                    {"scripts": {"test": 'echo "Error: no test specified" && exit 1'}}
                )
            },
            [],
        ),
        (
            {"Makefile": "all:\n\tcc x.c\n\ntest: all\n\t./x --test\nlint:\n\tclang-tidy x.c\n"},
            [("test", "make test"), ("lint", "make lint")],
        ),
        ({"Cargo.toml": "[package]\nname = 'x'\n"}, [("test", "cargo test")]),
        ({"go.mod": "module x\n"}, [("test", "go test ./...")]),
        ({"README.md": "# nothing to run\n"}, []),
    ],
    ids=["npm scripts", "npm's placeholder test", "a Makefile", "Cargo", "Go", "nothing"],
)
def test_other_ecosystems_use_their_own_runner(
    tmp_path: Path, files: dict[str, str], expected: list[tuple[str, str]]
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)

    assert found(tmp_path) == expected


def test_the_starter_files_load_and_script_exactly_the_example_tasks(tmp_path: Path) -> None:
    (tmp_path / "README.rst").write_text("Title\n=====\n")
    (tmp_path / "pyproject.toml").write_text('[dependency-groups]\ndev = ["pytest"]\n')
    checks = find_checks(tmp_path, have_uv=True)

    graph = parse_graph(yaml.safe_load(starter_graph(tmp_path, checks)))
    script = parse_script(yaml.safe_load(starter_script(tmp_path, checks)))
    model = scripts_from_dict(yaml.safe_load(starter_model_script(tmp_path, checks)))

    assert [t["id"] for t in graph] == ["T1", "T2"]
    assert graph.checks == {"test": "uv run --project . pytest -q"}
    assert graph[0]["verify"] == "test" and graph[1]["file_scope"] == ["README.rst"]
    assert set(script) == set(model) == {"T1", "T2"}
    written = model["T2"][1].content[1]
    assert written.input["content"].startswith("Title\n=====\n")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-q --strict-markers"\n'),
        ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = ["-rs", "--quiet"]\n'),
        ("setup.cfg", "[tool:pytest]\naddopts = -q\n"),
        ("pytest.ini", "[pytest]\naddopts =\n    -q\n    -x\n"),
        ("tox.ini", "[pytest]\naddopts = -qq\n"),
    ],
)
def test_a_project_whose_pytest_options_are_quiet_already_gets_no_second_q(
    tmp_path: Path, name: str, text: str
) -> None:
    """A second -q drops pytest's closing `N passed` line, which the check's reader needs."""
    (tmp_path / name).write_text(text)

    assert found(tmp_path, uv=False) == [("test", "python -m pytest")]


def test_the_starter_scripts_commented_example_is_a_script_with_rework_steps(
    tmp_path: Path,
) -> None:
    """The dry-run script `init --scripts` writes shows how a script handles either landing
    order; uncommented, its example is a script that plays (its files aside)."""
    text = starter_script(tmp_path, [])
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#   T3:"))
    example = [line[4:] for line in lines[start:] if line.startswith("#   ")]
    raw = yaml.safe_load("\n".join(example))
    assert ["rework" if "rework" in s else next(iter(s)) for s in raw["T3"]] == [
        "patch",
        "rework",
    ]
    (tmp_path / "t3.diff").write_text("--- a/lib.py\n+++ b/lib.py\n@@ -1 +1 @@\n-f\n+g\n")
    (tmp_path / "t4").mkdir()
    (tmp_path / "t4" / "caller.py").write_text("f()\n")
    script = parse_script(raw, tmp_path)
    assert [s.rework for s in script["T3"] + script["T4"]] == [False, True, False, True]
