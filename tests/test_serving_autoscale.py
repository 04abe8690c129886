"""Serving autoscaling end to end through `kubetwin.run`, on the real controllers (KEDA, HPA, ReplicaSet, scheduler,
cluster autoscaler, kubelet cold start, gateway, vLLM engines) and short scenarios:
(a) a pool at zero gets a request: KEDA activates at its next poll, 0->1, the cluster autoscaler adds a node, the
    kubelet pulls the image, vLLM loads the weights and warms up, the pod turns Ready and the held request is served
    with a TTFT that is the sum of those phases;
(b) once traffic stops the last replica goes only after cooldownPeriod (and its node 10 min later);
(c) requests held longer than kubetwin.io/request-ttl fail with 503 while the pool cold-starts;
(d) a plain HPA scales 1->N on vllm:num_requests_waiting under overload."""

from __future__ import annotations

from datetime import datetime

import pytest
from autoscaling_builders import horizontal_pod_autoscaler, scaled_object
from serving_builders import MODEL, h100_pool, inference_pool, serving_scenario, trace, vllm

from kubetwin.runner import RunResult, run
from kubetwin.serving.modelserver.coldstart import ENGINE_INIT_S, IMAGE_PULL_MBPS, PROCESS_START_S
from kubetwin.serving.modelserver.modelspec import lookup_model
from kubetwin.serving.modelserver.recognize import IMAGE_SIZES_GB
from kubetwin.workloads.storage import HF_HUB

BOOT_S, DRIVER_S = 90.0, 180.0  # the pool's bootDelay and driverInstallDelay below
SCRAPE_S, POLL_S, CA_SCAN_S = 15.0, 15.0, 10.0  # Prometheus scrape, the ScaledObject's pollingInterval, CA scan
COOLDOWN_S = 300.0
PULL_S = IMAGE_SIZES_GB["vllm/vllm-openai"] * 1e9 / (IMAGE_PULL_MBPS * 1e6)  # 12 GB at 150 MB/s: 80 s
START_S = PROCESS_START_S + HF_HUB.seconds(lookup_model(MODEL).weight_bytes) + ENGINE_INIT_S  # 15 + 32 + 45 s
DEMAND = ('sum(inference_extension_flow_control_queue_size{inference_pool="pool"}) + '
          '(sum(vllm:num_requests_waiting{namespace="default"}) + sum(vllm:num_requests_running{namespace="default"})'
          ' or vector(0))')


def autoscaling_pool(max_nodes: int) -> dict:
    """An H100 pool that starts with no node (NodePool.spec.autoscaling, minNodeCount 0)."""
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "h100"},
            "spec": {"machineType": "a3-highgpu-1g", "zones": ["us-central1-a"],
                     "autoscaling": {"minNodeCount": 0, "maxNodeCount": max_nodes},
                     "accelerators": [{"type": "nvidia-h100-80gb", "count": 1}],
                     "bootDelay": f"{BOOT_S:.0f}s", "driverInstallDelay": f"{DRIVER_S:.0f}s"}}


def demand_scaler(max_replicas: int = 2) -> dict:
    """KEDA scales "srv" from zero on DEMAND (64 per replica), activating on any demand."""
    return (scaled_object("srv", "srv").replicas(0, max_replicas)
            .spec(pollingInterval=int(POLL_S), cooldownPeriod=int(COOLDOWN_S))
            .prometheus(DEMAND, threshold=64, activation=0, name="demand").obj())


def _seconds(ts: str) -> float:
    """A store timestamp as seconds from the scenario start (Scenario.spec.startTime's default)."""
    start = datetime.fromisoformat("2026-01-01T00:00:00+00:00")
    return (datetime.fromisoformat(ts.replace("Z", "+00:00")) - start).total_seconds()


def _occurrences(r: RunResult, reason: str) -> list[tuple[float, dict]]:
    """Each time an Event reason was recorded: repeats of one message raise the Event's count instead of adding
    an Event, so every increase is an occurrence."""
    seen: dict[str, int] = {}
    out = []
    for t, _, etype, o in r.history:
        if o["kind"] == "Event" and etype != "DELETED" and o.get("reason") == reason:
            n = int(o.get("count") or 1)
            out.extend((t, o) for _ in range(n - seen.get(o["metadata"]["name"], 0)))
            seen[o["metadata"]["name"]] = max(n, seen.get(o["metadata"]["name"], 0))
    return out


def _replicas(r: RunResult, name: str = "srv") -> list[tuple[float, int]]:
    """(time, spec.replicas) at every change of the Deployment's replica count."""
    out: list[tuple[float, int]] = []
    for t, _, _, o in r.history:
        if o["kind"] == "Deployment" and o["metadata"]["name"] == name:
            n = int(o["spec"].get("replicas", 1))
            if not out or out[-1][1] != n:
                out.append((t, n))
    return out


