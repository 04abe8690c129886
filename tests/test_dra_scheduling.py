"""DRA end to end through `kubetwin run`: the NVIDIA DRA driver twin publishes slices, the ResourceClaim
controller makes claims from templates, the DynamicResources plugin allocates, reserves and explains."""

from __future__ import annotations

from pathlib import Path

import yaml
from dra_builders import SLICES_AT, TOLERATE, claim_pod, claim_template, dra_pool, gpu_claim

from kubetwin.runner import run

ROOT = Path(__file__).resolve().parents[1]


def test_driver_publishes_a_slice_per_node_and_its_device_classes() -> None:
    res = run(objects=[dra_pool().obj()], duration="10m")
    [(t, _, sl)] = res.versions("ResourceSlice")
    assert t == SLICES_AT and sl["spec"]["driver"] == "gpu.nvidia.com"
    assert sl["spec"]["pool"] == {"name": sl["spec"]["nodeName"], "generation": 1, "resourceSliceCount": 1}
    devs = sl["spec"]["devices"]
    assert [d["name"] for d in devs] == [f"gpu-{i}" for i in range(8)]
    assert devs[0]["capacity"] == {"memory": {"value": "81559Mi"}}
    assert devs[0]["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert devs[0]["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert "index" not in devs[0]["attributes"]  # removed from the driver in Sep 2025
    assert sorted(o["metadata"]["name"] for _, _, o in res.versions("DeviceClass")) == ["gpu.nvidia.com",
                                                                                         "mig.nvidia.com"]
    node = res.last("Node", sl["spec"]["nodeName"])
    assert "nvidia.com/gpu" not in node["status"]["allocatable"]  # no device plugin on DRA node pools


def test_claim_allocated_reserved_and_released() -> None:
    objs = [dra_pool().obj(), gpu_claim("shared", 6).obj(), claim_pod("first", "shared").duration("30m").obj(),
            gpu_claim("other", 4).obj(), claim_pod("second", "other").duration("30m").obj()]
    res = run(objects=objs, duration="2h")
    allocs = [o["status"]["allocation"] for _, _, o in res.versions("ResourceClaim", "shared")
              if (o.get("status") or {}).get("allocation")]
    results = allocs[0]["devices"]["results"]
    assert [r["device"] for r in results] == [f"gpu-{i}" for i in range(6)]
    assert {r["request"] for r in results} == {"gpu"}
    node = results[0]["pool"]
    assert allocs[0]["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    reserved = next(o for _, _, o in res.versions("ResourceClaim", "shared") if o.get("status", {}).get("reservedFor"))
    assert reserved["status"]["reservedFor"][0]["name"] == "first"
    assert reserved["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    # 4 more GPUs do not fit next to 6: the second pod waits in the plugin's words, then gets freed devices
    assert any(m.startswith("0/1 nodes are available: 1 cannot allocate all claims.")
               for m in [e.message for e in res.recorded_events("FailedScheduling", involved="second")])
    assert [e.message for e in res.recorded_events("Scheduled", involved="second")]
    final = res.last("ResourceClaim", "shared")
    assert "allocation" not in final["status"] and "finalizers" not in final["metadata"]  # deallocated
    other = next(o for _, _, o in res.versions("ResourceClaim", "other") if o.get("status", {}).get("allocation"))
    assert sorted(r["device"] for r in other["status"]["allocation"]["devices"]["results"]) == \
        ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_template_claims_are_generated_owned_and_deleted_with_the_pod() -> None:
    tmpl = claim_template("one-gpu", gpu_claim("x", 1)).obj()
    res = run(objects=[dra_pool().obj(), tmpl, claim_pod("worker", "one-gpu").template().duration("10m").obj()],
              duration="1h")
    [(t0, _, gen)] = [v for v in res.versions("ResourceClaim") if v[1] == "ADDED"]
    assert gen["metadata"]["name"].startswith("worker-gpu-") and len(gen["metadata"]["name"]) == len("worker-gpu-") + 5
    assert gen["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert gen["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    p = next(o for _, _, o in res.versions("Pod", "worker") if o.get("status", {}).get("resourceClaimStatuses"))
    assert p["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": gen["metadata"]["name"]}]
    assert res.versions("ResourceClaim")[-1][1] == "DELETED"  # the pod succeeded: its claim goes away


def test_seed_as_written_fails_in_the_schedulers_words(shared) -> None:
    """The seed's v1beta1 DeviceClass/ResourceClaim are converted to v1; the CEL selector then errors on
    every NVIDIA device, so scheduling fails with the allocator's runtime error, not "unschedulable"."""
    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / "seed-as-written.yaml").read_text()) if d]
    dra = [d for d in docs if d["apiVersion"].startswith("resource.k8s.io") or d["kind"] == "Pod"]
    dra[-1]["spec"]["tolerations"] = TOLERATE
    res = run(objects=[dra_pool().obj(), *dra], duration="30m")
    stored = res.versions("ResourceClaim", "gpu-claim")[0][2]
    assert stored["apiVersion"] == "resource.k8s.io/v1"
    assert stored["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "nvidia-gpu", "count": 2, "adminAccess": False,
                                    "allocationMode": "ExactCount"}}]
    msgs = [e.message for e in res.recorded_events("FailedScheduling", involved="training-job")]
    assert msgs[-1] == ('running "DynamicResources" filter plugin: class nvidia-gpu: selector #0: CEL runtime '
                        "error: no such key: quantity")
    cond = next(c for c in res.last("Pod", "training-job")["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["reason"] == "SchedulerError"


def test_prefilter_messages() -> None:
    res = run(objects=[dra_pool().obj(), claim_pod("lost", "nope").obj(),
                       gpu_claim("c", 1).device_class("no-such-class").obj(), claim_pod("classless", "c").obj()],
              duration="10m")
    assert [e.message for e in res.recorded_events("FailedScheduling", involved="lost")][-1] == \
        '0/1 nodes are available: could not find ResourceClaim "default/nope".'
    assert [e.message for e in res.recorded_events("FailedScheduling", involved="classless")][-1] == \
        "0/1 nodes are available: request gpu: device class no-such-class does not exist."


def test_dra_example_runs_and_reports_gpu_allocation() -> None:
    res = run([ROOT / "src" / "kubetwin" / "scenarios" / "dra"], duration="2h")
    alloc = res.summary["gpu_allocation"]
    assert alloc["h100-dra"]["gpu_hours_allocatable"] > 0 and alloc["h100-dra"]["gpu_hours_requested"] > 0
    evals = [o for _, et, o in res.versions("ResourceClaim") if et == "MODIFIED"
             and o["metadata"]["name"].startswith("inference-eval-") and o.get("status", {}).get("allocation")]
    picked = sorted({r["request"] for o in evals for r in o["status"]["allocation"]["devices"]["results"]})
    assert picked == ["gpu/a100", "gpu/h100"]  # firstAvailable: H100 first, two A100s as the fallback


class _Forgetful(dict):
    """A verdict cache that never remembers: every node is searched afresh."""

    def __setitem__(self, key, value) -> None:
        pass


def test_remembered_node_verdicts_change_nothing(monkeypatch) -> None:
    """The per-node search memo (keyed by request shape and the node's pool versions) must give exactly the
    decisions of a full search on every node: same history with and without it."""
    from kubetwin.scheduler import dra

    tmpl = claim_template("two", gpu_claim("x", 2)).obj()
    pools = [dra_pool().obj(), dra_pool().name("h100b").spec(nodeCount=2).obj()]
    pods = [claim_pod(f"p{i}", "two").template().duration(f"{10 + 7 * (i % 5)}m").obj() for i in range(14)]
    objs = [*pools, tmpl, *pods, gpu_claim("big", 4).obj(), claim_pod("big", "big").duration("20m").obj()]
    remembered = run(objects=objs, duration="3h").history
    init = dra.DynamicResources.__init__

    def forgetful(self, *a, **kw):
        init(self, *a, **kw)
        self._verdicts = _Forgetful()

    monkeypatch.setattr(dra.DynamicResources, "__init__", forgetful)
    assert run(objects=objs, duration="3h").history == remembered
    assert sum(1 for _, _, etype, o in remembered if o["kind"] == "Event" and o["reason"] == "Scheduled"
               and etype != "DELETED") == 15


def _mig_pool(name: str, **labels: str) -> dict:
    return dra_pool().name(name).node_labels(**labels).obj()


def _mig_claim(name: str, profile: str, count: int = 1) -> dict:
    c = gpu_claim(name, count).device_class("mig.nvidia.com").obj()
    c["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": f'device.attributes["gpu.nvidia.com"].profile == "{profile}"'}}]
    return c


