"""The serving stack end to end through `kubetwin.run`: pods join pools when Ready, requests are routed, held at a
pool with no endpoint, shed, failed with their HTTP status, and reported (requests.csv, summary, metrics.prom)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from serving_builders import MODEL, h100_pool, inference_model, inference_pool, service, serving_scenario, trace, vllm
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.runner import run
from kubetwin.serving.modelserver.modelspec import lookup_model


def _ready_times(r) -> list[float]:
    """When each model-server pod first became Ready (seconds from the start)."""
    out: dict[str, float] = {}
    for t, _, _, o in r.history:
        if o["kind"] == "Pod" and o["metadata"]["name"] not in out and any(
                c["type"] == "Ready" and c["status"] == "True" for c in o.get("status", {}).get("conditions") or []):
            out[o["metadata"]["name"]] = t
    return sorted(out.values())


def test_requests_go_to_ready_pods_and_every_request_is_reported() -> None:
    r = run(objects=[serving_scenario("20m").obj(), h100_pool(2).obj(), vllm("srv", 2).obj(), inference_pool().obj(),
                     trace().start("8m").obj()])
    df = r.requests()
    s = r.summary["serving"]["overall"]
    assert s["requests"] == len(df) == s["completed"] > 1000
    assert set(df.status) == {200}
    pods = {o["metadata"]["name"] for _, _, _, o in r.history if o["kind"] == "Pod"}
    assert set(df.pod) == pods and len(pods) == 2  # both replicas serve (the picker balances queue and KV)
    assert (df.ttft > 0).all() and (df.e2e >= df.ttft).all() and (df.tpot > 0).all()
    assert s["ttft_seconds"]["p99"] < 0.5  # an unloaded H100 prefills 500 tokens in tens of ms
    assert r.summary["serving"]["pools"]["InferencePool/default/pool"]["router"] == "epp"


def test_cold_start_phases_and_requests_held_until_the_first_replica_is_ready() -> None:
    """The trace starts with the cluster: requests wait at the gateway while the node boots, the image is pulled
    and the weights load; the first is served right after the first pod turns Ready."""
    r = run(objects=[serving_scenario("15m").obj(), h100_pool(1).obj(), vllm("srv", 1).obj(), inference_pool().obj(),
                     trace().rate(1).duration("12m").obj()])
    pulling, pulled = r.recorded_events("Pulling"), r.recorded_events("Pulled")
    assert pulling and pulling[0].message == 'Pulling image "vllm/vllm-openai:v0.10.1"'
    assert pulled[0].message.startswith('Successfully pulled image "vllm/vllm-openai:v0.10.1" in 1m20s')
    ready = _ready_times(r)[0]
    df = r.requests().sort_values("arrival")
    first = df.iloc[0]
    assert first.arrival < 5 and first.status == 200
    assert ready - 1 < first.arrival + first.ttft < ready + 1  # held, then served at once
    assert df[df.arrival > ready + 60].ttft.max() < 0.5  # warm afterwards


def test_a_pool_with_no_endpoint_fails_held_requests_after_the_ttl_and_a_service_fails_at_once() -> None:
    objs = [serving_scenario("10m").obj(), inference_pool().request_ttl("2m").obj(), service().obj(),
            trace("a").rate(1).duration("5m").obj(), trace("b").target("Service", "svc").rate(1).duration("5m").obj()]
    df = run(objects=objs).requests()
    pool = df[df.pool == "InferencePool/default/pool"]
    svc = df[df.pool == "Service/default/svc"]
    assert len(pool) > 200 and set(pool.status) == {503} and set(pool.reason) == {"request timed out in queue"}
    assert set(svc.status) == {503} and set(svc.reason) == {"no healthy upstream"}
    # no Ready endpoint: the Service answers at once; the InferencePool held each request for its TTL
    assert svc.queue.isna().all() and svc.e2e.isna().all()


def test_sheddable_requests_are_dropped_with_429_when_the_pool_is_saturated() -> None:
    """InferenceModel criticality Sheddable is priority -1 (reference 1.11): when the saturation detector reads
    >= 1 (queue >= 5 or KV >= 0.8 on average), the EPP answers 429; Standard requests are never shed."""
    objs = [serving_scenario("20m").obj(), h100_pool(1).obj(),
            vllm("srv", 1).args(["--model", MODEL, "--max-num-seqs", "4"]).obj(),
            inference_pool().obj(), inference_model("batch").model("batch-model").criticality("Sheddable").obj(),
            trace("standard").rate(4).duration("5m").start("8m").prompt(2000).output(400).obj(),
            trace("sheddable").rate(4).duration("5m").start("8m").model("batch-model").prompt(2000).output(400).obj()]
    df = run(objects=objs).requests()
    shed = df[df.trace == "default/sheddable"]
    std = df[df.trace == "default/standard"]
    assert (shed.status == 429).sum() > 50 and (shed.priority == -1).all()
    assert set(shed[shed.status == 429].reason) == {"system saturated, sheddable request dropped"}
    assert (std.status == 429).sum() == 0 and (std.status == 200).sum() > 100  # the rest still queued at the end


def test_round_robin_and_epp_differ_on_shared_prefixes() -> None:
    shared = {"numGroups": 8, "promptsPerGroup": 50, "systemPromptLen": 3000, "questionLen": 100, "outputLen": 50}
    hit = {}
    for router in ("round-robin", "epp"):
        r = run(objects=[serving_scenario("20m").obj(), h100_pool(4).obj(), vllm("srv", 4).args([
                             "--model", MODEL, "--gpu-memory-utilization", "0.3", "--max-model-len", "8192"]).obj(),
                         inference_pool().router(router).obj(),
                         trace().rate(20).duration("4m").start("8m").shared_prefix(shared).obj()])
        hit[router] = r.summary["serving"]["overall"]["prefix_cache_hit_rate"]
    assert hit["epp"] > hit["round-robin"]


def test_same_seed_byte_identical_requests_csv(tmp_path: Path) -> None:
    objs = [serving_scenario("15m").obj(), h100_pool(2).obj(), vllm("srv", 2).obj(), inference_pool().obj(),
            trace().rate(8).start("8m").obj()]
    digests = set()
    for i in range(2):
        run(objects=objs, out=tmp_path / str(i))
        digests.add(hashlib.sha256((tmp_path / str(i) / "requests.csv").read_bytes()
                                   + (tmp_path / str(i) / "summary.json").read_bytes()).hexdigest())
    assert len(digests) == 1
    prom = (tmp_path / "0" / "metrics.prom").read_text()
    assert "# TYPE vllm:num_requests_waiting gauge" in prom and 'vllm:request_success_total{model_name="' in prom


def test_requests_csv_streamed_to_the_folder_reads_as_the_text_of_a_run_without_one(tmp_path: Path) -> None:
    """A run with a folder writes requests.csv a chunk of rows at a time and RunResult.requests_csv reads that file
    back; a run without a folder joins the same chunks: the same text, and the file holds exactly its bytes."""
    objs = [serving_scenario("15m").obj(), h100_pool(2).obj(), vllm("srv", 2).obj(), inference_pool().obj(),
            trace().rate(8).start("8m").obj()]
    held = run(objects=objs)
    written = run(objects=objs, out=tmp_path / "r")
    text = held.requests_csv
    assert text is not None and text.count("\n") == held.summary["serving"]["requests_csv_rows"] + 1 > 100
    assert written.requests_csv == text
    assert (tmp_path / "r" / "requests.csv").read_bytes() == text.encode()
    assert len(written.requests()) == len(held.requests())


def test_weights_on_hyperdisk_ml_load_faster_than_from_the_hub() -> None:
    """Cold start reads the weights from where the pod reads them: a Hyperdisk ML volume at 2,400 MiB/s beats the
    Hub download (500 MB/s, twin assumption) by the difference in load time of 16 GB of Llama-3.1-8B. A local
    path's architecture comes from its folder name (the twin cannot read its config.json)."""
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "hdml"},
          "provisioner": "pd.csi.storage.gke.io",
          "parameters": {"type": "hyperdisk-ml", "provisioned-throughput-on-create": "2400Mi"}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "weights", "namespace": "default"},
           "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "hdml",
                    "resources": {"requests": {"storage": "100Gi"}}}}
    local = (vllm("srv", 1).args(["--model", "/models/llama-3.1-8b"])
             .volumes([{"name": "w", "persistentVolumeClaim": {"claimName": "weights", "readOnly": True}}])
             .mounts([{"name": "w", "mountPath": "/models", "readOnly": True}]).obj())
    hub = _ready_times(run(objects=[serving_scenario("10m").obj(), h100_pool(1).obj(), vllm("srv", 1).obj()]))[0]
    fast = _ready_times(run(objects=[serving_scenario("10m").obj(), h100_pool(1).obj(), sc, pvc, local]))[0]
    weights = lookup_model(MODEL).weight_bytes  # Llama-3.1-8B in bf16, ~16 GB
    assert hub - fast == pytest.approx(weights / 500e6 - weights / (2400 * 2**20), abs=1.0)


