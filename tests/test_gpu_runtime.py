"""What sharing does to run time and memory: time-slicing, MPS and MIG, end to end through `kubetwin run`."""

from __future__ import annotations

import pytest
from k8s_builders import make_pod, make_pool, make_scenario

from kubetwin.devices.gpuruntime import TIME_SLICE_OVERHEAD, Demand, SharedGpu, demand_of
from kubetwin.k8s.units import UnitError
from kubetwin.runner import run


def _pool(sharing: str | None = None, clients: int = 4, partition: str | None = None) -> dict:
    pool = make_pool("gpu", "a2-highgpu-1g", 1).spec(driverInstallDelay="0s").gpus("nvidia-tesla-a100", 1).obj()
    acc = pool["spec"]["accelerators"][0]
    if sharing:
        acc["gpuSharingConfig"] = {"gpuSharingStrategy": sharing, "maxSharedClientsPerGpu": clients}
    if partition:
        acc["gpuPartitionSize"] = partition
    return pool


def _pod(name: str, util: str, memory: str, duration: str = "60m") -> dict:
    pod = make_pod(name).gpus(1).duration(duration).obj()
    pod["metadata"]["annotations"].update({"kubetwin.io/gpu-util": util, "kubetwin.io/gpu-memory": memory})
    return pod


