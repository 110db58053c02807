"""deploy/kubernetes/ read as `kubectl apply -k` would take it, without kustomize.

Two layouts, each a Kustomize directory: `shared-tree/` (runners mount the tree) and
`clones/` (runners in their own clones); both list `secret/`. kustomize is not here
offline, so `objects` follows each kustomization's `resources` itself (a directory is
another kustomization, a file its YAML documents) and leaves the generated ConfigMaps
to the tests that check the generator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes"
LAYOUTS = ("shared-tree", "clones")
KUSTOMIZATION = "kustomization.yaml"

Manifest = dict[str, Any]


def kustomization(directory: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((directory / KUSTOMIZATION).read_text())
    return loaded


def manifest_files(directory: Path) -> list[Path]:
    """The YAML files `kubectl apply -k directory` applies, in its order."""
    files: list[Path] = []
    for name in kustomization(directory)["resources"]:
        path = (directory / name).resolve()
        files += manifest_files(path) if path.is_dir() else [path]
    return files


def objects(layout: str) -> list[tuple[Path, Manifest]]:
    """Each object of a layout with the file it is in."""
    return [
        (path, doc)
        for path in manifest_files(DEPLOY / layout)
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def named(layout: str, kind: str, name: str) -> Manifest:
    return next(
        o for _, o in objects(layout) if o["kind"] == kind and o["metadata"]["name"] == name
    )


def pod_spec(manifest: Manifest) -> dict[str, Any]:
    """The pod template's spec of a workload; {} for any other object."""
    spec: dict[str, Any] = manifest.get("spec", {}).get("template", {}).get("spec", {})
    return spec


def container(manifest: Manifest, name: str) -> dict[str, Any]:
    pod = pod_spec(manifest)
    return next(c for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == name)


def flag(command: list[str], option: str) -> str:
    """The value a `--option=value` in a container's command gives."""
    return next(w.split("=", 1)[1] for w in command if w.startswith(f"{option}="))
