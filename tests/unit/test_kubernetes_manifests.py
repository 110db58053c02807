"""deploy/kubernetes/: both layouts are valid against the Kubernetes schemas, offline.

kubernetes-validate carries the schemas of each Kubernetes release in its package; each
object is validated strictly (an unknown field is an error, as `kubectl apply
--validate=strict` would say), for the newest release it knows. kustomize is not here
offline, so every file each kustomization lists is validated on its own, each
kustomization names every file of its directory, and the ConfigMap clones/ generates is
checked by its sources: the scripts exist and are mounted where the commands run them.

The shapes docs/hosts-kubernetes.md promises hold: one server that never overlaps itself on its
database, scraped for /metrics, a Service in front of it, runners that need none; in
clones/, runner pods that mount no PersistentVolumeClaim and run runner.sh, a landing
worker on the server's own tree volume, an autoscaler on the runner Deployment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_support import (
    DEPLOY,
    KUSTOMIZATION,
    LAYOUTS,
    Manifest,
    container,
    flag,
    kustomization,
    named,
    objects,
    pod_spec,
)

CLONES = DEPLOY / "clones"
EVERY = [(layout, doc) for layout in LAYOUTS for _, doc in objects(layout)]


def validate(manifest: Manifest) -> None:
    kubernetes_validate.validate(manifest, kubernetes_validate.latest_version(), strict=True)


def server_container(layout: str) -> dict[str, Any]:
    return container(named(layout, "Deployment", "codefleet-server"), "server")


def volume_at(pod: dict[str, Any], mounter: dict[str, Any], path: str) -> dict[str, Any]:
    """The volume `mounter` sees `path` in (the longest mount path that holds it)."""
    held = [
        m for m in mounter["volumeMounts"] if PurePosixPath(path).is_relative_to(m["mountPath"])
    ]
    mount = max(held, key=lambda m: len(m["mountPath"]))
    return next(v for v in pod["volumes"] if v["name"] == mount["name"])


def scripts_run(layout: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(container, script path, the volume it is in) for each container that runs `sh FILE`."""
    found = []
    for _, manifest in objects(layout):
        pod = pod_spec(manifest)
        for c in pod.get("initContainers", []) + pod.get("containers", []):
            if c.get("command", [""])[0] == "sh":
                found.append((c["name"], c["command"][1], volume_at(pod, c, c["command"][1])))
    return found


@pytest.mark.parametrize(
    ("layout", "manifest"),
    EVERY,
    ids=[f"{layout}:{o['kind']}/{o['metadata']['name']}" for layout, o in EVERY],
)
def test_each_manifest_is_valid_against_the_kubernetes_schemas(
    layout: str, manifest: Manifest
) -> None:
    validate(manifest)


def test_an_unknown_field_is_caught_so_the_validation_is_real() -> None:
    broken = named("clones", "Deployment", "codefleet-server") | {"spek": {}}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)


def test_a_misspelled_field_deep_in_a_pod_template_is_caught_too() -> None:
    runner = named("clones", "Deployment", "codefleet-runner")
    broken = yaml.safe_load(yaml.safe_dump(runner))
    broken["spec"]["template"]["spec"]["containers"][0]["comand"] = ["sh"]
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)


@pytest.mark.parametrize("directory", ["secret", *LAYOUTS])
def test_each_kustomization_names_every_manifest_file_of_its_directory(directory: str) -> None:
    here = DEPLOY / directory
    listed = kustomization(here)["resources"]
    files = {p.name for p in here.glob("*.yaml")} - {KUSTOMIZATION}

    assert sorted(r for r in listed if (here / r).is_file()) == sorted(files)
    assert all((here / r / KUSTOMIZATION).is_file() for r in listed if not (here / r).is_file())


def test_both_layouts_use_the_one_secret() -> None:
    for layout in LAYOUTS:
        assert "../secret" in kustomization(DEPLOY / layout)["resources"]
    assert "CODEFLEET_TOKEN" in named("clones", "Secret", "codefleet")["stringData"]


def test_the_clone_layouts_scripts_are_generated_from_its_files_and_mounted_where_run() -> None:
    generators = {g["name"]: g["files"] for g in kustomization(CLONES)["configMapGenerator"]}
    run = scripts_run("clones")

    assert {name for name, _, _ in run} == {"runner", "init-tree"}
    for name, script, volume in run:
        files = generators[volume["configMap"]["name"]]
        assert PurePosixPath(script).name in files, f"{name} runs {script}: not generated"
    assert all((CLONES / file).is_file() for files in generators.values() for file in files)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_one_server_never_overlaps_itself_and_is_scraped_for_metrics(layout: str) -> None:
    server = named(layout, "Deployment", "codefleet-server")
    pod = server["spec"]["template"]
    assert server["spec"]["replicas"] == 1 and server["spec"]["strategy"]["type"] == "Recreate"
    scrape = pod["metadata"]["annotations"]
    assert scrape["prometheus.io/path"] == "/metrics" and scrape["prometheus.io/port"] == "8099"
    service = named(layout, "Service", "codefleet")
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    runner_labels = named(layout, "Deployment", "codefleet-runner")["spec"]["template"]["metadata"]
    services = [o for _, o in objects(layout) if o["kind"] == "Service"]
    assert all(s["spec"]["selector"] != runner_labels["labels"] for s in services)


