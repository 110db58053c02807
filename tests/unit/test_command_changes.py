"""What a command changed in its layer (`fleet.views.layerchanges`): collected from a real overlay.

Each test runs a real shell command in a real layer (user + mount namespace,
overlayfs over a scratch tree, no sandbox), then reads what it changed and
sorts it into kept out, refused and to apply.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from codefleet.fleet.views.layer import Layer, Sandbox, build_layer, layer_argv, shell_support
from codefleet.fleet.views.layerapply import changed_meanwhile
from codefleet.fleet.views.layerchanges import Change, ChangeKind, collect, sort_changes
from codefleet.paths import TreeRoot
from codefleet.rollback import PreImage


def make_tree(root: Path) -> Path:
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    (root / "b.py").write_text("B = 1\n")
    (root / "run.sh").write_text("echo hi\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "m.py").write_text("M = 1\n")
    (root / "pkg" / "n.py").write_text("N = 1\n")
    (root / "data").write_text("a file\n")
    return root


def run_in_layer(tmp_path: Path, command: str, images: tuple[PreImage, ...] = ()) -> Layer:
    support = shell_support()
    assert support.problem is None and support.unshare is not None, support.describe
    base = tmp_path / "layer"
    base.mkdir()
    layer = build_layer(tmp_path / "tree", base, images)
    argv = layer_argv(layer, command, Sandbox(None), support.unshare)
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    return layer


def kinds(changes: list[Change]) -> dict[str, ChangeKind]:
    return {c.path: c.kind for c in changes}


def test_created_modified_deleted_and_mode_changes_are_collected(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree")
    layer = run_in_layer(
        tmp_path,
        "echo 'A = 2' > a.py && rm b.py && chmod +x run.sh && mkdir -p new/deep "
        "&& echo x > new/deep/c.py && touch pkg/m.py && cat pkg/n.py > /dev/null",
    )
    assert kinds(collect(layer)) == {
        "a.py": ChangeKind.MODIFIED,
        "b.py": ChangeKind.DELETED,
        "run.sh": ChangeKind.MODE,
        "new/deep/c.py": ChangeKind.CREATED,
    }  # touching pkg/m.py copied it up without changing it: no change
    assert (tree / "a.py").read_text() == "A = 1\n" and (tree / "b.py").exists()


def test_a_deleted_directory_deletes_every_file_under_it(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    layer = run_in_layer(tmp_path, "rm -r pkg")
    assert kinds(collect(layer)) == {"pkg/m.py": ChangeKind.DELETED, "pkg/n.py": ChangeKind.DELETED}


def test_a_directory_made_again_deletes_what_it_no_longer_holds(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    layer = run_in_layer(tmp_path, "rm -r pkg && mkdir pkg && echo M > pkg/m.py")
    assert kinds(collect(layer)) == {
        "pkg/m.py": ChangeKind.MODIFIED,
        "pkg/n.py": ChangeKind.DELETED,
    }


def test_a_directory_made_again_deeper_deletes_what_its_new_subdirectory_lacks(
    tmp_path: Path,
) -> None:
    tree = make_tree(tmp_path / "tree")
    (tree / "pkg" / "sub").mkdir()
    (tree / "pkg" / "sub" / "old.py").write_text("OLD = 1\n")
    layer = run_in_layer(tmp_path, "rm -r pkg && mkdir -p pkg/sub && echo N > pkg/sub/new.py")
    assert kinds(collect(layer)) == {
        "pkg/m.py": ChangeKind.DELETED,
        "pkg/n.py": ChangeKind.DELETED,
        "pkg/sub/new.py": ChangeKind.CREATED,
        "pkg/sub/old.py": ChangeKind.DELETED,
    }


def test_a_file_replaced_by_a_directory_is_collected_and_refused(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    layer = run_in_layer(tmp_path, "rm data && mkdir data && echo x > data/inner.txt")
    changes = collect(layer)
    assert kinds(changes) == {"data": ChangeKind.RETYPED, "data/inner.txt": ChangeKind.CREATED}
    refused = sort_changes(changes, TreeRoot(tmp_path / "tree")).refused
    assert [(c.path, "rolled back" in why) for c, why in refused] == [("data", True)]


def test_symlinks_are_collected_and_refused_in_or_out_of_the_tree(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    layer = run_in_layer(tmp_path, "ln -s /etc/passwd out && ln -s a.py inside")
    changes = collect(layer)
    assert kinds(changes) == {"inside": ChangeKind.SYMLINK, "out": ChangeKind.SYMLINK}
    result = sort_changes(changes, TreeRoot(tmp_path / "tree"))
    assert result.apply == ()
    reasons = {c.path: why for c, why in result.refused}
    assert "outside the working tree" in reasons["out"]
    assert "symbolic link" in reasons["inside"]


def test_files_another_task_holds_are_shown_at_their_pre_images(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree")
    (tree / "a.py").write_text("A = 'half-done by another task'\n")
    (tree / "theirs.py").write_text("created by another task\n")
    images = (PreImage("a.py", True, b"A = 1\n", 0o644), PreImage("theirs.py", False))
    layer = run_in_layer(
        tmp_path, "cat a.py > seen.txt && { test -e theirs.py || echo absent >> seen.txt; }", images
    )
    assert kinds(collect(layer)) == {"seen.txt": ChangeKind.CREATED}
    assert (layer.upper / "seen.txt").read_text() == "A = 1\nabsent\n"


def test_a_command_recreating_a_hidden_file_creates_it(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree")
    (tree / "theirs.py").write_text("created by another task\n")
    layer = run_in_layer(tmp_path, "echo mine > theirs.py", (PreImage("theirs.py", False),))
    assert kinds(collect(layer)) == {"theirs.py": ChangeKind.CREATED}


def test_changes_are_sorted_into_kept_out_refused_and_to_apply(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree")
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tree / ".gitignore").write_text("*.log\nbuild/\n")
    (tree / ".codefleet").mkdir()
    db = tree / ".codefleet" / "codefleet.db"
    db.write_text("")
    layer = run_in_layer(
        tmp_path,
        "mkdir -p .venv/lib node_modules/x pkg/__pycache__ build sub/.git .claude && "
        "for p in .venv/lib/site.py node_modules/x/i.js pkg/__pycache__/m.pyc out.log "
        "build/o sub/.git/config .claude/settings.json .mcp.json .codefleet/codefleet.db "
        "a.py gen.py; do echo x > $p; done",
    )
    tree_root = TreeRoot(tree, protected=[db])
    result = sort_changes(collect(layer), tree_root)
    assert [c.path for c in result.kept_out] == [
        ".venv/lib/site.py",
        "build/o",
        "node_modules/x/i.js",
        "out.log",
        "pkg/__pycache__/m.pyc",
    ]
    assert sorted(c.path for c, _ in result.refused) == [
        ".claude/settings.json",
        ".codefleet/codefleet.db",
        ".mcp.json",
        "sub/.git/config",
    ]
    assert all("protected" in why for _, why in result.refused)
    assert [c.path for c in result.apply] == ["a.py", "gen.py"]


def test_a_hard_linked_file_is_refused(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree")
    os.link(tree / "a.py", tree / "twin.py")
    layer = run_in_layer(tmp_path, "echo changed > a.py")
    result = sort_changes(collect(layer), TreeRoot(tree))
    assert [(c.path, "hard links" in why) for c, why in result.refused] == [("a.py", True)]


def test_a_file_the_tree_changed_while_the_command_ran_stops_the_apply(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree")
    layer = run_in_layer(tmp_path, "echo 'A = 2' > a.py && echo B > b.py")
    changes = collect(layer)
    assert changed_meanwhile(layer, changes) is None
    (tree / "b.py").write_text("B = 'finished by another task meanwhile'\n")
    refusal = changed_meanwhile(layer, changes)
    assert refusal is not None and refusal.startswith("b.py changed in the shared tree")
    assert "nothing was applied" in refusal


def test_gits_own_files_a_command_touched_are_kept_out_not_reported_refused(
    tmp_path: Path,
) -> None:
    tree = make_tree(tmp_path / "tree")
    (tree / ".git").mkdir()
    changes = [  # what `git status` under a version-from-git build tool leaves (issue 40)
        Change(".git/index", ChangeKind.MODIFIED, 10, 0o644),
        Change("src/gen.py", ChangeKind.CREATED, 1, 0o644),
    ]

    result = sort_changes(changes, TreeRoot(tree))

    assert [c.path for c in result.kept_out] == [".git/index"]
    assert result.refused == ()
    assert [c.path for c in result.apply] == ["src/gen.py"]
