"""Training speed: the step-time model by hand (compute, network, data, overlap, checkpoints), the annotation spec's
validation, and a training Job run end to end (run time = the model's prediction; Spot resume from a checkpoint)."""

from __future__ import annotations

import pytest
from k8s_builders import make_pool, make_scenario
from training_builders import FakeNet, spec

from kubetwin.api.loader import Manifest
from kubetwin.runner import run
from kubetwin.validation.validate import validate
from kubetwin.workloads.storage import MIB, ReadPath
from kubetwin.workloads.training import DDP_BUCKET_BYTES, Placement, job_seconds, step_breakdown
from kubetwin.workloads.training_spec import SpecError, parse

P = "training.kubetwin.io/"


def node(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {}}}


def place(nodes: int = 1, gpus: int = 8, **kw) -> Placement:
    return Placement(tuple((node(f"n{i}"), gpus) for i in range(nodes)), 1000.0, **kw)


# -- compute, network, overlap ----------------------------------------------------------------------------
def test_compute_bound_step() -> None:
    # 6e9 FLOPs/token x 8,000 tokens / (8 GPUs x 1 PFLOPS x 0.5) = 12 ms; the 2 GB of bf16 gradients all-reduce
    # in 2 ms, hidden behind the 8 ms backward except the last 25 MiB bucket
    st = step_breakdown(spec(), place(), FakeNet())
    assert st.compute == pytest.approx(0.012) and st.bubble == 0 and st.dp == 8 and st.microbatches == 1
    assert st.comm_raw["dp"] == pytest.approx(2e-3)
    assert st.comm["dp"] == pytest.approx(DDP_BUCKET_BYTES / 1e12)
    assert st.total == pytest.approx(0.012 + DDP_BUCKET_BYTES / 1e12) and st.data_stall == 0
    assert st.work == pytest.approx(1000 * st.total)


@pytest.mark.parametrize(("bw", "exposed"), [(1e12, None), (2.5e11, None), (1e11, 0.012), (5e10, 0.032)])
def test_dp_allreduce_hides_behind_backward_until_it_exceeds_it(bw: float, exposed: float | None) -> None:
    # 2 GB at `bw`: 2, 8, 20, 40 ms against an 8 ms backward. Hidden: only the last 25 MiB bucket shows; beyond
    # the backward: all-reduce - backward (the last bucket is inside that excess)
    st = step_breakdown(spec(), place(), FakeNet(intra=bw))
    last = DDP_BUCKET_BYTES / bw
    assert st.comm["dp"] == pytest.approx(last if exposed is None else exposed)


def test_gradient_accumulation_overlaps_only_the_last_microbatch() -> None:
    # 8 sequences over 2 ranks x 1 per micro-batch = 4 micro-batches: only the last one's backward (1/4) hides comm
    st = step_breakdown(spec(data_parallel="2"), place(gpus=2), FakeNet(intra=2.5e11))
    assert st.microbatches == 4
    compute = 6e9 * 8000 / (2 * 1e15 * 0.5)
    last = DDP_BUCKET_BYTES / 2.5e11
    assert st.comm["dp"] == pytest.approx(last + max(0.0, 8e-3 - last - compute * 2 / 3 / 4))


def test_network_bound_at_many_nodes_on_a_slow_tier() -> None:
    s = spec(params="70B", global_batch_size="256", sequence_length="4096", tensor_parallel="8", fsdp="true")
    fast = step_breakdown(s, place(nodes=32), FakeNet(inter=1e11))
    slow = step_breakdown(s, place(nodes=32), FakeNet(inter=1.25e9))  # ~10 Gbps per node
    assert slow.compute == pytest.approx(fast.compute)
    assert slow.exposed_comm > slow.compute > 0 and slow.exposed_comm > 10 * fast.exposed_comm
    assert slow.advice[0].change == "faster network tier (2x bandwidth)"
    # TP stays inside a node: its cost does not depend on the inter-node tier
    assert slow.comm["tp"] == pytest.approx(fast.comm["tp"])
    assert slow.comm["tp"] > 0