def _ends(result) -> dict[str, tuple[float, str, str]]:
    """pod -> (seconds from start to end, phase, termination message) for pods that ended."""
    start: dict[str, float] = {}
    out = {}
    for t, _, _, o in result.history:
        if o["kind"] != "Pod":
            continue
        name, phase = o["metadata"]["name"], o["status"].get("phase")
        if phase == "Running":
            start.setdefault(name, t)
        if phase in ("Succeeded", "Failed") and name not in out:
            term = (o["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("terminated", {})
            out[name] = (t - start.get(name, t), phase, term.get("message", o["status"].get("message", "")))
    return out


def test_demand_annotations() -> None:
    assert demand_of({"kubetwin.io/gpu-util": "30%", "kubetwin.io/gpu-memory": "12Gi"}) == Demand(0.3, 12 * 1024)
    assert demand_of({}) == Demand(1.0, 0)
    with pytest.raises(UnitError, match="must be above 0 and at most 1"):
        demand_of({"kubetwin.io/gpu-util": "1.5"})


def test_time_sliced_pods_slow_down_when_together_they_want_more_than_the_gpu() -> None:
    gpu = SharedGpu("time-sharing", 40960, 4)
    assert gpu.slowdown() == 1.0
    from kubetwin.devices.gpuruntime import Tenant
    gpu.tenants = {"a": Tenant("a", Demand(0.8, 0), 1.0), "b": Tenant("b", Demand(0.7, 0), 1.0)}
    assert gpu.slowdown() == pytest.approx(1.5 * (1 + TIME_SLICE_OVERHEAD))
    gpu.mode = "mps"
    assert gpu.slowdown() == pytest.approx(1.5)


def test_time_slicing_run_times_and_the_speed_up_when_a_tenant_leaves() -> None:
    # two pods each busy 80 % of a GPU: together 1.6x slower (plus context switching) until one finishes
    objs = [make_scenario("6h").obj(), _pool("TIME_SHARING"), _pod("long", "0.8", "10Gi", "60m"),
            _pod("short", "0.8", "10Gi", "30m")]
    ends = _ends(run(objects=objs))
    slow = 1.6 * (1 + TIME_SLICE_OVERHEAD)
    assert ends["short"][0] == pytest.approx(1800 * slow)
    # long did 30 min of work in that time, then runs alone at full speed for the other 30
    assert ends["long"][0] == pytest.approx(1800 * slow + 1800)
    assert {e[1] for e in ends.values()} == {"Succeeded"}


def test_time_slicing_has_no_memory_isolation() -> None:
    objs = [make_scenario("3h").obj(), _pool("TIME_SHARING"), _pod("a", "0.3", "25Gi"), _pod("b", "0.3", "25Gi")]
    ends = _ends(run(objects=objs))
    failed = [n for n, e in ends.items() if e[1] == "Failed"]
    assert len(failed) == 1  # the 40 GB A100 holds one 25 GiB pod, not two
    assert "2 time-sliced pods need 51200 MiB of the GPU's 40960 MiB (no memory isolation)" in ends[failed[0]][2]


def test_mps_caps_each_client_and_isolates_the_rest() -> None:
    objs = [make_scenario("3h").obj(), _pool("MPS", clients=4), _pod("small", "0.3", "8Gi"), _pod("big", "0.3", "12Gi")]
    ends = _ends(run(objects=objs))
    assert ends["big"][1] == "Failed"
    assert "MPS limits each of 4 clients to 10240 MiB" in ends["big"][2]
    assert ends["small"] == (3600.0, "Succeeded", "")  # 0.3 of a GPU: no slowdown under MPS


def test_mig_instances_are_isolated_and_run_at_their_slice() -> None:
    objs = [make_scenario("6h").obj(), _pool(partition="3g.20gb"), _pod("fits", "0.25", "10Gi"),
            _pod("busy", "0.9", "10Gi"),
            _pod("oom", "0.1", "30Gi")]
    ends = _ends(run(objects=objs))
    assert ends["fits"] == (3600.0, "Succeeded", "")  # 25 % of a GPU fits in 3/7 of one
    assert ends["busy"][0] == pytest.approx(3600 * 0.9 / (3 / 7))
    assert ends["oom"][1] == "Failed" and "MIG instance 3g.20gb has 19968 MiB" in ends["oom"][2]


def test_bad_gpu_demand_annotations_are_validation_errors() -> None:
    from kubetwin.api.loader import load_text
    from kubetwin.validation.validate import validate

    text = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    kubetwin.io/gpu-util: lots\n"
            "    kubetwin.io/gpu-memory: 12 gigs\nspec:\n  containers:\n  - name: c\n    image: x\n")
    msgs = [d.render() for d in validate(load_text(text, "p.yaml"))]
    assert any(m.startswith('p.yaml:6: error: Pod/p: metadata.annotations["kubetwin.io/gpu-util"]: ') for m in msgs)
    assert any(m.startswith('p.yaml:7: error: Pod/p: metadata.annotations["kubetwin.io/gpu-memory"]: ') for m in msgs)


def test_gpu_sharing_demo_compares_the_three_modes(tmp_path) -> None:
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    res = CliRunner().invoke(app, ["demo", "gpu-sharing", "--out", str(tmp_path / "gs")])
    assert res.exit_code == 0, res.output
    import json

    g = json.loads((tmp_path / "gs" / "summary.json").read_text())["gpu_sharing"]
    # MIG 1g.5gb slices (4864 MiB) and MPS's per-client cap (40960/7 MiB) both refuse the two 6 GiB replicas;
    # time-sharing runs all 14 but slowest: 6 x 20 % + 35 % of one GPU, plus context switching
    assert (g["mig"]["gpu_oom_failures"], g["mps"]["gpu_oom_failures"], g["timeslice"]["gpu_oom_failures"]) == (2, 2, 0)
    assert g["mig"]["slowdown_mean"] == pytest.approx(0.2 * 7)
    assert g["mps"]["slowdown_mean"] == pytest.approx(1.2)
    assert g["timeslice"]["slowdown_mean"] == pytest.approx(1.55 * (1 + TIME_SLICE_OVERHEAD), abs=1e-3)
    assert "GPU sharing timeslice" in res.output


def test_unknown_demo_is_a_clear_error() -> None:
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    res = CliRunner().invoke(app, ["demo", "nope"])
    assert res.exit_code == 1 and "no built-in scenario 'nope'" in res.output