def test_static_mig_devices_replace_the_whole_gpus() -> None:
    objs = [_mig_pool("mig", **{"nvidia.com/mig.config": "all-3g.40gb"}), _mig_claim("two", "3g.40gb", 2),
            claim_pod("p", "two").obj()]
    res = run(objects=objs, duration="30m")
    [(_, _, sl)] = res.versions("ResourceSlice")
    devs = sl["spec"]["devices"]
    assert [d["name"] for d in devs[:2]] == ["gpu-0-mig-9-0-4", "gpu-0-mig-9-4-4"] and len(devs) == 16
    d = devs[1]
    assert d["attributes"]["type"] == {"string": "mig"} and d["attributes"]["profile"] == {"string": "3g.40gb"}
    assert d["capacity"]["memory"] == {"value": "40448Mi"} and d["capacity"]["multiprocessors"] == {"value": "60"}
    assert sorted(k for k in d["capacity"] if k.startswith("memorySlice")) == [f"memorySlice{i}"
                                                                               for i in range(4, 8)]
    alloc = next(o for _, _, o in res.versions("ResourceClaim", "two") if o.get("status", {}).get("allocation"))
    assert [r["device"] for r in alloc["status"]["allocation"]["devices"]["results"]] == ["gpu-0-mig-9-0-4",
                                                                                          "gpu-0-mig-9-4-4"]
    assert res.summary["gpu_allocation"]["mig"]["gpu_hours_allocatable"] > 0


