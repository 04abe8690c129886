"""The FGD paper's placement policies inside `kubetwin run` (Scenario.spec.gpuPlacementPolicy), on static Node
objects, and the openb trace replayed through `kubetwin run`."""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_builders import make_node
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.experiments import fgd, openb, openb_replay
from kubetwin.runner import run

pytestmark = pytest.mark.slow  # whole runs or processes: make test-fast leaves them out

DATA = Path(__file__).parent / "data" / "openb"


def scenario(policy: str | None) -> dict:
    spec: dict = {"duration": "1h"}
    if policy:
        spec["gpuPlacementPolicy"] = policy
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"}, "spec": spec}


def node(name: str, gpus: int, cpu: str = "32") -> dict:
    return make_node(name).capacity({"cpu": cpu, "memory": "128Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}).obj()


def share_pod(name: str, milli: int, at: str = "0s") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": {
        "alibabacloud.com/gpu-milli": str(milli), "alibabacloud.com/gpu-count": "1", "kubetwin.io/create-at": at}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}


def gpu_pod(name: str, k: int, at: str = "0s") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": {"kubetwin.io/create-at": at}},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                "requests": {"cpu": "1", "nvidia.com/gpu": str(k)}, "limits": {"nvidia.com/gpu": str(k)}}}]}}


def placements(res) -> dict[str, tuple[str, str]]:
    out = {}
    for _, _, _, o in res.history:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            out[o["metadata"]["name"]] = (o["spec"]["nodeName"], o["metadata"]["annotations"].get(
                "kubetwin.io/gpu-index", ""))
    return out


def test_packing_policies_share_a_gpu_and_keep_whole_gpus_free() -> None:
    objs = [node("a", 2), node("b", 2), share_pod("s1", 500), share_pod("s2", 500, "1s"), gpu_pod("w", 2, "2s")]
    for policy in ("BestFit", "GpuPacking", "FGD"):
        got = placements(run(objects=[scenario(policy), *objs]))
        assert got["s1"][0] == got["s2"][0] and got["s1"][1] == got["s2"][1], policy  # same GPU
        assert got["w"][0] != got["s1"][0] and got["w"][1] == "0,1", policy  # the untouched node, both GPUs


def test_open_gpu_share_filter_and_its_reason() -> None:
    """Shared milli counts against whole-GPU pods: NodeResourcesFit sees 2 free nvidia.com/gpu, open-gpu-share
    sees one GPU half used, so a 2-GPU pod cannot fit."""
    res = run(objects=[scenario("BestFit"), node("a", 2), share_pod("s", 500), gpu_pod("w", 2, "1s")])
    assert "w" not in placements(res)
    msgs = [o["message"] for _, _, _, o in res.history if o["kind"] == "Event" and o["reason"] == "FailedScheduling"]
    assert msgs[-1].startswith("0/1 nodes are available: 1 node(s) had no GPUs with enough free milli-GPU.")


def test_without_a_policy_the_default_scheduler_ignores_gpu_milli() -> None:
    res = run(objects=[scenario(None), node("a", 1), share_pod("s1", 600), share_pod("s2", 600)])
    assert set(placements(res)) == {"s1", "s2"} and all(i == "" for _, i in placements(res).values())


def test_openb_slice_through_kubetwin_run_matches_the_offline_study() -> None:
    """The paper's protocol (the trace's pods at once in seed 42's order, to 100 % of GPU capacity, no
    departures) through `kubetwin run`: each policy allocates what `kubetwin experiment fgd`'s replay allocates,
    up to tie-breaking (the run breaks ties with the scheduler's seeded selectHost draw), and FGD fragments least."""
    nodes, pods = openb.load_nodes(DATA / "nodes.csv"), openb.load_pods(DATA / "pods.csv")
    shapes = fgd.arrivals(nodes, pods, 42, 1.0)
    frag = {}
    for policy in ("Random", "BestFit", "FGD"):
        objs = openb_replay.to_objects(nodes, [], policy)
        objs[0]["spec"].update(duration="10m", sampleInterval="5m")
        for i, s in enumerate(shapes):
            p = openb.TracePod(f"p-{i:05d}", s.cpu_milli, s.memory_mib, s.num_gpu, s.gpu_milli, s.models, 0.0)
            objs.append(openb_replay.pod_object(p, 0.0))
        res = run(objects=objs)
        frag[policy] = res.summary["gpu_fragmentation"]["fragmented_gpu_pct_mean"]
        used = sum(shapes[int(name[2:])].gpu_total for name in placements(res))
        offline = fgd.Replay(nodes, shapes, policy, 42).run(shapes)[-1][1]
        assert abs(used - offline) < 0.04 * offline, policy
    assert frag["FGD"] < frag["BestFit"] < frag["Random"]


def test_openb_manifests_command_writes_a_runnable_scenario(tmp_path) -> None:
    out = tmp_path / "replay"
    res = CliRunner().invoke(app, ["experiment", "openb-manifests", "--nodes", str(DATA / "nodes.csv"), "--pods",
                                   str(DATA / "pods.csv"), "--policy", "FGD", "--limit", "40", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "cluster.yaml").is_file() and (out / "pods.yaml").is_file()
    ran = CliRunner().invoke(app, ["run", str(out), "-o", str(tmp_path / "run")])
    assert ran.exit_code == 0, ran.output
    assert "pods Succeeded" in ran.output and "Traceback" not in ran.output
    bad = CliRunner().invoke(app, ["experiment", "openb-manifests", "--nodes", str(DATA / "nodes.csv"), "--pods",
                                   str(DATA / "pods.csv"), "--policy", "Tetris", "-o", str(out)])
    assert bad.exit_code == 1 and "unknown policy 'Tetris'" in bad.output