def test_a_bad_vllm_flag_is_an_error_in_argparse_words_and_no_run_starts(tmp_path: Path) -> None:
    import yaml

    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump_all([serving_scenario().obj(),
                                     vllm("srv", 1).args(["--model", MODEL, "--max-num-seqs", "many"]).obj()]))
    res = CliRunner().invoke(app, ["run", str(f), "--out", str(tmp_path / "out")])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "vllm serve: error: argument --max-num-seqs: invalid int value: 'many'" in res.output
    assert "spec.template.spec.containers[0].args[3]" in res.output
    assert not (tmp_path / "out").exists()


def test_scale_down_deletes_a_starting_replica_before_a_ready_one() -> None:
    """ActivePods order (kube-controller-manager controller_utils.go): unscheduled, then Pending, then Running but
    not Ready (a replica still loading its model) go before a Ready one, even an older one; among Ready pods the
    one Ready for less time goes first."""
    from kubetwin.controllers.common import active_pods_rank

    def pod(name: str, node: str | None, phase: str, ready_at: str | None, created: str) -> dict:
        conds = [{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}] if ready_at else []
        return {"metadata": {"name": name, "creationTimestamp": created}, "spec": {"nodeName": node} if node else {},
                "status": {"phase": phase, "conditions": conds}}

    pods = [pod("ready-old", "n1", "Running", "2026-01-01T00:05:00Z", "2026-01-01T00:00:00Z"),
            pod("ready-new", "n2", "Running", "2026-01-01T00:09:00Z", "2026-01-01T00:01:00Z"),
            pod("loading", "n3", "Running", None, "2026-01-01T00:00:30Z"),
            pod("pulling", "n4", "Pending", None, "2026-01-01T00:00:10Z"),
            pod("unscheduled", None, "Pending", None, "2026-01-01T00:00:05Z")]
    order = [p["metadata"]["name"] for p in sorted(pods, key=active_pods_rank)]
    assert order == ["unscheduled", "pulling", "loading", "ready-new", "ready-old"]


