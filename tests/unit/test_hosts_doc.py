"""docs/hosts.md's checkable claims: its YAML parses, its commands and options exist.

The page's commands appear in shell blocks, in systemd `ExecStart=` lines and
in the Kubernetes containers' `command` lists (the manifests the page describes,
deploy/kubernetes/); every `codefleet` command among them must be a real command
and every option it passes one that command takes, so the worked examples cannot
drift from the CLI. tests/unit/test_kubernetes_manifests.py holds the manifests to
the Kubernetes schemas.
"""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from kubernetes_support import DEPLOY, manifest_files

from codefleet.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "hosts.md").read_text(encoding="utf-8")
FENCED = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCED.findall(DOC) if lang == language]


def manifests() -> list[dict[str, Any]]:
    """The Kubernetes objects of deploy/kubernetes/shared-tree/, in its kustomization's order,
    and the page's."""
    files = [path.read_text() for path in manifest_files(DEPLOY / "shared-tree")]
    return [doc for body in [*files, *blocks("yaml")] for doc in yaml.safe_load_all(body) if doc]


def container_commands() -> list[list[str]]:
    found = []
    for manifest in manifests():
        pod = manifest.get("spec", {}).get("template", {}).get("spec", {})
        found += [c["command"] for c in pod.get("containers", []) if "command" in c]
    return found


def invoked(words: list[str]) -> list[str] | None:
    """The `codefleet` argv a shell line runs (after `VAR=value`s, or after `--`), if any."""
    starts = [0] + [i + 1 for i, w in enumerate(words) if w == "--"]
    for start in starts:
        rest = list(itertools.dropwhile(lambda w: re.fullmatch(r"\w+=.*", w), words[start:]))
        if rest and Path(rest[0]).name == "codefleet":
            return ["codefleet", *rest[1:]]
    return None


def command_lines() -> list[list[str]]:
    """Every `codefleet COMMAND ...` invocation on the page, as argv from `codefleet` on."""
    lines = [line for body in blocks("") + blocks("ini") for line in body.splitlines()]
    found = [invoked(shlex.split(line.removeprefix("ExecStart="), comments=True)) for line in lines]
    found += container_commands()
    return [argv for argv in found if argv and len(argv) > 1 and not argv[1].startswith("-")]


def options_of(argv: list[str]) -> tuple[Any, list[str]]:
    command = typer.main.get_command(app).commands.get(argv[1])  # type: ignore[attr-defined]
    assert command is not None, f"no command `codefleet {argv[1]}`"
    used = [w.split("=", 1)[0] for w in argv[2:] if w.startswith("--")]
    return command, used


def test_the_kubernetes_example_is_the_objects_the_page_describes() -> None:
    kinds = [(m["kind"], m["metadata"]["name"]) for m in manifests()]

    assert kinds == [
        ("Secret", "codefleet"),
        ("PersistentVolume", "codefleet-db"),
        ("PersistentVolumeClaim", "codefleet-db"),
        ("PersistentVolume", "codefleet-tree"),
        ("PersistentVolumeClaim", "codefleet-tree"),
        ("Deployment", "codefleet-server"),
        ("Service", "codefleet"),
        ("Deployment", "codefleet-runner"),
    ]
    claims = {m["metadata"]["name"]: m["spec"]["accessModes"] for m in manifests()
              if m["kind"] == "PersistentVolumeClaim"}  # fmt: skip
    assert claims == {"codefleet-db": ["ReadWriteOnce"], "codefleet-tree": ["ReadWriteMany"]}
    tree = next(
        m["spec"] for m in manifests() if m["kind"] == "PersistentVolume" and "nfs" in m["spec"]
    )
    assert {"lookupcache=positive", "actimeo=0"} <= set(tree["mountOptions"])  # the server's mount


def test_the_server_and_the_runners_mount_the_tree_at_different_paths() -> None:
    server, runner = container_commands()

    assert "--workdir=/srv/tree" in server and "--workdir=/work/tree" in runner


@pytest.mark.parametrize("argv", command_lines(), ids=lambda argv: " ".join(argv[:2]))
def test_every_codefleet_command_on_the_page_takes_the_options_it_is_given(
    argv: list[str],
) -> None:
    command, used = options_of(argv)
    known = {opt for param in command.params for opt in param.opts + param.secondary_opts}

    assert [opt for opt in used if opt not in known] == [], " ".join(argv)
