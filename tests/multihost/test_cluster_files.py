"""Every shipped cluster file passes the validation its tool applies (Ray's own, for launcher files).

Launcher files (cluster.yaml, deploy/aws.yaml) go through what `ray up` does before it
touches a machine: ``prepare_config`` (defaults of the provider merged in, local
provider's node type filled) then ``validate_config`` (Ray's ray-schema.json plus its
consistency checks). The KubeRay manifest gets a structural check of what the RayCluster
CRD (ray.io/v1) requires; the CRD schema itself (~700 KB) is not vendored here.
"""
from __future__ import annotations

import copy
import os
import re

import jsonschema
import pytest
import ray
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCHER_FILES = ["cluster.yaml", "deploy/aws.yaml"]


def load(name: str) -> dict:
    with open(os.path.join(REPO, name)) as f:
        return yaml.safe_load(f)


def ray_validates(config: dict) -> dict:
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


@pytest.mark.parametrize("name", LAUNCHER_FILES)
def test_launcher_file_passes_rays_validation_and_starts_logan_ray_on_every_node(name):
    config = load(name)
    prepared = ray_validates(config)
    assert prepared["provider"]["type"] in ("local", "aws")
    head = " ".join(config["head_start_ray_commands"])
    workers = " ".join(config["worker_start_ray_commands"])
    # token auth on every node, with the launcher's token copied to each
    assert re.search(r"RAY_AUTH_MODE=token (\S+=\S+ )*ray start --head", head)
    assert "RAY_AUTH_MODE=token ray start --address=$RAY_HEAD_IP:6379" in workers
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    # logan-ray on the head, with a gateway on each node's own address and a fixed data dir
    # (its listener security: tests/multihost/test_deploy_security.py)
    assert "logan-ray start --address auto --data-dir /var/lib/logan-ray --config listeners=SASL_SSL://:9092" in head
    if prepared["provider"]["type"] == "local":
        node_type = prepared["available_node_types"]["local.cluster.node"]
        assert node_type["min_workers"] == node_type["max_workers"] == len(config["provider"]["worker_ips"])
    else:  # cloud: a fixed-size cluster, nodes stopped (disks kept) rather than terminated
        workers_type = prepared["available_node_types"]["worker"]
        assert workers_type["min_workers"] == workers_type["max_workers"]
        assert prepared["provider"]["cache_stopped_nodes"] is True


@pytest.mark.parametrize("name", LAUNCHER_FILES)
def test_rays_validation_rejects_a_broken_launcher_file(name):
    """The check above is Ray's real one: a misspelt field or a wrong type fails it."""
    misspelt = load(name)
    misspelt["head_start_ray_comands"] = misspelt.pop("head_start_ray_commands")
    with pytest.raises(jsonschema.ValidationError):
        ray_validates(misspelt)
    wrong_type = load(name)
    wrong_type["auth"]["ssh_user"] = 22
    with pytest.raises(jsonschema.ValidationError):
        ray_validates(wrong_type)


def check_raycluster(doc: dict) -> None:
    """What KubeRay's RayCluster CRD (ray.io/v1) requires of a manifest, and what logan-ray needs."""
    assert doc["apiVersion"] == "ray.io/v1" and doc["kind"] == "RayCluster"
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
    spec = doc["spec"]
    assert spec["rayVersion"] == ray.__version__  # the image must run the Ray logan-ray pins
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    for group in groups:
        assert all(isinstance(v, str) for v in group.get("rayStartParams", {}).values())  # CRD: map of strings
        containers = group["template"]["spec"]["containers"]
        assert containers and all(c["name"] and c["image"] for c in containers)
        for c in containers:
            env = {e["name"]: e for e in c.get("env", [])}
            assert env["RAY_AUTH_MODE"]["value"] == "token" and "RAY_AUTH_TOKEN" in env  # one shared token
            assert 9092 in [p["containerPort"] for p in c.get("ports", [])]
            mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
            volumes = {v["name"] for v in group["template"]["spec"].get("volumes", [])}
            assert set(mounts) <= volumes
    for w in spec["workerGroupSpecs"]:
        assert w["groupName"] and isinstance(w["replicas"], int)
        assert w["minReplicas"] == w["maxReplicas"] == w["replicas"]  # nodes holding partitions never scale away
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    start = " ".join(head["lifecycle"]["postStart"]["exec"]["command"])
    assert "logan-ray start --address auto --config listeners=SASL_SSL://:9092" in start


def test_kuberay_manifest_has_what_the_raycluster_crd_requires():
    with open(os.path.join(REPO, "deploy", "kuberay.yaml")) as f:
        docs = list(yaml.safe_load_all(f))
    assert len(docs) == 1
    check_raycluster(docs[0])
    broken = copy.deepcopy(docs[0])
    broken["spec"]["workerGroupSpecs"][0]["rayStartParams"]["num-cpus"] = 2  # an int where the CRD wants a string
    with pytest.raises(AssertionError):
        check_raycluster(broken)
