"""The `apply_patch` reader (`toolcalls.applypatch`) held to the real Codex CLI's own applier.

Codex dispatches on its program name: the bundled binary run as `apply_patch` (a symlink)
applies the patch it reads on stdin in its working directory, with the parser and
applier its `apply_patch` tool uses (measured with 0.163.0). Every patch of the corpus
(`patch_corpus.json`: odd headers, envelopes, line breaks, moves, paths) is applied by
it in a fresh tree, and read by `patch_targets`. The reader refuses exactly what the
binary's parser refuses (and the cases marked `refused`, which the binary reads other than
as written), and a patch it reads names every file the binary created,
changed or deleted (exactly those when the binary applied the whole patch)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from codex_cli_bin import bundled_codex_path

from codefleet.toolcalls.applypatch import MalformedPatch, patch_targets

CORPUS = json.loads((Path(__file__).parent / "patch_corpus.json").read_text())
TREE_FILES = ("held.txt", "a.txt", " held.txt")  # the files every patch finds, each "old\n"
# How the applier's stderr begins when it cannot read its input at all.
PARSE_REFUSALS = ("Invalid patch", "Usage:")


def applied(tmp_path: Path, patch: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The binary's run on `patch` in `tmp_path/tree`, and every file it touched anywhere
    under `tmp_path` (absolute paths)."""
    program = tmp_path / "bin" / "apply_patch"
    program.parent.mkdir()
    program.symlink_to(bundled_codex_path())
    tree = tmp_path / "tree"
    tree.mkdir()
    (tmp_path / "outside").mkdir()
    for name in TREE_FILES:
        (tree / name).write_text("old\n")
    before = _files(tmp_path)
    run = subprocess.run(
        [str(program)], input=patch, cwd=tree, capture_output=True, text=True, timeout=60
    )
    after = _files(tmp_path)
    return run, {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes() for p in root.rglob("*") if p.is_file() and p.parent.name != "bin"
    }


def named(tree: Path, targets: tuple[str, ...]) -> set[str]:
    return {os.path.normpath(os.path.join(tree, target)) for target in targets}


@pytest.mark.parametrize("case", CORPUS, ids=[case["says"] for case in CORPUS])
def test_the_reader_names_what_the_real_codex_applier_touches_and_refuses_what_it_cannot_read(
    tmp_path: Path, case: dict[str, str]
) -> None:
    patch = case["patch"].replace("{outside}", str(tmp_path / "outside"))
    run, touched = applied(tmp_path, patch)
    refused_by_codex = run.returncode != 0 and run.stderr.startswith(PARSE_REFUSALS)
    try:
        targets = patch_targets(patch)
    except MalformedPatch as err:
        if "refused" in case:  # read by Codex, but not the way it is written: refused here
            return
        assert refused_by_codex, f"the reader refused ({err}) a patch Codex read: {run.stderr}"
        assert not touched
        return
    assert "refused" not in case, f"the reader read {targets}: {case['refused']}"
    assert not refused_by_codex, f"the reader read {targets} where Codex refused: {run.stderr}"
    reads = named(tmp_path / "tree", targets)
    assert touched <= reads, f"Codex touched {sorted(touched - reads)} the reader did not name"
    if run.returncode == 0:
        assert reads == touched