def test_ready_replicas_count_only_ready_pods() -> None:
    r = run(objects=[serving_scenario("12m").obj(), h100_pool(1).obj(), vllm("srv", 1).obj()])
    statuses = [o["status"] for _, _, _, o in r.history if o["kind"] == "ReplicaSet" and o.get("status")]
    assert {"replicas": 1, "readyReplicas": 0, "availableReplicas": 0, "observedGeneration": 1} in statuses
    assert statuses[-1]["readyReplicas"] == 1  # once the model is loaded


def test_vllm_histograms_and_info_series_in_metrics_prom(tmp_path: Path) -> None:
    """metrics.prom carries vLLM's TTFT / TPOT / E2E histograms per pod (vLLM's buckets), consistent with
    requests.csv, and the info gauges the EPP's autoTune and LoRA affinity read."""
    from kubetwin.serving.observe.histograms import TTFT_BUCKETS

    args = ["--model", MODEL, "--enable-lora", "--max-loras", "2"]
    r = run(objects=[serving_scenario("15m").obj(), h100_pool(1).obj(), vllm("srv", 1).args(args).obj(),
                     inference_pool().obj(),
                     trace().rate(4).start("8m").obj()], out=tmp_path)
    prom = (tmp_path / "metrics.prom").read_text().splitlines()
    df = r.requests()
    pod = df.pod.iloc[0]
    ttft = [ln for ln in prom if ln.startswith("vllm:time_to_first_token_seconds_bucket")]
    assert len(ttft) == len(TTFT_BUCKETS) + 1 and f'pod="{pod}"' in ttft[0]
    inf = float(next(ln for ln in ttft if 'le="+Inf"' in ln).rsplit(" ", 1)[1])
    count = float(next(ln for ln in prom if ln.startswith("vllm:time_to_first_token_seconds_count")).rsplit(" ")[1])
    assert inf == count == (df.status == 200).sum()
    le_100ms = float(next(ln for ln in ttft if 'le="0.1"' in ln).rsplit(" ", 1)[1])
    assert le_100ms == (df.ttft <= 0.1).sum()
    tpot_count = next(ln for ln in prom if ln.startswith("vllm:time_per_output_token_seconds_count"))
    assert float(tpot_count.rsplit(" ", 1)[1]) == (df[df.status == 200].output_tokens - 1).sum()
    assert any(ln.startswith("vllm:cache_config_info{block_size=\"16\"") for ln in prom)
    assert any(ln.startswith("vllm:lora_requests_info{max_lora=\"2\"") for ln in prom)