def test_one_node_job_is_not_told_to_buy_a_faster_network_tier() -> None:
    """Inside one node collectives ride NVLink: the node pool's network tier cannot change them."""
    s = spec(params="70B", global_batch_size="256", sequence_length="4096", tensor_parallel="8")
    st = step_breakdown(s, place(nodes=1), FakeNet(intra=1e9))
    assert st.exposed_comm > st.compute > 0
    assert "faster network tier (2x bandwidth)" not in [a.change for a in st.advice]

def test_fsdp_prefetch_overlaps_all_gathers_with_compute() -> None:
    s = spec(fsdp="true", layers="10")
    st = step_breakdown(s, place(), FakeNet(intra=1e12))
    # per micro-batch: 2 all-gathers + 1 reduce-scatter of the 2 GB shard = 6 ms, under the 12 ms of compute; only
    # the first layer's all-gather (0.2 ms) is exposed
    assert st.comm_raw["fsdp"] == pytest.approx(6e-3)
    assert st.comm["fsdp"] == pytest.approx(2e9 / 10 / 1e12)


def test_tensor_and_pipeline_parallel_costs() -> None:
    s = spec(tensor_parallel="2", pipeline_parallel="2", global_batch_size="8", layers="4", hidden_size="1000")
    st = step_breakdown(s, place(), FakeNet(intra=1e12))
    assert st.dp == 2 and st.microbatches == 4
    assert st.bubble == pytest.approx(st.compute * 1 / 4)  # (pp-1)/m
    act = 1 * 1000 * 1000 * 2
    assert st.comm["tp"] == pytest.approx(4 * 2 * 4 * act / 1e12)  # 4 per layer x 2 layers per stage x 4 mb
    assert st.comm["pp"] == pytest.approx(2 * 4 * act / 1e12)


# -- data loading -----------------------------------------------------------------------------------------
SLOW = ReadPath("filestore", 100e6, "Filestore basic 100 MB/s")  # shared: the whole job gets 100 MB/s


@pytest.mark.parametrize("loading", ["streaming", "pipelined", "prestaged"])
def test_data_starved_streaming_vs_pipelined_vs_prestaged(loading: str) -> None:
    s = spec(data_path="/data", dataset_bytes_per_sample="1M", data_loading=loading)  # 8 MB a step: 80 ms
    st = step_breakdown(s, place(read=SLOW), FakeNet())
    busy = st.busy
    assert st.read == pytest.approx(0.08)
    want = {"streaming": 0.08, "pipelined": 0.08 - busy, "prestaged": 0.0}[loading]
    assert st.data_stall == pytest.approx(want)
    assert st.prestage == pytest.approx(1000 * 8 * 1e6 / 100e6 if loading == "prestaged" else 0.0)
    if loading == "streaming":
        assert [a.change for a in st.advice][:1] == ["pipelined loading"]


def test_per_vm_storage_scales_with_nodes() -> None:
    pd = ReadPath("pd-balanced", 100e6, "pd")
    s = spec(data_path="/data", dataset_bytes_per_sample="1M", data_loading="streaming")
    one, two = (step_breakdown(s, place(nodes=n, read=pd), FakeNet()) for n in (1, 2))
    assert two.read == pytest.approx(one.read / 2)


def mt_place(machine: str, nodes: int, **kw) -> Placement:
    return Placement(tuple(({"metadata": {"name": f"n{i}", "labels": {"node.kubernetes.io/instance-type": machine}}},
                            8) for i in range(nodes)), 1000.0, **kw)


def test_hyperdisk_ml_shared_by_eight_nodes_is_capped_per_vm() -> None:
    # 100,000 MiB/s provisioned, read-only-many by 8 a3-highgpu-8g: each VM reads at most 4,000 MiB/s (twin
    # assumption), so the job gets min(100,000, 8 x 4,000) = 32,000 MiB/s; 8 x 1 GiB a step = 8,192 MiB / 32,000 MiB/s
    hdml = ReadPath("hyperdisk-ml", 100000 * MIB, "Hyperdisk ML")
    s = spec(data_path="/data", dataset_bytes_per_sample="1Gi", data_loading="streaming")
    st = step_breakdown(s, mt_place("a3-highgpu-8g", 8, read=hdml), FakeNet(), advise=False)
    assert st.read == pytest.approx(8192 / 32000)
    small = ReadPath("hyperdisk-ml", 2400 * MIB, "Hyperdisk ML")  # below 8 x 4,000: the volume's rate is the limit
    st = step_breakdown(s, mt_place("a3-highgpu-8g", 8, read=small), FakeNet(), advise=False)
    assert st.read == pytest.approx(8192 / 2400)


