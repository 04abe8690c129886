"""A model server on a MIG instance, a time-sliced GPU or an MPS client: its KV cache is sized from the memory it
actually has, it runs at the compute it gets, and what does not fit fails at start-up with vLLM's own words, in the
pod's container status (CrashLoopBackOff with the message in lastState) as the kubelet reports a crashing server."""

from __future__ import annotations

import re

from serving_builders import a100_pool, inference_pool, serving_scenario, trace, vllm

from kubetwin.runner import run

SMALL = "Qwen/Qwen3-0.6B"


def _server(model: str, replicas: int = 1, extra: list[str] | None = None) -> dict:
    return vllm("srv", replicas).args(["--model", model, "--max-model-len", "4096", *(extra or [])]).obj()


def _blocks(r) -> dict[str, int]:
    """pod -> num_gpu_blocks from vllm:cache_config_info in the run's metrics."""
    text = (r.metrics_text or b"").decode()
    return {m.group(2): int(m.group(1)) for m in re.finditer(
        r'vllm:cache_config_info\{[^}]*num_gpu_blocks="(\d+)"[^}]*pod="([^"]+)"', text)}


def _last_pods(r) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for _, _, _, o in r.history:
        if o["kind"] == "Pod":
            out[o["metadata"]["name"]] = o
    return out


def _crash_messages(pod: dict) -> list[str]:
    """What the container said when it exited: lastState (crash-looping) or state (failed for good)."""
    out = []
    for cs in pod.get("status", {}).get("containerStatuses") or []:
        for part in ("lastState", "state"):
            term = (cs.get(part) or {}).get("terminated") or {}
            if term.get("message"):
                out.append(term["message"])
    return out


def _waiting_reasons(r, name: str) -> set[str]:
    """Every waiting reason the pod's container showed during the run."""
    out = set()
    for _, _, _, o in r.history:
        if o["kind"] == "Pod" and o["metadata"]["name"] == name:
            for cs in o.get("status", {}).get("containerStatuses") or []:
                out.add(((cs.get("state") or {}).get("waiting") or {}).get("reason", ""))
    return out - {""}


def test_llama_8b_on_a_1g_10gb_slice_fails_at_start_with_cuda_oom() -> None:
    r = run(objects=[serving_scenario("15m").obj(), a100_pool().gpu_partition("1g.10gb").obj(),
                     _server("meta-llama/Meta-Llama-3-8B-Instruct"), inference_pool().obj(),
                     trace().rate(1).start("8m").obj()])
    pods = _last_pods(r)
    assert len(pods) == 1
    pod = next(iter(pods.values()))
    msgs = _crash_messages(pod)
    assert msgs and msgs[0].startswith("torch.OutOfMemoryError: CUDA out of memory."), msgs
    assert "GPU 0 has a total capacity of 9.5" in msgs[0], msgs  # the 1g.10gb instance's 9856 MiB as CUDA sees it
    assert "CrashLoopBackOff" in _waiting_reasons(r, pod["metadata"]["name"])
    assert pod["status"]["containerStatuses"][0]["restartCount"] >= 2
    assert not any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])
    assert not (r.requests().status == 200).any()  # nothing ever serves: requests wait at the pool, then 503


def test_small_model_on_a_3g_40gb_slice_sizes_its_cache_from_40gb_and_runs_at_3_of_7() -> None:
    objs = [inference_pool().obj(), trace().rate(2).duration("4m").start("8m").model(SMALL).obj()]
    mig = run(objects=[serving_scenario("15m").obj(), a100_pool().gpu_partition("3g.40gb").obj(), _server(SMALL),
                       *objs])
    whole = run(objects=[serving_scenario("15m").obj(), a100_pool().obj(), _server(SMALL), *objs])
    b_mig, b_whole = _blocks(mig), _blocks(whole)
    assert len(b_mig) == len(b_whole) == 1
    n_mig, n_whole = next(iter(b_mig.values())), next(iter(b_whole.values()))
    # Qwen3-0.6B's KV: 28 layers x 8 heads x 128 x 2 x 2 bytes = 114688 B/token, 16-token blocks = 1.75 MiB/block;
    # 0.9 x 40192 MiB x (79.15/80) less ~1.2 GB of weights and a few hundred MiB of activations -> ~19 000 blocks
    assert 18000 < n_mig < 20500, n_mig
    assert n_whole > 2 * n_mig
    t_mig, t_whole = mig.requests(), whole.requests()
    assert set(t_mig.status) == set(t_whole.status) == {200}
    # 3 of 7 compute slices and half the memory bandwidth double the GPU's part of a decode step; the 2 ms of CPU
    # work per step does not change, and dominates for so small a model
    assert t_mig.tpot.median() > 1.15 * t_whole.tpot.median()


