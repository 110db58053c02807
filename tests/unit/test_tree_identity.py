"""A tree is known by its identity, not its path (issue 33 item 1).

The server writes `.codefleet/tree-id` once; a runner reads the id in its own
mount and registers with it and its own path. A matching id is the same tree
wherever it is mounted, a different id is another tree (409 `wrong_tree`,
both named), and a mount without the file is a clear error naming it (the
runner's side: tests/integration/test_registration.py). No agent may write
the identity.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codefleet.coord.policy.registration import check_tree
from codefleet.errors import WrongTree
from codefleet.models import DenyReason
from codefleet.paths import PathRejected, TreeRoot
from codefleet.statedir import NoTreeId, TreeClaim, ensure_tree_id, read_tree_id, tree_id_path

SERVER_ID = "tree_" + "a" * 32
OTHER_ID = "tree_" + "b" * 32


def test_the_server_writes_the_identity_once_and_never_rewrites_it(tmp_path: Path) -> None:
    first = ensure_tree_id(tmp_path)

    again = ensure_tree_id(tmp_path)

    assert first == again == read_tree_id(tmp_path)
    assert first.startswith("tree_") and len(first) == len("tree_") + 32
    assert tree_id_path(tmp_path).read_text() == first + "\n"
    assert sorted(p.name for p in tree_id_path(tmp_path).parent.iterdir()) == [
        ".gitignore",
        "tree-id",
    ]  # no temporary file left behind, and the state directory is git-ignored


def test_two_trees_get_two_identities(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()

    assert ensure_tree_id(tmp_path / "one") != ensure_tree_id(tmp_path / "two")


def test_the_same_identity_from_another_path_is_the_same_tree() -> None:
    check_tree(TreeClaim("/mnt/nfs/repo", SERVER_ID), TreeClaim("/srv/repo", SERVER_ID))


def test_another_identity_is_refused_naming_both_ids_and_both_paths() -> None:
    with pytest.raises(WrongTree) as refused:
        check_tree(TreeClaim("/srv/repo", OTHER_ID), TreeClaim("/srv/repo", SERVER_ID))

    message = refused.value.message
    assert OTHER_ID in message and SERVER_ID in message and "/srv/repo" in message
    assert "--workdir" in message  # the hint: where to point the runner
    assert refused.value.detail == {
        "runner_workdir": "/srv/repo",
        "server_workdir": "/srv/repo",
        "runner_tree_id": OTHER_ID,
        "server_tree_id": SERVER_ID,
    }


def test_a_runner_without_an_identity_is_held_to_the_servers_path(tmp_path: Path) -> None:
    root = os.path.realpath(tmp_path)
    check_tree(TreeClaim(str(tmp_path), None), TreeClaim(root, SERVER_ID))

    with pytest.raises(WrongTree):
        check_tree(TreeClaim("/elsewhere", None), TreeClaim(root, SERVER_ID))


def test_a_missing_identity_file_names_the_file_and_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(NoTreeId) as missing:
        read_tree_id(tmp_path)

    assert str(tree_id_path(tmp_path)) in str(missing.value)
    assert "codefleet serve" in str(missing.value) and "--workdir" in str(missing.value)


def test_a_damaged_identity_is_refused_and_kept_for_the_operator(tmp_path: Path) -> None:
    tree_id_path(tmp_path).parent.mkdir()
    tree_id_path(tmp_path).write_text("not an id\n")

    with pytest.raises(NoTreeId, match="damaged"):
        ensure_tree_id(tmp_path)
    assert tree_id_path(tmp_path).read_text() == "not an id\n"


@pytest.mark.parametrize("raw", [".codefleet/tree-id", ".codefleet/.gitignore", "./.codefleet/x"])
def test_no_agent_may_write_codefleets_state_directory(tmp_path: Path, raw: str) -> None:
    ensure_tree_id(tmp_path)

    with pytest.raises(PathRejected) as refused:
        TreeRoot(tmp_path).canonical(raw)

    assert refused.value.reason is DenyReason.PROTECTED_PATH


def test_the_tree_of_a_subdirectory_is_the_nearest_served_tree_or_repository_root(
    tmp_path: Path,
) -> None:
    from codefleet.statedir import tree_root

    repo = tmp_path / "repo"
    inner = repo / "a" / "b"
    inner.mkdir(parents=True)
    assert tree_root(inner) == (inner, "the current directory (not inside a git repository)")
    (repo / ".git").mkdir()
    assert tree_root(inner)[0] == repo
    assert tree_root(repo)[0] == repo
    ensure_tree_id(repo / "a")  # a directory CodeFleet serves is a tree of its own
    assert tree_root(inner)[0] == repo / "a"


def test_a_probe_written_in_the_tree_matches_and_one_written_in_a_copy_does_not(
    tmp_path: Path,
) -> None:
    from codefleet.statedir import remove_probe, tree_mismatch, write_probe

    tree, copy = tmp_path / "tree", tmp_path / "copy"
    tree_id = ensure_tree_id(tree)
    tree_id_path(copy).parent.mkdir(parents=True)
    tree_id_path(copy).write_text(tree_id_path(tree).read_text())
    server = TreeClaim(str(tree), tree_id)
    here, there = write_probe(tree), write_probe(copy)
    assert here is not None and there is not None

    assert tree_mismatch(TreeClaim(str(tree), tree_id, here), server) is None
    problem = tree_mismatch(TreeClaim(str(copy), tree_id, there), server)
    assert problem is not None and "is a copy, not a mount" in problem
    assert tree_mismatch(TreeClaim(str(copy), tree_id), server) is None  # no probe: an older runner
    remove_probe(tree, here)
    assert list((tree / ".codefleet").glob("probe-*")) == []