def test_inference_model_target_models_split_traffic_onto_lora_adapters() -> None:
    """InferenceModel.targetModels (v1alpha2, as in the seed): the gateway rewrites each request to a target by
    weight; a target the server does not serve is vLLM's 404."""
    im = inference_model("food").model("food-review").obj()
    im["spec"]["targetModels"] = [{"name": "food-review-1", "weight": 3}, {"name": "food-review-2", "weight": 1}]
    lora = ["--model", MODEL, "--enable-lora", "--max-loras", "2",
            "--lora-modules", "food-review-1=/adapters/1", "food-review-2=/adapters/2"]
    objs = [serving_scenario("15m").obj(), h100_pool(1).obj(), inference_pool().obj(), im,
            trace().rate(4).start("8m").model("food-review").obj()]
    with_lora = run(objects=[*objs, vllm("srv", 1).args(lora).obj()])
    df = with_lora.requests()
    assert (df.status == 200).all() and len(df) > 1000
    share = (df.model == "food-review-1").mean()
    assert set(df.model) == {"food-review-1", "food-review-2"} and 0.72 < share < 0.78  # weights 3 : 1
    without = run(objects=[*objs, vllm("srv", 1).obj()]).requests()
    assert set(without.status) == {404}
    assert set(without.reason) == {f"The model `food-review-{i}` does not exist." for i in (1, 2)}


def test_kubectl_get_for_the_serving_kinds(tmp_path: Path) -> None:
    """`kubetwin get hpa | scaledobjects | inferencepools` print kubectl's columns (KEDA's CRD printer columns; the
    HPA's TARGETS as current/target (avg))."""
    example = Path(__file__).resolve().parents[1] / "examples" / "serving-scale-to-zero.yaml"
    res = CliRunner().invoke(app, ["run", str(example), "--duration", "2h", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    get = CliRunner().invoke(app, ["get", "scaledobjects", "-A", "--run", str(tmp_path / "r"), "--at", "1h"])
    assert get.output.splitlines()[0].split()[:8] == ["NAMESPACE", "NAME", "SCALETARGETKIND", "SCALETARGETNAME",
                                                      "MIN", "MAX", "READY", "ACTIVE"]
    assert "apps/v1.Deployment" in get.output and "prometheus" in get.output
    hpa = CliRunner().invoke(app, ["get", "hpa", "-A", "--run", str(tmp_path / "r"), "--at", "1h"]).output
    row = hpa.splitlines()[1].split()
    assert row[1].startswith("keda-hpa-") and row[2].startswith("Deployment/") and row[3].endswith("/64")
    assert "(avg)" in hpa


@pytest.mark.parametrize("targeted", [True, False])
def test_a_headless_service_is_a_pool_only_when_a_trace_sends_to_it(targeted: bool) -> None:
    """A headless Service (clusterIP None: a JobSet's, a LeaderWorkerSet's) has no virtual IP: the data plane does not
    count it among the run's pools unless a RequestTrace names it, whose clients then reach its pods as DNS gives
    them (served like a Service). Either way the InferencePool's requests are the same."""
    headless = service("hl").obj()
    headless["spec"]["clusterIP"] = "None"
    traces = [trace("a").rate(1).duration("5m").start("8m").obj()]
    if targeted:
        traces.append(trace("b").target("Service", "hl").rate(1).duration("5m").start("8m").obj())
    objs = [serving_scenario("20m").obj(), h100_pool(1).obj(), vllm("srv", 1).obj(), inference_pool().obj(),
            headless, *traces]
    r = run(objects=objs)
    pools = set(r.requests().pool)
    if targeted:
        assert pools == {"InferencePool/default/pool", "Service/default/hl"}
        hl = r.requests()[r.requests().pool == "Service/default/hl"]
        assert len(hl) > 200 and set(hl.status) == {200}
    else:
        assert pools == {"InferencePool/default/pool"}
        assert list(r.summary["serving"]["pools"]) == ["InferencePool/default/pool"]