def test_dynamic_mig_counters_keep_layouts_legal() -> None:
    """DynamicMIG publishes whole GPUs and every MIG placement consuming the GPU's memory slices: with
    DRAPartitionableDevices on, a 4g.40gb (slices 0-3) leaves a 3g.40gb only start 4, and a whole-GPU claim
    goes to the next GPU; with the gate at its 1.34 default (off) nothing is allocatable."""
    whole = gpu_claim("whole", 1).obj()
    objs = [_mig_pool("dyn", **{"kubetwin.io/nvidia-dra-dynamic-mig": "true"}),
            _mig_claim("four", "4g.40gb"), claim_pod("a", "four").obj(), _mig_claim("three", "3g.40gb"),
            claim_pod("b", "three").annotation('kubetwin.io/create-at', '6m').obj(), whole,
            claim_pod("c", "whole").annotation('kubetwin.io/create-at', '7m').obj()]
    gates = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
             "spec": {"featureGates": {"DRAPartitionableDevices": True}}}
    res = run(objects=[gates, *objs], duration="30m")
    slices = [o for _, _, o in res.versions("ResourceSlice")]
    assert len(slices) == 8 and all(s["spec"]["pool"]["resourceSliceCount"] == 8 for s in slices)
    assert slices[0]["spec"]["sharedCounters"][0]["name"] == "gpu-0-counter-set"

    def picked(name: str) -> list[str]:
        o = next(o for _, _, o in res.versions("ResourceClaim", name) if o.get("status", {}).get("allocation"))
        return [r["device"] for r in o["status"]["allocation"]["devices"]["results"]]
    # slices are walked in name order (their names end in random characters): the first holds GPU `first`
    first = min(slices, key=lambda s: s["metadata"]["name"])["spec"]["devices"][0]["name"]
    assert picked("four") == [f"{first}-mig-5-0-4"]
    assert picked("three") == [f"{first}-mig-9-4-4"]  # start 0 is taken by the 4g's slices
    [gpu] = picked("whole")
    assert gpu != first and "-mig-" not in gpu
    off = run(objects=objs, duration="30m")
    failed = off.recorded_events("FailedScheduling", involved="a")
    assert failed[-1].message.startswith("0/1 nodes are available: 1 cannot allocate all claims.")
