"""`cli.start.demo_run`: what the demo does ahead of its fleet so the fleet's first steps
do not wait (the probes of how commands and checks run here)."""

from __future__ import annotations

from pathlib import Path

from codefleet.cli.start.demo_run import probe_views
from codefleet.fleet.views import runinview
from codefleet.fleet.views.layer import shell_support


def test_the_demo_probes_how_commands_and_checks_run_so_the_first_check_finds_it_kept(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()

    probe_views(tree)
    probed = runinview._probed.cache_info().misses
    runinview.layer_problem(tree)  # as the first check's view asks

    assert runinview._probed.cache_info().misses == probed  # kept: no probe on the path
    assert shell_support.cache_info().currsize == 1