def _pod_timeline(r: RunResult) -> dict[str, dict[str, float]]:
    """Per model-server pod: created, bound (spec.nodeName set), pulling, pulled, ready (Ready=True), deleted."""
    pods: dict[str, dict[str, float]] = {}
    for t, _, etype, o in r.history:
        if o["kind"] == "Pod":
            p = pods.setdefault(o["metadata"]["name"], {"created": t})
            if o["spec"].get("nodeName"):
                p.setdefault("bound", t)
            conds = (o.get("status") or {}).get("conditions") or []
            if etype != "DELETED" and any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                p.setdefault("ready", t)
            if etype == "DELETED":
                p["deleted"] = t
        elif o["kind"] == "Event" and etype == "ADDED" and o["reason"] in ("Pulling", "Pulled"):
            pods.get(o["involvedObject"]["name"], {}).setdefault(o["reason"].lower(), t)
    return pods


def _nodes(r: RunResult) -> dict[str, dict[str, float]]:
    nodes: dict[str, dict[str, float]] = {}
    for t, _, etype, o in r.history:
        if o["kind"] == "Node":
            n = nodes.setdefault(o["metadata"]["name"], {"added": t})
            if etype == "DELETED":
                n["deleted"] = t
    return nodes


@pytest.fixture(scope="module")
def from_zero() -> RunResult:
    """A pool at zero (no pod, no node); 30 requests arrive over a minute from 2m; nothing after that."""
    return run(objects=[serving_scenario("35m").obj(), autoscaling_pool(2), vllm("srv", 0).obj(),
                        inference_pool().obj(), demand_scaler(),
                        trace().rate(0.5).duration("1m").start("2m").prompt(500).output(50).obj()])


def test_a_request_at_zero_wakes_the_pool_and_its_ttft_is_the_cold_start(from_zero: RunResult) -> None:
    r = from_zero
    df = r.requests().sort_values("arrival")
    assert len(df) > 10 and set(df.status) == {200}
    first = df.iloc[0]
    t0 = float(first.arrival)  # the trace starts at 2m
    # KEDA: the gateway's held-queue gauge is scraped within 15 s, KEDA reads it at its next 15 s poll: 0 -> 1
    (t_act, act), = _occurrences(r, "KEDAScaleTargetActivated")
    assert act["message"] == "Scaled apps/v1.Deployment default/srv from 0 to 1, triggered by demand"
    assert t0 < t_act <= t0 + SCRAPE_S + POLL_S
    assert _replicas(r)[:2] == [(0.0, 0), (t_act, 1)]
    # the cluster autoscaler: the pod is Unschedulable (no node), CA's next scan resizes the pool 0 -> 1
    pods = _pod_timeline(r)
    (name, pod), = pods.items()
    assert pod["created"] == t_act
    (t_up, up), = _occurrences(r, "TriggeredScaleUp")
    assert up["involvedObject"]["name"] == name and "0->1 (max: 2)" in up["message"]
    assert t_act <= t_up <= t_act + CA_SCAN_S
    (node,) = _nodes(r).values()
    assert node["added"] == pytest.approx(t_up + BOOT_S, abs=1)  # the VM boots and the kubelet registers
    # bound once the GPU driver advertises nvidia.com/gpu (the scheduler retries within its 10 s backoff)
    assert node["added"] + DRIVER_S <= pod["bound"] <= node["added"] + DRIVER_S + 10
    # image pull then vLLM start-up (process, weights from the Hub, engine warm-up), each as long as its model
    assert pod["pulling"] == pod["bound"] and pod["pulled"] - pod["pulling"] == pytest.approx(PULL_S, abs=0.5)
    assert pod["ready"] - pod["pulled"] == pytest.approx(START_S, abs=1)
    # the held request is served as soon as the pod is Ready: its TTFT is the whole chain
    phases = (t_act - t0) + (pod["bound"] - t_act) + PULL_S + START_S
    assert first.pod == name and first.ttft == pytest.approx(phases, abs=1.5)
    lower = BOOT_S + DRIVER_S + PULL_S + START_S
    assert lower < first.ttft < lower + SCRAPE_S + POLL_S + CA_SCAN_S + 10 + 2
    # every request of the burst arrived before the pod was Ready: all held, all served in the second after Ready
    assert ((df.arrival + df.ttft) >= pod["ready"]).all() and ((df.arrival + df.ttft) < pod["ready"] + 2).all()