def test_nic_caps_reads_from_network_storage() -> None:
    # a 100 GB/s Parallelstore read by 2 a2-highgpu-8g (100 Gbps NIC = 12.5 GB/s each): 25 GB/s for the job;
    # 8 x 1 GB a step = 0.32 s. On a3-megagpu-8g (200 Gbps) 50 GB/s: 0.16 s.
    ps = ReadPath("parallelstore", 100e9, "Parallelstore")
    s = spec(data_path="/data", dataset_bytes_per_sample="1G", data_loading="streaming")
    assert step_breakdown(s, mt_place("a2-highgpu-8g", 2, read=ps), FakeNet(), advise=False).read == \
        pytest.approx(8e9 / 25e9)
    assert step_breakdown(s, mt_place("a3-megagpu-8g", 2, read=ps), FakeNet(), advise=False).read == \
        pytest.approx(8e9 / 50e9)
    # a per-VM store faster than the NIC (hypothetical 20 GB/s GCS FUSE): min(20, 12.5) per a2 node x 2
    gcs = ReadPath("gcsfuse", 20e9, "GCS FUSE")
    assert step_breakdown(s, mt_place("a2-highgpu-8g", 2, read=gcs), FakeNet(), advise=False).read == \
        pytest.approx(8e9 / 25e9)


def test_many_small_files_on_parallelstore_stall_a_job_bytes_alone_would_not() -> None:
    # 12 TiB Parallelstore: 13.8 GiB/s (under one a3-megagpu-8g's 25 GB/s NIC), 360,000 read IOPS. 8 x 1 MB a step:
    # bytes take 0.54 ms, hidden behind the 12 ms step. 20,000 files a step (tiny samples, augmentations) cost
    # 20,000 / 360,000 = 55.6 ms: a 43.6 ms stall.
    ps = ReadPath("parallelstore", 1.15 * 12 * 1024**3, "Parallelstore", 30000 * 12)
    base = spec(data_path="/data", dataset_bytes_per_sample="1M")
    st = step_breakdown(base, mt_place("a3-megagpu-8g", 1, read=ps), FakeNet(), advise=False)
    assert st.read == pytest.approx(8e6 / (1.15 * 12 * 1024**3)) and st.data_stall == 0
    files = spec(data_path="/data", dataset_bytes_per_sample="1M", dataset_files_per_step="20000")
    st = step_breakdown(files, mt_place("a3-megagpu-8g", 1, read=ps), FakeNet(), advise=False)
    assert st.read == pytest.approx(20000 / 360000)
    assert st.data_stall == pytest.approx(20000 / 360000 - st.busy) and st.data_stall > 0.04


def test_files_per_step_must_be_a_whole_number() -> None:
    with pytest.raises(SpecError):
        spec(dataset_files_per_step="0")


# -- checkpoints ------------------------------------------------------------------------------------------
def test_checkpoint_cost_is_synchronous_and_amortized() -> None:
    store = ReadPath("parallelstore", 1e9, "Parallelstore")
    st = step_breakdown(spec(checkpoint_every="100"), place(checkpoint_write=store, checkpoint_read=store), FakeNet())
    assert st.checkpoint_write == pytest.approx(1e9 * 14 / 1e9)  # 14 bytes/param at 1 GB/s
    assert st.checkpoint == pytest.approx(0.14) and st.checkpoints == 10
    assert st.work == pytest.approx(1000 * st.step + 10 * 14.0)
    assert st.checkpoint_interval == pytest.approx(100 * st.step + 14.0)
    assert st.restart == pytest.approx(14.0)
    assert job_seconds(st) == pytest.approx(st.work)
    # without checkpoint-every or kubetwin.io/checkpoint-interval nothing is written
    assert step_breakdown(spec(), place(checkpoint_write=store), FakeNet()).checkpoint_write == 0


