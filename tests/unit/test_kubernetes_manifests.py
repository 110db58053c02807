"""deploy/kubernetes/: every manifest is valid against the Kubernetes schemas, offline.

kubernetes-validate carries the schemas of each Kubernetes release in its package; each
object is validated strictly (an unknown field is an error, as `kubectl apply
--validate=strict` would say), for the newest release it knows. The kustomization names
every file, and the shapes the docs promise hold: one server that never overlaps itself
on its database, scraped for /metrics, a Service in front of it, runners that need none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
KUSTOMIZATION = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())


def objects() -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, doc)
        for name in KUSTOMIZATION["resources"]
        for doc in yaml.safe_load_all((DEPLOY / name).read_text())
        if doc
    ]


def named(kind: str, name: str) -> dict[str, Any]:
    return next(o for _, o in objects() if o["kind"] == kind and o["metadata"]["name"] == name)


@pytest.mark.parametrize(
    ("source", "manifest"),
    objects(),
    ids=[f"{o['kind']}/{o['metadata']['name']}" for _, o in objects()],
)
def test_each_manifest_is_valid_against_the_kubernetes_schemas(
    source: str, manifest: dict[str, Any]
) -> None:
    kubernetes_validate.validate(manifest, kubernetes_validate.latest_version(), strict=True)


def test_an_unknown_field_is_caught_so_the_validation_is_real() -> None:
    broken = named("Deployment", "codefleet-server") | {"spek": {}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)


def test_the_kustomization_names_every_manifest_file() -> None:
    files = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(KUSTOMIZATION["resources"]) == sorted(files)


def test_one_server_never_overlaps_itself_and_is_scraped_for_metrics() -> None:
    server = named("Deployment", "codefleet-server")
    pod = server["spec"]["template"]
    assert server["spec"]["replicas"] == 1 and server["spec"]["strategy"]["type"] == "Recreate"
    scrape = pod["metadata"]["annotations"]
    assert scrape["prometheus.io/path"] == "/metrics" and scrape["prometheus.io/port"] == "8099"
    service = named("Service", "codefleet")
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    runner_labels = named("Deployment", "codefleet-runner")["spec"]["template"]["metadata"]
    services = [o for _, o in objects() if o["kind"] == "Service"]
    assert all(s["spec"]["selector"] != runner_labels["labels"] for s in services)
