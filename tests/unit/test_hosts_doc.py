"""docs/hosts*.md's checkable claims: their YAML parses, their commands and options exist.

The hosts pages (docs/hosts.md and the hosts-*.md pages it links) are read as one.
Their commands appear in shell blocks, in systemd `ExecStart=` lines and in the Kubernetes containers' commands (the manifests the page describes, both layouts
of deploy/kubernetes/; a container that runs runner.sh runs the `codefleet runner` that
script execs); every `codefleet` command among them must be a real command and every
option it passes one that command takes, so the worked examples cannot drift from the
CLI. The page's autoscaling recipes read only metrics the server exposes and feed the
metric the shipped autoscaler reads. tests/unit/test_kubernetes_manifests.py holds the
manifests to the Kubernetes schemas.
"""

from __future__ import annotations

import ast
import itertools
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from kubernetes_support import DEPLOY, LAYOUTS, Manifest, container, flag, named, objects

from codefleet.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
DOC = "\n".join(
    page.read_text(encoding="utf-8") for page in sorted((ROOT / "docs").glob("hosts*.md"))
)
FENCED = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCED.findall(DOC) if lang == language]


def page_objects() -> list[Manifest]:
    """The page's YAML documents that are Kubernetes objects (not scrape or adapter configs)."""
    return [doc for body in blocks("yaml") for doc in yaml.safe_load_all(body) if "kind" in doc]


def manifests() -> list[Manifest]:
    """The Kubernetes objects of both layouts, in their kustomizations' order, and the page's."""
    return [doc for layout in LAYOUTS for _, doc in objects(layout)] + page_objects()


def runner_sh() -> list[str]:
    """The `codefleet runner ...` runner.sh execs, its variables' values left out."""
    script = (DEPLOY / "clones" / "runner.sh").read_text().replace("\\\n", " ")
    line = next(line for line in script.splitlines() if line.startswith("exec codefleet"))
    return [w for w in shlex.split(line)[1:] if not w.startswith("$")]


def container_commands() -> list[list[str]]:
    """Each container's `codefleet` argv; one that runs runner.sh, the argv it execs."""
    found = []
    for manifest in manifests():
        pod = manifest.get("spec", {}).get("template", {}).get("spec", {})
        for c in pod.get("initContainers", []) + pod.get("containers", []):
            command = c.get("command", [])
            if command[-1:] == ["/etc/codefleet/runner.sh"]:
                found.append([*runner_sh(), *c.get("args", [])])
            elif command[:1] == ["codefleet"]:
                found.append(command)
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
    root = typer.main.get_command(app)
    command = root.get_command(typer.Context(root), argv[1])  # type: ignore[attr-defined]
    assert command is not None, f"no command `codefleet {argv[1]}`"
    used = [w.split("=", 1)[0] for w in argv[2:] if w.startswith("--")]
    return command, used


def test_the_kubernetes_example_is_the_objects_the_page_describes() -> None:
    shared = [(m["kind"], m["metadata"]["name"]) for _, m in objects("shared-tree")]
    clones = [(m["kind"], m["metadata"]["name"]) for _, m in objects("clones")]

    assert shared == [
        ("Secret", "codefleet"),
        ("PersistentVolume", "codefleet-db"),
        ("PersistentVolumeClaim", "codefleet-db"),
        ("PersistentVolume", "codefleet-tree"),
        ("PersistentVolumeClaim", "codefleet-tree"),
        ("Deployment", "codefleet-server"),
        ("Service", "codefleet"),
        ("Deployment", "codefleet-runner"),
    ]
    assert clones == [
        ("Secret", "codefleet"),
        ("ConfigMap", "codefleet-repository"),
        ("PersistentVolumeClaim", "codefleet-server"),
        ("Deployment", "codefleet-server"),
        ("Service", "codefleet"),
        ("Deployment", "codefleet-runner"),
        ("HorizontalPodAutoscaler", "codefleet-runner"),
    ]
    claims = {m["metadata"]["name"]: m["spec"]["accessModes"] for _, m in objects("shared-tree")
              if m["kind"] == "PersistentVolumeClaim"}  # fmt: skip
    assert claims == {"codefleet-db": ["ReadWriteOnce"], "codefleet-tree": ["ReadWriteMany"]}
    tree = named("shared-tree", "PersistentVolume", "codefleet-tree")["spec"]
    assert {"lookupcache=positive", "actimeo=0"} <= set(tree["mountOptions"])  # the server's mount


def test_the_page_names_every_file_of_both_layouts() -> None:
    for layout in LAYOUTS:
        files = {p.name for p in (DEPLOY / layout).iterdir()} - {"kustomization.yaml"}
        assert [f for f in sorted(files) if f"`{f}`" not in DOC] == [], layout
        assert f"kubectl apply -k deploy/kubernetes/{layout}" in DOC


def test_the_server_and_the_runners_mount_the_tree_at_different_paths() -> None:
    server = container(named("shared-tree", "Deployment", "codefleet-server"), "server")
    runner = container(named("shared-tree", "Deployment", "codefleet-runner"), "runner")

    assert flag(server["command"], "--workdir") == "/srv/tree"
    assert flag(runner["command"], "--workdir") == "/work/tree"


def test_runner_sh_runs_a_clone_runner_that_replaces_its_own_name() -> None:
    assert runner_sh()[:2] == ["codefleet", "runner"]
    assert {"--name", "--server", "--clone", "--replace"} <= set(runner_sh())
    assert runner_sh() in container_commands()


def exposed_metrics() -> set[str]:
    """The metric names server/metrics.py writes: its `codefleet_*` string literals."""
    source = (ROOT / "src" / "codefleet" / "server" / "metrics.py").read_text()
    return {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"codefleet_\w+", node.value)
    }


def test_the_autoscaling_recipes_read_only_metrics_the_server_exposes() -> None:
    adapter = next(yaml.safe_load(b) for b in blocks("yaml") if "external:" in b)["external"][0]
    (keda,) = [m for m in page_objects() if m["kind"] == "ScaledObject"]
    query = keda["spec"]["triggers"][0]["metadata"]["query"]
    read = set(re.findall(r"codefleet_\w+", query + adapter["metricsQuery"]))

    assert read and read <= exposed_metrics(), read - exposed_metrics()
    assert {"codefleet_tasks_ready", "codefleet_tasks_in_flight"} <= read


def test_the_shipped_autoscaler_reads_the_metric_the_pages_adapter_rule_makes() -> None:
    hpa = named("clones", "HorizontalPodAutoscaler", "codefleet-runner")
    adapter = next(yaml.safe_load(b) for b in blocks("yaml") if "external:" in b)["external"][0]
    (keda,) = [m for m in page_objects() if m["kind"] == "ScaledObject"]
    wanted = hpa["spec"]["metrics"][0]["external"]["metric"]["name"]

    assert adapter["name"]["as"] == wanted and f"`{wanted}`" in DOC
    assert keda["spec"]["scaleTargetRef"]["name"] == hpa["spec"]["scaleTargetRef"]["name"]


@pytest.mark.parametrize("argv", command_lines(), ids=lambda argv: " ".join(argv[:2]))
def test_every_codefleet_command_on_the_page_takes_the_options_it_is_given(
    argv: list[str],
) -> None:
    command, used = options_of(argv)
    known = {opt for param in command.params for opt in param.opts + param.secondary_opts}

    assert [opt for opt in used if opt not in known] == [], " ".join(argv)