def test_checkpoint_interval_annotation_becomes_steps() -> None:
    s = parse({P + "params": "1e9", P + "steps": "1000", P + "global-batch-size": "8", P + "sequence-length": "1000",
               P + "mfu": "0.5", "kubetwin.io/checkpoint-interval": "1.2s"})
    st = step_breakdown(s, place(), FakeNet())
    assert st.checkpoint_every == round(1.2 / st.step) == 100


# -- validation -------------------------------------------------------------------------------------------
def _job(ann: dict, parallelism: int = 1, gpus: int = 8) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
            "spec": {"parallelism": parallelism, "completions": parallelism, "completionMode": "Indexed",
                     "backoffLimit": 3, "template": {"metadata": {"annotations": ann}, "spec": {
                         "restartPolicy": "Never", "containers": [{"name": "t", "image": "x", "resources": {
                             "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}


# 3B: 48 GB of mixed-precision Adam states per data-parallel rank fit an 80 GB H100 (7B, 112 GB, would not: memory.py)
GOOD = {P + "params": "3B", P + "steps": "200", P + "global-batch-size": "16", P + "sequence-length": "2048"}


def _errors(obj: dict) -> list:
    return [d for d in validate([Manifest(obj, "t.yaml", 1)]) if d.severity == "error"]


@pytest.mark.parametrize(("extra", "key", "text"), [
    ({P + "params": "seventy"}, P + "params", "positive number"),
    ({P + "data-loading": "lazy"}, P + "data-loading", "Unsupported value"),
    ({P + "mfu": "1.5"}, P + "mfu", "fraction"),
    ({P + "fsdp": "yes"}, P + "fsdp", '"true" or "false"'),
    ({P + "data-path": "data"}, P + "data-path", "absolute"),
    ({P + "checkpoint-size": "big"}, P + "checkpoint-size", "quantity"),
    ({P + "tensor-parallel": "0"}, P + "tensor-parallel", "whole number"),
    ({P + "stepz": "1"}, P + "stepz", "unknown training annotation"),
    ({"kubetwin.io/duration": "1h"}, "kubetwin.io/duration", "both"),
])
def test_validation_errors(extra: dict, key: str, text: str) -> None:
    [err] = _errors(_job({**GOOD, **extra}))
    assert err.field == f'spec.template.metadata.annotations["{key}"]' and text in err.message
    assert err.hint and err.obj.startswith("Job/")


def test_missing_required_and_jobset_paths() -> None:
    [err] = _errors(_job({k: v for k, v in GOOD.items() if not k.endswith("steps")}))
    assert "Required value" in err.message and "steps" in err.hint
    assert _errors(_job(GOOD)) == []
    inner = _job({**{k: v for k, v in GOOD.items() if not k.endswith("params")}, P + "mfu": "2"})
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "annotations": {
        P + "params": "7B"}}, "spec": {"replicatedJobs": [{"name": "w", "replicas": 1,
                                                            "template": {"spec": inner["spec"]}}]}}
    [err] = _errors(js)
    assert err.field == f'spec.replicatedJobs[0].template.spec.template.metadata.annotations["{P}mfu"]'


# -- end to end -------------------------------------------------------------------------------------------
def _pod_times(res) -> dict[str, list[tuple[float, str]]]:
    out: dict[str, list[tuple[float, str]]] = {}
    for t, _, et, o in res.history:
        if o["kind"] == "Pod" and et == "MODIFIED":
            phases = out.setdefault(o["metadata"]["name"], [])
            phase = o["status"].get("phase")
            if not phases or phases[-1][1] != phase:
                phases.append((t, phase))
    return out


def test_training_job_runs_for_the_models_prediction(seen: list) -> None:
    res = run(objects=[make_scenario("1d").obj(),
                       make_pool("h100", "a3-highgpu-8g", 2).gpus("nvidia-h100-80gb", 8).obj(),
                       _job({**GOOD, P + "checkpoint-every": "50"}, parallelism=2)])
    times = _pod_times(res)
    captured = {pod: (work, st) for pod, work, st in seen}
    assert len(times) == 2 and len(captured) == 2
    for name, (work, st) in captured.items():
        start = next(t for t, ph in times[name] if ph == "Running")
        end = next(t for t, ph in times[name] if ph == "Succeeded")
        assert end - start == pytest.approx(work.duration) == pytest.approx(st.work)
        assert st.dp == 16 and st.checkpoints == 4 and st.comm_raw["dp"] > 0  # 2 nodes x 8 H100
        assert work.interval == pytest.approx(st.checkpoint_interval)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list:
    """(pod name, Work, StepTime) for every run the training hook computes, in order."""
    from kubetwin.workloads import training_hook

    out: list = []
    orig = training_hook.TrainingModel.__call__

    def spy(self, pod, node):  # type: ignore[no-untyped-def]
        work = orig(self, pod, node)
        out.append((pod["metadata"]["name"], work, self.breakdowns[self.job_key(pod)]))
        return work
    monkeypatch.setattr(training_hook.TrainingModel, "__call__", spy)
    return out


def test_spot_preemption_resumes_from_the_checkpoint(seen: list) -> None:
    pool = (make_pool("spot", "a3-highgpu-8g", 1)
            .spec(spot=True, spotPreemption={"schedule": [{"at": "1500", "nodes": 1}]})
            .gpus("nvidia-h100-80gb", 8).obj())
    job = _job({**GOOD, P + "steps": "5000", P + "checkpoint-every": "100"})
    res = run(objects=[make_scenario("1d").obj(), pool, job])
    [(_, p1), (_, p2)] = sorted(_pod_times(res).items(), key=lambda kv: kv[1][0][0])
    w1, w2 = [work for _, work, _ in seen]
    start1 = next(t for t, ph in p1 if ph == "Running")
    stopped = next(t for t, ph in p1 if ph == "Failed")
    saved = (stopped - start1) // w1.interval * w1.interval
    assert saved > 0
    start2 = next(t for t, ph in p2 if ph == "Running")
    end2 = next(t for t, ph in p2 if ph == "Succeeded")
    assert end2 - start2 == pytest.approx(w2.restart + w1.duration - saved)
    assert w2.restart > 0
    lost = res.summary["lost_work"]["default/train"]
    assert lost["hours"] == pytest.approx((stopped - start1 - saved) / 3600, abs=1e-2)


def test_resume_on_slower_nodes_keeps_the_checkpointed_steps(seen: list) -> None:
    """The kubelet keeps a job's checkpointed progress between pods; a training pod's seconds of work depend on
    where it lands, so the resumed pod must restart from the same checkpoint (the same steps done), not from the
    same number of seconds of a slower machine's work."""
    spot = (make_pool("spot", "a3-highgpu-8g", 1)
            .spec(spot=True, spotPreemption={"schedule": [{"at": "1500", "nodes": 1}]})
            .gpus("nvidia-h100-80gb", 8).obj())
    slow = make_pool("a2", "a2-highgpu-8g", 1).gpus("nvidia-tesla-a100", 8).obj()
    # FSDP: a 40 GB A100 holds 3B's 48 GB of Adam states only sharded
    job = _job({**GOOD, P + "steps": "5000", P + "checkpoint-every": "100", P + "fsdp": "true"})
    job["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [
            {"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["spot"]}]}}]}}
    res = run(objects=[make_scenario("1d").obj(), spot, slow, job])
    [(_, p1), (_, p2)] = sorted(_pod_times(res).items(), key=lambda kv: kv[1][0][0])
    w1, w2 = [work for _, work, _ in seen]
    assert w2.duration > 1.5 * w1.duration  # A100 after H100
    start1 = next(t for t, ph in p1 if ph == "Running")
    stopped = next(t for t, ph in p1 if ph == "Failed")
    done = (stopped - start1) // w1.interval  # checkpoints written before the preemption
    assert done > 0
    start2 = next(t for t, ph in p2 if ph == "Running")
    end2 = next(t for t, ph in p2 if ph == "Succeeded")
    assert end2 - start2 == pytest.approx(w2.restart + w2.duration - done * w2.interval)