def test_clone_runner_pods_mount_no_persistent_volume_claim_and_run_runner_sh() -> None:
    runner = named("clones", "Deployment", "codefleet-runner")
    pod = pod_spec(runner)

    assert [v["name"] for v in pod["volumes"] if "persistentVolumeClaim" in v] == []
    assert [c["command"] for c in pod["containers"]] == [["sh", "/etc/codefleet/runner.sh"]]


def test_a_clone_runner_pod_gives_runner_sh_what_it_reads() -> None:
    runner = named("clones", "Deployment", "codefleet-runner")
    pod, script = pod_spec(runner), (CLONES / "runner.sh").read_text()
    env = {e["name"]: e for e in container(runner, "runner")["env"]}
    service = named("clones", "Service", "codefleet")

    assert set(re.findall(r"\$\{(\w+):\?", script)) <= set(env)  # what it requires
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    port = service["spec"]["ports"][0]["port"]
    assert env["CODEFLEET_SERVER_URL"]["value"] == f"http://{service['metadata']['name']}:{port}"
    clone_dir = env["CODEFLEET_CLONE_DIR"]["value"]
    assert "emptyDir" in volume_at(pod, container(runner, "runner"), clone_dir)
    assert {"secretRef": {"name": "codefleet"}} in container(runner, "runner")["envFrom"]


def test_the_landing_worker_shares_the_servers_tree_volume_and_runs_landing_only() -> None:
    server = named("clones", "Deployment", "codefleet-server")
    pod, serve = pod_spec(server), server_container("clones")
    landing = [c for c in pod["containers"] if "--landing-only" in c["command"]]
    assert len(landing) == 1 and landing[0]["command"][:2] == ["codefleet", "runner"]
    worker = landing[0]["command"]
    tree = flag(serve["command"], "--workdir")

    assert flag(worker, "--workdir") == tree
    assert flag(worker, "--server") == f"http://127.0.0.1:{flag(serve['command'], '--port')}"
    volume = volume_at(pod, serve, tree)
    assert volume_at(pod, landing[0], tree) == volume
    claim = named("clones", "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    runner = container(named("clones", "Deployment", "codefleet-runner"), "runner")
    assert landing[0]["image"] == runner["image"]  # it runs the checks: the runners' toolchain


def test_the_init_container_fills_the_servers_tree() -> None:
    server = named("clones", "Deployment", "codefleet-server")
    pod, init = pod_spec(server), container(server, "init-tree")
    tree = flag(server_container("clones")["command"], "--workdir")

    assert {e["name"]: e["value"] for e in init["env"]}["CODEFLEET_TREE"] == tree
    assert volume_at(pod, init, tree) == volume_at(pod, server_container("clones"), tree)
    assert {"configMapRef": {"name": "codefleet-repository"}} in init["envFrom"]
    repository = named("clones", "ConfigMap", "codefleet-repository")["data"]
    assert ".example.internal/" in repository["CODEFLEET_REPOSITORY"]  # a placeholder


def test_the_autoscaler_sizes_the_runner_deployment_by_name() -> None:
    (hpa,) = [o for _, o in objects("clones") if o["kind"] == "HorizontalPodAutoscaler"]
    target = hpa["spec"]["scaleTargetRef"]
    runner = named("clones", "Deployment", target["name"])

    assert (target["apiVersion"], target["kind"]) == ("apps/v1", "Deployment")
    assert container(runner, "runner")["command"] == ["sh", "/etc/codefleet/runner.sh"]
    assert "replicas" not in runner["spec"]  # an apply would undo the autoscaler's count
    assert [m["type"] for m in hpa["spec"]["metrics"]] == ["External"]


def git_repository(root: Path) -> Path:
    run = ["git", "-c", "user.name=t", "-c", "user.email=t@example.internal", "-C", str(root)]
    root.mkdir()
    subprocess.run(["git", "init", "--quiet", str(root)], check=True)
    (root / "app.py").write_text("print('hi')\n")
    subprocess.run([*run, "add", "app.py"], check=True)
    subprocess.run([*run, "commit", "--quiet", "-m", "first"], check=True)
    return root


def init_tree(tree: Path, repository: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(tree.parent), "CODEFLEET_TREE": str(tree)}
    return subprocess.run(
        ["sh", str(CLONES / "init-tree.sh")],
        env=env | {"CODEFLEET_REPOSITORY": repository},
        capture_output=True,
        text=True,
        check=False,
    )


def test_init_tree_clones_an_empty_tree_and_keeps_a_tree_that_is_there(tmp_path: Path) -> None:
    assert shutil.which("git"), "init-tree.sh runs git"
    origin = git_repository(tmp_path / "origin")
    tree = tmp_path / "tree"
    tree.mkdir()

    first = init_tree(tree, str(origin))
    assert first.returncode == 0, first.stderr
    assert (tree / "app.py").read_text() == "print('hi')\n"
    (tree / "app.py").write_text("landed work\n")
    again = init_tree(tree, str(tmp_path / "gone"))
    assert again.returncode == 0, again.stderr
    assert (tree / "app.py").read_text() == "landed work\n"
