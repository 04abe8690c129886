"""A pod's effective requests as component-helpers' PodRequests computes them, seen by every controller.

Sidecars (init containers with restartPolicy: Always) keep running beside the containers, so they add to the
pod's requests; a regular init container needs the sidecars started before it (k8s.io/component-helpers
resource/helpers.go, KEP-753).
"""

from __future__ import annotations

import re

import pytest
from conftest import write_yaml
from k8s_builders import init_pod, make_scenario, static_node
from typer.testing import CliRunner

from kubetwin.cli.main import app


def run_and_describe(tmp_path, objs: list[dict], *cmds: list[str]) -> list[str]:
    path = write_yaml(tmp_path / "s.yaml", [make_scenario("30m").obj(), *objs])
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    outputs = []
    for cmd in cmds:
        res = CliRunner().invoke(app, [*cmd, "--run", str(out), "--at", "10m"])
        assert res.exit_code == 0, res.output
        outputs.append(res.output)
    return outputs


def test_sidecar_adds_to_the_pods_requests_when_scheduling_and_in_describe_node(tmp_path) -> None:
    # 2000m + a 500m sidecar = 2500m on a 4-CPU node: a 1600m pod no longer fits beside it.
    objs = [static_node("n1").obj(),
            init_pod("with-sidecar", "2000m").init_container("proxy", "500m", sidecar=True).obj(),
            init_pod("filler", "1600m").create_at("1s").obj()]
    filler, described = run_and_describe(tmp_path, objs, ["describe", "pod", "filler"], ["describe", "node", "n1"])
    assert "0/1 nodes are available: 1 Insufficient cpu." in filler
    assert "Status:       Pending" in filler
    assert "Allocated resources:" in described
    alloc = described.split("Allocated resources:")[1]
    assert "cpu" in alloc and "2500m (62%)" in alloc
    assert "with-sidecar" in described.split("Non-terminated Pods:")[1]


def test_regular_init_container_runs_beside_the_sidecars_started_before_it(tmp_path) -> None:
    # max(2000m + 500m, 2200m init + 500m sidecar before it) = 2700m: a 1400m pod does not fit in 4 CPUs.
    objs = [static_node("n1").obj(),
            init_pod("init-after-sidecar", "2000m").init_container("proxy", "500m", sidecar=True)
            .init_container("setup", "2200m").obj(),
            init_pod("filler", "1400m").create_at("1s").obj()]
    filler, described = run_and_describe(tmp_path, objs, ["describe", "pod", "filler"], ["describe", "node", "n1"])
    assert "0/1 nodes are available: 1 Insufficient cpu." in filler
    assert "2700m (67%)" in described.split("Allocated resources:")[1]


def test_init_container_before_the_sidecar_does_not_count_it(tmp_path) -> None:
    # The 3000m init container runs before the sidecar starts: max(2000m + 500m, 3000m) = 3000m, so 1000m fits.
    objs = [static_node("n1").obj(),
            init_pod("init-first", "2000m").init_container("setup", "3000m")
            .init_container("proxy", "500m", sidecar=True).obj(),
            init_pod("filler", "1000m").create_at("1s").obj()]
    filler, described = run_and_describe(tmp_path, objs, ["describe", "pod", "filler"], ["describe", "node", "n1"])
    assert "Node:         n1" in filler
    assert "4 (100%)" in described.split("Allocated resources:")[1]


def test_pod_level_requests_replace_the_containers_sum_for_cpu_and_memory(tmp_path) -> None:
    # PodLevelResources (beta, on in 1.34): spec.resources.requests.cpu 3 stands for the pod, not its
    # container's 1 CPU; a 1500m pod no longer fits on the 4-CPU node.
    big = init_pod("pod-level", "1").obj()
    big["spec"]["resources"] = {"requests": {"cpu": "3"}, "limits": {"cpu": "3"}}
    filler, described = run_and_describe(tmp_path,
                                         [static_node("n1").obj(), big,
                                          init_pod("filler", "1500m").create_at("1s").obj()],
                                         ["describe", "pod", "filler"], ["describe", "node", "n1"])
    assert "0/1 nodes are available: 1 Insufficient cpu." in filler
    assert re.search(r"pod-level\s+3 \(75%\)\s+3 \(75%\)", described)  # CPU requests and limits


@pytest.mark.parametrize("resources", [{"limits": {"nvidia.com/gpu": "{n}"}},
                                       {"limits": {"nvidia.com/gpu": "{n}"}, "requests": {"nvidia.com/gpu": "{n}"}}])
@pytest.mark.parametrize("n", [1, 2, 8])
def test_what_a_containers_devices_give_it_is_one_rule(resources: dict, n: int) -> None:
    """The readers of a container's devices (GKE's sharing device plugin, the model server's visible GPUs) ask
    api.podresources' container rule, so a GPU written as limits alone or as limits and requests reads the same."""
    from kubetwin.api.podresources import container_limits, container_requests
    from kubetwin.devices.sharing import admission_error
    from kubetwin.serving.modelserver.recognize import gpu_count

    c = {"name": "c", "image": "x", "resources": {k: {r: v.format(n=n) for r, v in rl.items()}
                                                  for k, rl in resources.items()}}
    assert container_requests(c)["nvidia.com/gpu"] == container_limits(c)["nvidia.com/gpu"] == n
    assert gpu_count(c) == n
    shared = admission_error({"cloud.google.com/gke-gpu-sharing-strategy": "time-sharing"},
                             {"spec": {"containers": [c]}})
    assert (shared is not None) == (n > 1)