def test_two_time_sliced_vllm_replicas_on_one_gpu_the_second_fails_with_vllms_free_memory_error() -> None:
    r = run(objects=[serving_scenario("15m").obj(), a100_pool().gpu_sharing("TIME_SHARING", 2).obj(),
                     _server(SMALL, replicas=2),
                     inference_pool().obj(), trace().rate(1).start("8m").model(SMALL).obj()])
    pods = _last_pods(r)
    assert len(pods) == 2
    msgs = {name: _crash_messages(p) for name, p in pods.items()}
    failed = [n for n, m in msgs.items() if m]
    assert len(failed) == 1, msgs
    msg = msgs[failed[0]][0]
    assert re.fullmatch(r"ValueError: Free memory on device cuda:0 \(\d+\.\d\d/79\.15 GiB\) on startup is less "
                        r"than desired GPU memory utilization \(0\.9, 7\d\.\d\d GiB\)\. Decrease GPU memory "
                        r"utilization or reduce GPU memory used by other processes\.", msg), msg
    assert "CrashLoopBackOff" in _waiting_reasons(r, failed[0])
    served = set(r.requests().pod)
    assert served == set(pods) - set(failed)


def test_two_time_sliced_replicas_that_each_ask_for_less_than_half_both_run() -> None:
    r = run(objects=[serving_scenario("15m").obj(), a100_pool().gpu_sharing("TIME_SHARING", 2).obj(),
                     _server(SMALL, replicas=2, extra=["--gpu-memory-utilization", "0.45"]),
                     inference_pool().obj(), trace().rate(1).start("8m").model(SMALL).obj()])
    pods = _last_pods(r)
    assert not any(_crash_messages(p) for p in pods.values())
    assert len(_blocks(r)) == 2


def test_an_mps_client_sizes_its_cache_from_its_pinned_memory_limit() -> None:
    objs = [inference_pool().obj(), trace().rate(1).duration("4m").start("8m").model(SMALL).obj()]
    mps = run(objects=[serving_scenario("15m").obj(), a100_pool().gpu_sharing("MPS", 4).obj(), _server(SMALL), *objs])
    whole = run(objects=[serving_scenario("15m").obj(), a100_pool().obj(), _server(SMALL), *objs])
    n_mps, n_whole = next(iter(_blocks(mps).values())), next(iter(_blocks(whole).values()))
    # GKE sets CUDA_MPS_PINNED_DEVICE_MEM_LIMIT to 80 GB / 4 clients: vLLM sees a 20 GB device
    assert 8000 < n_mps < 10500, n_mps
    assert n_whole > 3.5 * n_mps


def test_get_and_describe_show_the_crash_loop_as_kubectl_does(tmp_path) -> None:
    from conftest import write_yaml
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    path = write_yaml(tmp_path / "s.yaml", [serving_scenario("15m").obj(), a100_pool().gpu_partition("1g.10gb").obj(),
                                            _server("meta-llama/Meta-Llama-3-8B-Instruct")])
    out = tmp_path / "out"
    cli = CliRunner()
    assert cli.invoke(app, ["run", str(path), "--out", str(out)]).exit_code == 0
    got = cli.invoke(app, ["get", "pods", "--run", str(out)]).output
    row = got.splitlines()[1].split()
    assert row[1] == "0/1" and int(row[3]) >= 2 and row[4].startswith("("), got  # RESTARTS "5 (3m40s ago)"
    name = row[0]
    desc = cli.invoke(app, ["describe", "pod", name, "--run", str(out)]).output
    assert re.search(r"    Last State:     Terminated\n      Reason:       Error\n      Message:      "
                     r"torch\.OutOfMemoryError: CUDA out of memory\..*\n      Exit Code:    1\n", desc), desc
    assert re.search(r"    Ready:          False\n    Restart Count:  \d+\n", desc), desc


def test_a_job_whose_server_cannot_start_fails_with_the_message_and_does_not_run_its_duration() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bench", "namespace": "default"},
           "spec": {"backoffLimit": 0, "template": {
               "metadata": {"annotations": {"kubetwin.io/duration": "1s"}},
               "spec": {"restartPolicy": "Never", "containers": [{
                   "name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                   "args": ["--model", "meta-llama/Meta-Llama-3-8B-Instruct"],
                   "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    r = run(objects=[serving_scenario("20m").obj(), a100_pool().gpu_partition("1g.10gb").obj(), job])
    pod = next(iter(_last_pods(r).values()))
    assert pod["status"]["phase"] == "Failed"
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 1 and term["message"].startswith("torch.OutOfMemoryError: CUDA out of memory.")
