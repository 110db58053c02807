"""`TreeRoot.canonical`: one lease key per file, and a named refusal for everything else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codefleet.models import DenyReason
from codefleet.paths import MAX_PATH_CHARS, PathRejected, TreeRoot


@pytest.fixture
def tree(workdir: Path) -> TreeRoot:
    (workdir / "runs").mkdir()
    (workdir / "fleet.sqlite").write_text("")
    return TreeRoot(workdir, protected=[workdir / "fleet.sqlite", workdir / "runs"])


@pytest.mark.parametrize(
    "spelling", ["a.py", "./a.py", "x/../a.py", ".//a.py", "pkg/../a.py", "./pkg/.././a.py"]
)
def test_every_relative_spelling_of_one_file_gives_the_same_key(tree: TreeRoot, spelling: str):
    assert tree.canonical(spelling) == "a.py"


def test_doubled_slashes_collapse_to_one_key(tree: TreeRoot):
    assert tree.canonical("pkg//b.py") == "pkg/b.py"
    assert tree.canonical("pkg/b.py") == "pkg/b.py"


def test_the_absolute_path_inside_the_tree_gives_the_relative_key(tree: TreeRoot, workdir: Path):
    assert tree.canonical(str(workdir / "pkg" / "b.py")) == "pkg/b.py"


def test_a_file_that_does_not_exist_yet_still_has_a_key(tree: TreeRoot):
    assert tree.canonical("new/dir/c.py") == "new/dir/c.py"


def test_the_root_is_resolved_so_a_symlinked_root_gives_the_same_keys(
    tmp_path: Path, workdir: Path
):
    alias = tmp_path / "alias"
    alias.symlink_to(workdir)
    via_alias = TreeRoot(alias)

    assert via_alias.canonical(str(workdir / "a.py")) == "a.py"
    assert via_alias.canonical(str(alias / "a.py")) == "a.py"


def test_a_symlink_inside_the_tree_resolves_to_its_target_key(tree: TreeRoot, workdir: Path):
    (workdir / "link.py").symlink_to(workdir / "a.py")

    assert tree.canonical("link.py") == "a.py"


def reason_for(tree: TreeRoot, raw: str) -> DenyReason:
    with pytest.raises(PathRejected) as caught:
        tree.canonical(raw)
    return caught.value.reason


@pytest.mark.parametrize("raw", ["../outside.py", "pkg/../../outside.py", "/etc/passwd", "/"])
def test_paths_resolving_outside_the_tree_are_refused(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.OUTSIDE_WORKDIR


def test_a_sibling_directory_sharing_the_trees_name_prefix_is_outside(
    tree: TreeRoot, workdir: Path
):
    sibling = workdir.parent / (workdir.name + "-evil")
    sibling.mkdir()

    assert reason_for(tree, str(sibling / "x.py")) is DenyReason.OUTSIDE_WORKDIR


def test_a_symlink_escaping_the_tree_is_refused(tree: TreeRoot, workdir: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (workdir / "escape").symlink_to(outside)
    (workdir / "escape.py").symlink_to(outside / "target.py")

    assert reason_for(tree, "escape/x.py") is DenyReason.OUTSIDE_WORKDIR
    assert reason_for(tree, "escape.py") is DenyReason.OUTSIDE_WORKDIR


def test_a_symlink_into_git_is_refused(tree: TreeRoot, workdir: Path):
    (workdir / "innocent").symlink_to(workdir / ".git")

    assert reason_for(tree, "innocent/config") is DenyReason.PROTECTED_PATH


@pytest.mark.parametrize("raw", [".git/config", ".git/hooks/pre-commit", "pkg/../.git/HEAD"])
def test_anything_under_git_is_protected(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.PROTECTED_PATH


def test_a_file_merely_named_like_git_is_not_protected(tree: TreeRoot):
    assert tree.canonical(".gitignore") == ".gitignore"
    assert tree.canonical("pkg/.git-notes") == "pkg/.git-notes"


@pytest.mark.parametrize("raw", ["fleet.sqlite", "./fleet.sqlite", "runs/r1.log", "runs"])
def test_the_database_and_the_run_directory_are_protected(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.PROTECTED_PATH


@pytest.mark.parametrize("raw", ["", "   ", "a\x00.py", "a" * (MAX_PATH_CHARS + 1)])
def test_unusable_spellings_are_invalid(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.INVALID_PATH


@pytest.mark.parametrize("raw", ["pkg", "pkg/", ".", "./pkg/.."])
def test_a_directory_or_the_tree_itself_is_invalid(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.INVALID_PATH


def test_a_refusal_carries_the_raw_spelling_and_a_message(tree: TreeRoot):
    with pytest.raises(PathRejected) as caught:
        tree.canonical("../x.py")

    assert caught.value.raw == "../x.py"
    assert "outside" in caught.value.message


def test_a_non_string_is_invalid(tree: TreeRoot):
    assert reason_for(tree, None) is DenyReason.INVALID_PATH  # type: ignore[arg-type]


def test_a_very_long_path_is_refused_without_echoing_it_whole(tree: TreeRoot):
    raw = "d/" * (MAX_PATH_CHARS // 2 + 10)
    with pytest.raises(PathRejected) as caught:
        tree.canonical(raw)

    assert caught.value.reason is DenyReason.INVALID_PATH
    assert len(caught.value.raw) <= 200
    assert len(caught.value.message) < 1000


# -- protected names at any depth, case-insensitively --------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "vendor/lib/.git/config",  # a nested repository: its hooks and fsmonitor run too
        "vendor/lib/.git",  # a submodule's or worktree's `.git` file
        ".GIT/config",  # the real `.git/config` on a case-insensitive file system
        ".Git/hooks/pre-commit",
        "pkg/.gIt/HEAD",
    ],
)
def test_every_git_component_at_any_depth_and_any_case_is_protected(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.PROTECTED_PATH


@pytest.mark.parametrize(
    "raw",
    [
        ".claude/settings.json",
        ".claude/settings.local.json",
        ".claude/hooks/format.sh",
        "sub/project/.claude/settings.json",
        ".CLAUDE/Settings.json",
        ".mcp.json",
        "pkg/.mcp.json",
        ".MCP.JSON",
    ],
)
def test_agent_configuration_a_persons_session_would_load_is_protected_by_default(
    tree: TreeRoot, raw: str
):
    assert reason_for(tree, raw) is DenyReason.PROTECTED_PATH


@pytest.mark.parametrize(
    "raw", ["claude/settings.json", ".claude.md", "docs/mcp.json", ".mcp.json.example", "CLAUDE.md"]
)
def test_names_that_merely_look_like_agent_configuration_are_writable(tree: TreeRoot, raw: str):
    assert tree.canonical(raw) == raw


def test_the_protected_list_is_configurable_but_git_is_always_protected(workdir: Path):
    custom = TreeRoot(workdir, names=(".github/workflows", "secrets.env"))

    assert reason_for(custom, ".github/workflows/ci.yml") is DenyReason.PROTECTED_PATH
    assert reason_for(custom, "x/.GitHub/Workflows/ci.yml") is DenyReason.PROTECTED_PATH
    assert reason_for(custom, "deploy/secrets.env") is DenyReason.PROTECTED_PATH
    assert reason_for(custom, "vendor/.git/config") is DenyReason.PROTECTED_PATH
    assert custom.canonical(".github/CODEOWNERS") == ".github/CODEOWNERS"
    assert custom.canonical(".claude/settings.json") == ".claude/settings.json"
    assert TreeRoot(workdir, names=()).canonical(".mcp.json") == ".mcp.json"


@pytest.mark.parametrize("names", [["../x"], ["/etc"], [""], ["a/../b"]])
def test_a_protected_name_must_be_a_relative_path_inside_the_tree(workdir: Path, names: list[str]):
    with pytest.raises(ValueError, match="protected"):
        TreeRoot(workdir, names=names)


# -- hard links and the home directory ------------------------------------------------------


def test_a_file_with_a_second_hard_link_is_refused_under_both_names(tree: TreeRoot, workdir: Path):
    os.link(workdir / "pkg" / "b.py", workdir / "hard.py")

    for raw in ("pkg/b.py", "hard.py"):
        with pytest.raises(PathRejected) as caught:
            tree.canonical(raw)
        assert caught.value.reason is DenyReason.HARD_LINK
        assert "2 hard links" in caught.value.message


def test_once_the_second_link_is_gone_the_file_has_its_key_again(tree: TreeRoot, workdir: Path):
    os.link(workdir / "a.py", workdir / "hard.py")
    (workdir / "hard.py").unlink()

    assert tree.canonical("a.py") == "a.py"


@pytest.mark.parametrize("raw", ["~", "~/x.py", "~/.ssh/authorized_keys"])
def test_a_path_the_cli_would_expand_to_the_home_directory_is_outside(tree: TreeRoot, raw: str):
    """Measured: Claude Code writes `~/x` to $HOME/x (docs/security-agents.md, "Writes")."""
    assert reason_for(tree, raw) is DenyReason.OUTSIDE_WORKDIR


def test_a_tilde_the_cli_does_not_expand_is_an_ordinary_name(tree: TreeRoot):
    assert tree.canonical("~backup/x.py") == "~backup/x.py"
    assert tree.canonical("./~/x.py") == "~/x.py"


def test_the_path_check_imports_only_the_standard_library() -> None:
    """`codefleet hook` and the runner's gate share it: it must load without any dependency."""
    code = (
        "import sys; before = set(sys.modules); import codefleet.paths; "
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    roots = {name.split(".")[0] for name in loaded.stdout.split()}
    foreign = roots - set(sys.stdlib_module_names) - {"codefleet"}
    assert not foreign, f"codefleet.paths pulls in {sorted(foreign)}"


@pytest.mark.parametrize(
    "raw",
    [
        "a.py",
        "d/a.py",
        "d//e/./f.py",
        "d/",
        "missing/x/y.py",
        "d/missing.py",
        "file.txt/below.py",
        "link/a.py",
        "d/inner-link/f.py",
        "loop/x.py",
        "dangling/x.py",
        "d/../a.py",
        "d/e/f.py",
    ],
)
def test_the_lstat_walk_resolves_every_spelling_as_realpath_does(
    tree: TreeRoot, workdir: Path, raw: str
):
    (workdir / "d" / "e").mkdir(parents=True)
    (workdir / "d" / "e" / "f.py").write_text("x")
    (workdir / "file.txt").write_text("x")
    (workdir / "link").symlink_to(workdir / "d")
    (workdir / "d" / "inner-link").symlink_to("e")
    (workdir / "loop").symlink_to("loop")
    (workdir / "dangling").symlink_to("nowhere")
    resolved, found, missing = tree._resolve(raw)
    assert resolved == os.path.realpath(os.path.join(tree.root, raw))
    if found is not None:
        assert found == os.stat(resolved)  # the walk's lstat stands in for the final stat
    assert not missing or not os.path.lexists(resolved)