def test_the_last_replica_goes_only_after_the_cooldown(from_zero: RunResult) -> None:
    r = from_zero
    (t_deact, ev), = _occurrences(r, "KEDAScaleTargetDeactivated")
    assert ev["message"] == "Deactivated apps/v1.Deployment default/srv from 1 to 0"
    # the last time KEDA saw demand (status.lastActiveTime, whole seconds): its last poll that read the held queue
    # (or a scrape with the requests running, served within a second of Ready)
    last_active = max(_seconds(o["status"]["lastActiveTime"]) for t, _, _, o in r.history
                      if o["kind"] == "ScaledObject" and (o.get("status") or {}).get("lastActiveTime") and t < t_deact)
    pod = next(iter(_pod_timeline(r).values()))
    assert pod["ready"] - SCRAPE_S - POLL_S <= last_active <= pod["ready"] + SCRAPE_S + POLL_S
    assert last_active + COOLDOWN_S < t_deact <= last_active + COOLDOWN_S + POLL_S + 1
    # in between the HPA (minReplicas 1) keeps the one replica although the demand reads 0
    assert [n for t, n in _replicas(r) if t > 0] == [1, 0]
    assert pod["deleted"] == t_deact
    so = [o for _, _, _, o in r.history if o["kind"] == "ScaledObject"][-1]
    assert {c["type"]: c["status"] for c in so["status"]["conditions"]}["Active"] == "False"
    # the node is unneeded from then on and goes after scale-down-unneeded-time (10 min)
    (node,) = _nodes(r).values()
    assert node["deleted"] == pytest.approx(t_deact + 600, abs=CA_SCAN_S + 1)


def test_requests_held_past_the_ttl_fail_with_503_while_the_pool_cold_starts() -> None:
    ttl = 120.0
    r = run(objects=[serving_scenario("20m").obj(), autoscaling_pool(1), vllm("srv", 0).obj(),
                     inference_pool().request_ttl("2m").obj(),
                     demand_scaler(1), trace().rate(0.5).duration("12m").start("1m").prompt(500).output(50).obj()])
    df = r.requests().sort_values("arrival")
    ready = next(iter(_pod_timeline(r).values()))["ready"]
    early, late = df[df.arrival < ready - ttl - 1], df[df.arrival > ready - ttl + 1]
    assert len(early) > 100 and set(early.status) == {503}
    assert early.pod.isna().all() and early.ttft.isna().all()  # failed at the gateway, never routed
    assert set(late.status) == {200}
    held = late[late.arrival < ready]
    assert len(held) > 20 and (held.ttft <= ttl + 1).all()  # held less than the TTL: served once Ready
    assert r.summary["serving"]["overall"]["failed_503"] == (df.status == 503).sum()


@pytest.mark.slow
def test_hpa_scales_out_on_vllm_num_requests_waiting() -> None:
    """A plain autoscaling/v2 HPA with a Pods metric: the average of vllm:num_requests_waiting over the pods, as a
    Prometheus adapter serves it. One H100 cannot keep up with Llama-3.1-8B at 40 requests/s in this shape."""
    waiting = {"metric": {"name": "vllm:num_requests_waiting"}, "target": {"type": "AverageValue", "averageValue": "5"}}
    hpa = horizontal_pod_autoscaler("srv", "srv").replicas(1, 3).metrics([{"type": "Pods", "pods": waiting}]).obj()
    r = run(objects=[serving_scenario("25m").obj(), h100_pool(3).obj(), vllm("srv", 1).obj(), inference_pool().obj(),
                     hpa, trace().rate(40).duration("12m").start("8m").prompt(1000).output(200).obj()])
    # one step 1 -> 3: the default scale-up policy allows max(4 pods, 100 %) per 15 s, capped by maxReplicas.
    # (Read from the objects, not from the SuccessfulRescale Event: the HPA's FailedGetPodsMetric warnings while
    # the first pod starts use up client-go's per-object event budget, so that Event is dropped, as in a cluster.)
    steps = _replicas(r)
    assert [n for _, n in steps][:2] == [1, 3]
    t_up = steps[1][0]
    assert 8 * 60 < t_up <= 8 * 60 + SCRAPE_S + 15  # the queue builds at once; the next scrape, then a sync
    hpa_at = next(o for t, _, _, o in r.history if o["kind"] == "HorizontalPodAutoscaler" and t == t_up
                  and (o.get("status") or {}).get("desiredReplicas") == 3)
    conds = {c["type"]: c for c in hpa_at["status"]["conditions"]}
    assert conds["AbleToScale"]["reason"] == "SucceededRescale"
    assert conds["ScalingLimited"]["reason"] == "TooManyReplicas"  # it wanted more than maxReplicas
    waiting = hpa_at["status"]["currentMetrics"][0]["pods"]
    assert waiting["metric"]["name"] == "vllm:num_requests_waiting" and float(waiting["current"]["averageValue"]) > 5
    df = r.requests()
    # the new replicas turn Ready (nodes were up: image pull + start-up only) and serve; three replicas drain the
    # backlog, the HPA scales in after its 5 min stabilization window, and the rest of the trace builds a queue on
    # one replica again: 1 -> 3 -> 1 -> 3, five pods in all
    assert [n for _, n in steps] == [1, 3, 1, 3]
    assert df.pod.nunique() == 5
