"""KEDA + HPA on the real store, clock and ReplicaSet controller (vectors KE1–KE9 from
shared/conformance/keda/keda_hpa_vectors.md), the HPA alone, the PromQL subset, and ScaledObject validation."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from autoscaling_builders import horizontal_pod_autoscaler, scaled_object

from kubetwin.api import crd
from kubetwin.autoscaler.hpa import HorizontalPodAutoscalerController, format_milli
from kubetwin.autoscaler.keda import KedaController, scaled_object_errors
from kubetwin.controllers.replicaset import ReplicaSetController
from kubetwin.k8s.generatename import NameGenerator
from kubetwin.prometheus.promql import Evaluator, PromQLError
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store

KEDA_SELECTOR = ("&LabelSelector{MatchLabels:map[string]string{scaledobject.keda.sh/name: so,},"
                 "MatchExpressions:[]LabelSelectorRequirement{},}")


# -- builders -----------------------------------------------------------------------------------------
class FakeProvider:
    """Series sampled every `step` seconds from functions of time; `per_pod` series follow the store's Running pods
    (labels pod, namespace), as the data plane's per-pod vLLM metrics would."""

    def __init__(self, store: Store | None = None, step: float = 5.0) -> None:
        self.store, self.step = store, step
        self.fixed: dict[str, list[tuple[dict, Callable[[float], float | None]]]] = {}
        self.per_pod: dict[str, Callable[[float, str], float]] = {}

    def add(self, name: str, fn: Callable[[float], float | None], **labels: str) -> FakeProvider:
        self.fixed.setdefault(name, []).append((labels, fn))
        return self

    def series(self, name: str, start: float, end: float) -> list:
        times = [k * self.step for k in range(max(0, math.ceil(start / self.step)), int(end // self.step) + 1)]
        out = []
        for labels, fn in self.fixed.get(name, []):
            samples = [(t, v) for t in times if (v := fn(t)) is not None]
            out.append((dict(labels), samples))
        if name in self.per_pod and self.store is not None:
            for p in self.store.list("Pod"):
                if p["status"].get("phase") == "Running":
                    pod = p["metadata"]["name"]
                    out.append(({"pod": pod, "namespace": p["metadata"]["namespace"]},
                                [(t, self.per_pod[name](t, pod)) for t in times]))
        return out


def step_fn(*points: tuple[float, float]) -> Callable[[float], float]:
    """A piecewise-constant value: points (from time, value), sorted."""
    return lambda t: [v for since, v in points if since <= t][-1]


@dataclass
class World:
    env: Environment
    store: Store
    events: EventRecorder
    metrics: FakeProvider
    hpa: HorizontalPodAutoscalerController
    keda: KedaController | None
    samples: dict[float, int] = field(default_factory=dict)

    def run(self, until: float) -> None:
        self.env.run(until)

    def replicas(self, name: str = "model") -> int:
        return self.store.get("Deployment", "default", name)["spec"]["replicas"]

    def watch_replicas(self, until: float, every: float = 5.0, name: str = "model") -> dict[float, int]:
        """Run to `until`, recording the Deployment's spec.replicas at each `every` seconds (after that instant)."""
        t = self.env.now
        while t <= until:
            self.env.run(t)
            self.samples[t] = self.replicas(name)
            t += every
        return self.samples

    def events_of(self, reason: str) -> list[str]:
        return [e["message"] for e in self.store.list("Event") if e["reason"] == reason]

    def conditions(self, kind: str, name: str) -> dict[str, dict]:
        obj = self.store.get(kind, "default", name)
        return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def world(boot: float = 0.0, keda: bool = True) -> World:
    """Store + clock + ReplicaSet controller + a kubelet stand-in that runs pods `boot` seconds after creation."""
    env = Environment()
    store = Store(env)
    events = EventRecorder(store)
    ReplicaSetController(store, env, events, NameGenerator(1))

    def on_pod(etype: str, pod: dict, old: dict | None) -> None:
        if etype == "ADDED":
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            env.after(boot, lambda: store.patch("Pod", ns, name,
                                                lambda p: {**p, "status": {**p["status"], "phase": "Running"}}))
    store.watch("Pod", on_pod)
    metrics = FakeProvider(store)
    hpa = HorizontalPodAutoscalerController(store, env, events, metrics)
    k = KedaController(store, env, events, metrics) if keda else None
    return World(env, store, events, metrics, hpa, k)


def deployment(name: str = "model", replicas: int = 1) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai"}]}}}}


QUEUE = "sum(vllm:num_requests_waiting{model=\"m\"})"


def keda_world(so: dict, start_replicas: int, queue: Callable[[float], float | None], boot: float = 0.0) -> World:
    w = world(boot)
    w.metrics.add("vllm:num_requests_waiting", queue, model="m", pod="gw")
    w.store.create(deployment(replicas=start_replicas))
    w.store.create(so)
    return w


# -- KE1–KE9 -----------------------------------------------------------------------------------------
def test_ke1_average_value_divides_the_sum_by_the_threshold() -> None:
    """KE1: AverageValue (default), threshold 5, 1 replica, sum(queue)=20 → desired ceil(20/5) = 4."""
    w = keda_world(scaled_object().replicas(0, 10).prometheus(QUEUE, threshold=5).obj(), 1, step_fn((0, 20)))
    w.run(0)
    hpa = w.store.get("HorizontalPodAutoscaler", "default", "keda-hpa-so")
    assert hpa["spec"]["minReplicas"] == 1 and hpa["spec"]["maxReplicas"] == 10
    assert hpa["spec"]["metrics"] == [{"type": "External", "external": {
        "metric": {"name": "s0-prometheus", "selector": {"matchLabels": {"scaledobject.keda.sh/name": "so"}}},
        "target": {"type": "AverageValue", "averageValue": "5"}}}]
    assert hpa["metadata"]["ownerReferences"][0]["kind"] == "ScaledObject"
    assert w.replicas() == 4
    assert w.store.get("HorizontalPodAutoscaler", "default", "keda-hpa-so")["status"]["desiredReplicas"] == 4
    assert w.events_of("SuccessfulRescale") == [f"New size: 4; reason: external metric s0-prometheus({KEDA_SELECTOR})"
                                                " above target"]
    so = w.store.get("ScaledObject", "default", "so")
    assert so["status"]["hpaName"] == "keda-hpa-so" and so["status"]["externalMetricNames"] == ["s0-prometheus"]
    assert so["status"]["originalReplicaCount"] == 1 and so["status"]["scaleTargetKind"] == "apps/v1.Deployment"
    assert w.conditions("ScaledObject", "so")["Ready"]["reason"] == "ScaledObjectReady"
    assert w.conditions("ScaledObject", "so")["Active"]["reason"] == "ScalerActive"


def test_ke2_value_metric_multiplies_the_ratio_by_ready_pods_and_clamps_to_max() -> None:
    """KE2: metricType Value, threshold 5, 3 ready replicas, metric 20 → ceil(20/5 × 3) = 12 → clamped to max 10."""
    so = (scaled_object().replicas(1, 10).prometheus(QUEUE, threshold=5, metric_type="Value")
          .behavior({"scaleUp": {"policies": [{"type": "Pods", "value": 100, "periodSeconds": 15}]}}).obj())
    w = keda_world(so, 3, step_fn((0, 20)))
    w.run(0)  # the first sync meets pods that are not Running yet: Value counts ready pods only
    w.run(15)
    hpa = w.store.get("HorizontalPodAutoscaler", "default", "keda-hpa-so")
    assert hpa["spec"]["metrics"][0]["external"]["target"] == {"type": "Value", "value": "5"}
    assert w.replicas() == 10
    assert w.conditions("HorizontalPodAutoscaler", "keda-hpa-so")["ScalingLimited"] | {"lastTransitionTime": 0} == {
        "type": "ScalingLimited", "status": "True", "reason": "TooManyReplicas", "lastTransitionTime": 0,
        "message": "the desired replica count is more than the maximum replica count"}
    assert hpa["status"]["currentMetrics"][0]["external"]["current"] == {"value": "20"}


def test_ke3_activation_wins_over_the_hpa() -> None:
    """KE3: threshold 10, activationThreshold 50, min 0; metric 60 then 40: the HPA wants 4 but 40 is not active,
    so KEDA scales to 0 once the last active poll is cooldownPeriod old."""
    so = scaled_object().replicas(0, 10).prometheus(QUEUE, threshold=10, activation=50).obj()
    w = keda_world(so, 2, step_fn((0, 60), (100, 40)))
    seen = w.watch_replicas(600, every=15)
    assert seen[90] >= 4  # active: the HPA is scaling on 60/10
    assert all(seen[t] > 0 for t in seen if t < 420)  # last active poll at 90 s: 90 + 300 < now first at 420
    assert w.conditions("ScaledObject", "so")["Active"]["reason"] == "ScalerNotActive"
    assert seen[420] == 0 and seen[600] == 0
    assert w.events_of("KEDAScaleTargetDeactivated") == ["Deactivated apps/v1.Deployment default/model from 4 to 0"]
    assert w.conditions("HorizontalPodAutoscaler", "keda-hpa-so")["ScalingActive"]["reason"] == "ScalingDisabled"


def test_ke3_cooldown_condition_while_waiting() -> None:
    so = scaled_object().replicas(0, 10).prometheus(QUEUE, threshold=10, activation=50).obj()
    w = keda_world(so, 2, step_fn((0, 60), (100, 40)))
    w.run(400)
    assert w.conditions("ScaledObject", "so")["Active"] == {
        "type": "Active", "status": "False", "reason": "ScalerCooldown",
        "message": "Scaler cooling down because triggers are not active"}


def test_ke4_scale_from_zero_on_the_next_poll_then_the_hpa() -> None:
    """KE4: min 0, activationThreshold 0, 0 replicas; the metric becomes 1 at 40 s → 1 replica at the next poll
    (60 s, polls every 30 s), then the HPA takes it from 1 to N."""
    so = scaled_object().replicas(0, 10).prometheus(QUEUE, threshold=5).obj()
    w = keda_world(so, 0, step_fn((0, 0), (40, 1), (100, 20)))
    seen = w.watch_replicas(200, every=5)
    assert [seen[t] for t in (0, 30, 55)] == [0, 0, 0]
    assert seen[60] == 1
    assert w.events_of("KEDAScaleTargetActivated") == [
        "Scaled apps/v1.Deployment default/model from 0 to 1, triggered by prometheusScaler"]
    assert seen[200] == 4  # the HPA: ceil(20 / 5)
    so_status = w.store.get("ScaledObject", "default", "so")["status"]
    assert so_status["lastActiveTime"] == w.store.timestamp(180)


def test_ke4_hpa_is_disabled_at_zero() -> None:
    so = scaled_object().replicas(0, 10).prometheus(QUEUE, threshold=5).obj()
    w = keda_world(so, 0, step_fn((0, 0)))
    w.run(30)
    assert w.conditions("HorizontalPodAutoscaler", "keda-hpa-so")["ScalingActive"]["message"] == (
        "scaling is disabled since the replica count of the target is zero")
    assert w.replicas() == 0


def test_ke5_cooldown_governs_only_the_last_replica() -> None:
    """KE5: min 0, cooldownPeriod 300, 1 replica; the metric drops to 0 at 60 s (last active poll 30 s) → stays 1
    until 30 + 300 < now, i.e. the poll at 360 s."""
    so = scaled_object().spec(cooldownPeriod=300).replicas(0, 10).prometheus(QUEUE, threshold=5).obj()
    w = keda_world(so, 1, step_fn((0, 1), (60, 0)))
    seen = w.watch_replicas(400, every=15)
    assert all(seen[t] == 1 for t in seen if t < 360)
    assert seen[360] == 0 and seen[390] == 0


def test_ke5_never_active_uses_initial_cooldown() -> None:
    so = scaled_object().spec(initialCooldownPeriod=100).replicas(0, 10).prometheus(QUEUE, threshold=5).obj()
    w = keda_world(so, 1, step_fn((0, 0)))
    seen = w.watch_replicas(150, every=30)
    assert seen[90] == 1 and seen[120] == 0  # creation + 100 < now first at the 120 s poll


@pytest.mark.parametrize("queue, expected", [(21, 4), (23, 5), (17, 4), (18, 4)])
def test_ke6_tolerance(queue: int, expected: int) -> None:
    """KE6: AverageValue threshold 5, tolerance 0.1, 4 replicas: ratio 1.05 (21) and 0.9 (18) are inside → no
    change; 23 (1.15) → ceil(23/5) = 5; 17 (0.85) → ceil(17/5) = 4, the same count."""
    so = scaled_object().replicas(1, 10).prometheus(QUEUE, threshold=5).obj()
    w = keda_world(so, 4, step_fn((0, queue)))
    w.run(1)  # the Deployment's status.replicas is set before the first sync reads it at 15 s
    w.run(15)
    assert w.replicas() == expected
    hpa = w.store.get("HorizontalPodAutoscaler", "default", "keda-hpa-so")
    assert hpa["status"]["desiredReplicas"] == expected
    assert bool(w.events_of("SuccessfulRescale")) == (expected != 4)
    if expected == 4:
        assert w.conditions("HorizontalPodAutoscaler", "keda-hpa-so")["AbleToScale"]["reason"] == "ReadyForNewScale"


def test_ke7_scale_down_stabilization_holds_the_highest_recommendation() -> None:
    """KE7: recommendations 6 at t=0, 2 from t=15: the replicas stay 6 while the 6 is in the 300 s window. Without
    `behavior` (KEDA's default) a sample exactly at the cutoff still counts, so 6 holds through 300 s."""
    so = scaled_object().replicas(1, 10).prometheus(QUEUE, threshold=5).obj()
    w = keda_world(so, 6, step_fn((0, 30), (15, 10)))
    seen = w.watch_replicas(330, every=15)
    assert all(seen[t] == 6 for t in seen if t <= 300)
    assert seen[315] == 2
    hpa = w.store.get("HorizontalPodAutoscaler", "default", "keda-hpa-so")
    assert w.events_of("SuccessfulRescale") == ["New size: 2; reason: All metrics below target"]
    assert hpa["status"]["lastScaleTime"] == w.store.timestamp(315)


def test_ke7_stabilized_condition() -> None:
    so = scaled_object().replicas(1, 10).prometheus(QUEUE, threshold=5).obj()
    w = keda_world(so, 6, step_fn((0, 30), (15, 10)))
    w.run(100)
    assert w.conditions("HorizontalPodAutoscaler", "keda-hpa-so")["AbleToScale"]["reason"] == "ScaleDownStabilized"


def test_ke7_with_behavior_the_window_is_strict() -> None:
    """With `behavior` set the window keeps samples strictly newer than now - 300 s: the drop comes at 300 s."""
    so = scaled_object().replicas(1, 10).prometheus(QUEUE, threshold=5).behavior({}).obj()
    w = keda_world(so, 6, step_fn((0, 30), (15, 10)))
    seen = w.watch_replicas(330, every=15)
    assert seen[285] == 6 and seen[300] == 2


def test_ke8_scale_up_policies_pods_4_percent_100() -> None:
    """KE8: 2 replicas, desired 20, policies Pods 4/15 s and Percent 100/15 s with selectPolicy Max:
    max(2+4, 2×2) = 6, then max(10, 12) = 12, then max(16, 24) capped at 20."""
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]}}
    so = scaled_object().replicas(1, 30).prometheus(QUEUE, threshold=5).behavior(behavior).obj()
    w = keda_world(so, 2, step_fn((0, 100)))
    seen = w.watch_replicas(60, every=15)
    assert [seen[t] for t in (0, 15, 30, 45)] == [6, 12, 20, 20]
    assert w.conditions("HorizontalPodAutoscaler", "keda-hpa-so")["ScalingLimited"]["reason"] == "DesiredWithinRange"


def test_ke8_limited_step_sets_scale_up_limit() -> None:
    behavior = {"scaleUp": {"policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]}}
    so = scaled_object().replicas(1, 30).prometheus(QUEUE, threshold=5).behavior(behavior).obj()
    w = keda_world(so, 2, step_fn((0, 100)))
    w.run(0)
    assert w.replicas() == 6
    assert w.conditions("HorizontalPodAutoscaler", "keda-hpa-so")["ScalingLimited"]["reason"] == "ScaleUpLimit"


def test_ke9_min_replicas_ignores_activation() -> None:
    """KE9: minReplicaCount 2, metric 0 for an hour → stays 2, never deactivated."""
    so = scaled_object().replicas(2, 10).prometheus(QUEUE, threshold=5).obj()
    w = keda_world(so, 2, step_fn((0, 0)))
    seen = w.watch_replicas(3600, every=60)
    assert set(seen.values()) == {2}
    assert w.events_of("KEDAScaleTargetDeactivated") == []
    assert w.conditions("ScaledObject", "so")["Active"]["reason"] == "ScalerNotActive"


# -- KEDA details --------------------------------------------------------------------------------------
def test_idle_replica_count_and_deletion_restores() -> None:
    so = (scaled_object().spec(idleReplicaCount=0, cooldownPeriod=60).replicas(2, 10)
          .prometheus(QUEUE, threshold=5).obj())
    so["spec"]["advanced"] = {"restoreToOriginalReplicaCount": True}
    w = keda_world(so, 3, step_fn((0, 1), (30, 0), (200, 5)))
    seen = w.watch_replicas(240, every=30)
    assert seen[60] == 3 and seen[90] == 0  # last active poll at 0 s: 0 + 60 < now first at the 90 s poll
    # Active again at 200 s: KEDA lifts idle to minReplicaCount 2 at the 210 s poll, and the HPA in the same instant
    # applies its scale-down stabilization, whose 300 s window still holds the 3 recommended before idling.
    assert seen[210] == 3 and w.events_of("KEDAScaleTargetActivated") == [
        "Scaled apps/v1.Deployment default/model from 0 to 2, triggered by prometheusScaler"]
    w.store.delete("ScaledObject", "default", "so")
    w.run(241)
    assert w.replicas() == 3 and w.store.get("HorizontalPodAutoscaler", "default", "keda-hpa-so") is None


def test_paused_annotation_removes_the_hpa() -> None:
    so = scaled_object().replicas(0, 10).prometheus(QUEUE, threshold=5).obj()
    so["metadata"]["annotations"] = {"autoscaling.keda.sh/paused-replicas": "3"}
    w = keda_world(so, 1, step_fn((0, 100)))
    w.run(60)
    assert w.replicas() == 3 and w.store.get("HorizontalPodAutoscaler", "default", "keda-hpa-so") is None
    assert w.conditions("ScaledObject", "so")["Paused"]["reason"] == "ScaledObjectPaused"


def test_empty_result_is_zero_unless_ignore_null_values_false() -> None:
    so = scaled_object().replicas(0, 10).prometheus("sum(missing_metric)", threshold=5, ignoreNullValues="false").obj()
    w = keda_world(so, 1, step_fn((0, 0)))
    w.run(0)
    assert w.events_of("KEDAScalerFailed") == [
        "prometheus metrics 'prometheus' target may be lost, the result is empty"]
    assert w.conditions("ScaledObject", "so")["Ready"]["reason"] == "TriggerError"
    assert w.events_of("FailedComputeMetricsReplicas")[0].startswith(
        "invalid metrics (1 invalid out of 1), first error is: failed to get s0-prometheus external metric: "
        "unable to get external metric default/s0-prometheus/")


def test_multiple_elements_is_an_error() -> None:
    so = scaled_object().replicas(1, 10).prometheus("vllm:num_requests_waiting", threshold=5).obj()
    w = keda_world(so, 1, step_fn((0, 3)))
    w.metrics.add("vllm:num_requests_waiting", step_fn((0, 3)), model="m", pod="gw2")
    w.run(0)
    assert w.events_of("KEDAScalerFailed") == ["prometheus query vllm:num_requests_waiting returned multiple elements"]


def test_missing_target_reports_and_recovers() -> None:
    w = world()
    w.metrics.add("vllm:num_requests_waiting", step_fn((0, 20)), model="m")
    w.store.create(scaled_object().replicas(0, 10).prometheus(QUEUE, threshold=5).obj())
    w.run(0)
    ready = w.conditions("ScaledObject", "so")["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "ScaledObjectCheckFailed")
    assert ready["message"] == ("ScaledObject doesn't have correct scaleTargetRef specification: "
                                'deployments.apps "model" not found')
    w.store.create(deployment(replicas=1))
    w.run(30)
    assert w.conditions("ScaledObject", "so")["Ready"]["status"] == "True" and w.replicas() == 4


# -- validation ----------------------------------------------------------------------------------------
def test_missing_threshold_is_keda_s_error_and_the_object_is_not_ready() -> None:
    so = scaled_object().replicas(0, 10).prometheus(QUEUE, threshold=None).obj()
    expected = 'error parsing prometheus metadata: missing required parameter "threshold" in [triggerMetadata]'
    assert scaled_object_errors(so) == [("spec.triggers[0]", expected)]
    assert crd.check(so) == []  # the CRD schema accepts it: KEDA finds it when it builds the scaler
    w = keda_world(so, 1, step_fn((0, 20)))
    w.run(0)
    assert w.events_of("KEDAScalerFailed") == [expected]
    ready = w.conditions("ScaledObject", "so")["Ready"]
    assert ready["message"] == f"failed to ensure HPA is correctly created for ScaledObject: {expected}"
    assert w.conditions("ScaledObject", "so")["Active"]["reason"] == "UnknownState"
    assert w.store.get("HorizontalPodAutoscaler", "default", "keda-hpa-so") is None


@pytest.mark.parametrize("mutate, expected", [
    (lambda s: s["spec"]["triggers"][0]["metadata"].pop("serverAddress"),
     [("spec.triggers[0]", 'error parsing prometheus metadata: missing required parameter "serverAddress" in '
                           "[triggerMetadata]")]),
    (lambda s: s["spec"]["triggers"][0]["metadata"].update(threshold="abc"),
     [("spec.triggers[0]", 'error parsing prometheus metadata: unable to set param "threshold" value "abc": '
                           'strconv.ParseFloat: parsing "abc": invalid syntax')]),
    (lambda s: s["spec"]["triggers"][0].update(metricType="Utilization"),
     [("spec.triggers[0]", "error getting scaler metric type: 'Utilization' metric type is unsupported for "
                           "external metrics, allowed values are 'Value' or 'AverageValue'")]),
    (lambda s: s["spec"].update(minReplicaCount=5, maxReplicaCount=2),
     [("spec", "MinReplicaCount=5 must be less than MaxReplicaCount=2")]),
    (lambda s: s["spec"].update(minReplicaCount=1, idleReplicaCount=1),
     [("spec", "IdleReplicaCount=1 must be less than MinReplicaCount=1")]),
])
def test_scaled_object_errors(mutate: Callable[[dict], object], expected: list) -> None:
    so = scaled_object().replicas(0, 10).prometheus(QUEUE, threshold=5).obj()
    mutate(so)
    assert scaled_object_errors(so) == expected


def test_crd_schema_errors() -> None:
    so = scaled_object().prometheus(QUEUE).obj()
    del so["spec"]["scaleTargetRef"]
    so["spec"]["pollingInterval"] = "30s"
    messages = {(e.path, e.message) for e in crd.check(so)}
    assert ("spec.scaleTargetRef", "Required value") in messages
    assert any(p == "spec.pollingInterval" and "must be of type integer" in m for p, m in messages)


# -- the HPA alone -------------------------------------------------------------------------------------
PODS_METRIC = [{"type": "Pods", "pods": {"metric": {"name": "vllm:num_requests_running"},
                                         "target": {"type": "AverageValue", "averageValue": "4"}}}]


def test_pods_metric_averages_over_the_target_pods() -> None:
    """Pods metric: 3 pods at 6 each against 4 → ratio 1.5 → ceil(1.5 × 3) = 5."""
    w = world(keda=False)
    w.metrics.per_pod["vllm:num_requests_running"] = lambda t, pod: 6.0
    w.store.create(deployment(replicas=3))
    w.run(10)
    w.store.create(horizontal_pod_autoscaler("h", "model").metrics(PODS_METRIC).obj())
    w.run(10)
    assert w.replicas() == 5
    st = w.store.get("HorizontalPodAutoscaler", "default", "h")["status"]
    assert st["currentMetrics"] == [{"type": "Pods", "pods": {"metric": {"name": "vllm:num_requests_running"},
                                                              "current": {"averageValue": "6"}}}]
    assert w.events_of("SuccessfulRescale") == ["New size: 5; reason: pods metric vllm:num_requests_running above "
                                                "target"]
    assert w.conditions("HorizontalPodAutoscaler", "h")["ScalingActive"]["message"] == (
        "the HPA was able to successfully calculate a replica count from pods metric vllm:num_requests_running")


def test_pods_metric_pending_pods_count_as_zero_on_scale_up() -> None:
    """Pending (unready) pods are taken as 0 on a scale-up: 2 running at 8, 2 pending, target 4 → ratio 2 on the
    ready ones, rebalanced (8+8+0+0)/4/4 = 1 → inside tolerance, no change."""
    w = world(boot=1000, keda=False)
    w.metrics.per_pod["vllm:num_requests_running"] = lambda t, pod: 8.0
    w.store.create(deployment(replicas=2))
    w.run(1)
    for p in w.store.list("Pod"):
        w.store.update({**p, "status": {**p["status"], "phase": "Running"}})
    w.store.patch("Deployment", "default", "model", lambda d: {**d, "spec": {**d["spec"], "replicas": 4}})
    w.run(2)
    w.store.create(horizontal_pod_autoscaler("h", "model").metrics(PODS_METRIC).obj())
    w.run(2)
    assert w.replicas() == 4


def test_min_clamp_sets_too_few_replicas() -> None:
    ext = [{"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "gw", "apiVersion": "v1"},
                                         "metric": {"name": "inference_pool_average_queue_size"},
                                         "target": {"type": "Value", "value": "10"}}}]
    w = world(keda=False)
    w.metrics.add("inference_pool_average_queue_size", step_fn((0, 0)), service="gw", namespace="default")
    w.store.create(deployment(replicas=3))
    w.run(1)
    w.store.create(horizontal_pod_autoscaler("h", "model").replicas(2, 10).metrics(ext)
                   .behavior({"scaleDown": {"stabilizationWindowSeconds": 0}}).obj())
    w.run(1)
    assert w.replicas() == 2
    lim = w.conditions("HorizontalPodAutoscaler", "h")["ScalingLimited"]
    assert (lim["status"], lim["reason"], lim["message"]) == (
        "True", "TooFewReplicas", "the desired replica count is less than the minimum replica count")


def test_no_behavior_scale_up_limit_is_twice_or_four() -> None:
    w = world(keda=False)
    w.metrics.per_pod["vllm:num_requests_running"] = lambda t, pod: 40.0
    w.store.create(deployment(replicas=1))
    w.run(1)
    w.store.create(horizontal_pod_autoscaler("h", "model").replicas(1, 50).metrics(PODS_METRIC).obj())
    seen = w.watch_replicas(31, every=15)
    assert [seen[1], seen[16], seen[31]] == [4, 8, 16]  # max(2×current, 4) each sync
    assert w.conditions("HorizontalPodAutoscaler", "h")["ScalingLimited"]["reason"] == "ScaleUpLimit"


def test_external_metric_without_a_server_is_failed_get_external_metric() -> None:
    ext = [{"type": "External", "external": {"metric": {"name": "queue"},
                                             "target": {"type": "AverageValue", "averageValue": "5"}}}]
    w = world(keda=False)
    w.store.create(deployment(replicas=1))
    w.store.create(horizontal_pod_autoscaler("h", "model").metrics(ext).obj())
    w.run(0)
    calc = ("unable to get external metric default/queue/nil: the server could not find the requested resource "
            "(get queue.external.metrics.k8s.io)")
    assert w.events_of("FailedGetExternalMetric") == [calc]
    assert w.events_of("FailedComputeMetricsReplicas") == [
        f"invalid metrics (1 invalid out of 1), first error is: failed to get queue external metric: {calc}"]
    act = w.conditions("HorizontalPodAutoscaler", "h")["ScalingActive"]
    assert (act["status"], act["message"]) == ("False", f"the HPA was unable to compute the replica count: {calc}")


def test_hpa_resyncs_every_15_seconds_and_per_hpa_tolerance() -> None:
    """behavior.scaleUp.tolerance (HPAConfigurableTolerance) widens the band: ratio 1.3 stays inside 0.5."""
    w = world(keda=False)
    w.metrics.per_pod["vllm:num_requests_running"] = lambda t, pod: 5.2
    w.store.create(deployment(replicas=2))
    w.run(1)
    w.store.create(horizontal_pod_autoscaler("h", "model").metrics(PODS_METRIC)
                   .behavior({"scaleUp": {"tolerance": "500m"}}).obj())
    w.run(60)
    assert w.replicas() == 2
    assert w.store.get("HorizontalPodAutoscaler", "default", "h")["status"]["desiredReplicas"] == 2


def test_format_milli() -> None:
    assert [format_milli(m) for m in (5000, 5500, 0, 1_500_000, 15_000_000)] == ["5", "5500m", "0", "1500", "15k"]


# -- PromQL --------------------------------------------------------------------------------------------
def promql() -> Evaluator:
    p = FakeProvider(step=10.0)
    p.add("q", lambda t: 3.0, pod="a", model="m1", ns="x")
    p.add("q", lambda t: 5.0, pod="b", model="m1", ns="y")
    p.add("q", lambda t: 7.0, pod="c", model="m2", ns="x")
    p.add("q", lambda t: 1.0 if t < 100 else None, pod="gone", model="m2", ns="x")
    p.add("c", lambda t: t, pod="a")  # a counter growing 1/s
    p.add("r", lambda t: {10: 20.0, 20: 5.0, 30: 15.0}.get(t, 10.0 if t <= 0 else None), pod="a")  # a reset
    for le, n in (("0.1", 10), ("0.5", 20), ("1", 40), ("+Inf", 40)):
        p.add("lat_bucket", lambda t, n=n: float(n), le=le, model="m1")
    return Evaluator(p)


@pytest.mark.parametrize("query, t, expected", [
    ('sum(q{model="m1"})', 500, [({}, 8.0)]),
    ('sum by (model) (q)', 500, [({"model": "m1"}, 8.0), ({"model": "m2"}, 7.0)]),
    ('sum by (model) (q)', 50, [({"model": "m1"}, 8.0), ({"model": "m2"}, 8.0)]),  # "gone" still within lookback
    ('max(q{ns!="y"})', 500, [({}, 7.0)]),
    ('min(q{model=~"m.*"})', 500, [({}, 3.0)]),
    ('count(q{pod!~"a|b"})', 500, [({}, 1.0)]),
    ('avg without (pod, ns) (q)', 500, [({"model": "m1"}, 4.0), ({"model": "m2"}, 7.0)]),
    ('sum(q) / 3', 500, [({}, 5.0)]),
    ('sum(q) > 100', 500, []),
    ('sum(q) > bool 100', 500, [({}, 0.0)]),
    ('q{pod="a"} > 2', 500, [({"__name__": "q", "pod": "a", "model": "m1", "ns": "x"}, 3.0)]),
    ('2 * 3 + 1', 0, 7.0),
    ('rate(c[1m])', 600, [({"pod": "a"}, 1.0)]),
    ('increase(c[1m])', 600, [({"pod": "a"}, 60.0)]),
    ('increase(r[30s])', 30, [({"pod": "a"}, 22.5)]),
    ('rate(r[30s])', 30, [({"pod": "a"}, 0.75)]),
    ('max_over_time(c[1m])', 600, [({"pod": "a"}, 600.0)]),
    ('avg_over_time(c[1m])', 600, [({"pod": "a"}, 575.0)]),
    ('histogram_quantile(0.5, sum by (le) (lat_bucket))', 0, [({}, 0.5)]),
    ('histogram_quantile(0.75, lat_bucket)', 0, [({"model": "m1"}, 0.75)]),
    ('histogram_quantile(0.99, lat_bucket)', 0, [({"model": "m1"}, 0.99)]),
    ('sum(q{pod="a"}) + sum(q{pod="b"})', 500, [({}, 8.0)]),
    ('vector(2)', 0, [({}, 2.0)]),
])
def test_promql(query: str, t: float, expected: object) -> None:
    got = promql().query(query, t)
    if isinstance(expected, list):
        assert [(lb, pytest.approx(v)) for lb, v in got] == expected  # type: ignore[union-attr]
    else:
        assert got == pytest.approx(expected)


@pytest.mark.parametrize("query, words", [
    ("topk(2, q)", "aggregation topk is not supported"),
    ("max_over_time(q[5m:1m])", "subqueries are not supported"),
    ("q / on(pod) group_left q", "group_left/group_right"),
    ("label_replace(q, 'a', 'b', 'c', 'd')", "function label_replace() is not supported"),
    ("sum(", "parse error"),
    ("q[5m]", "a range vector cannot be the query's result"),
])
def test_promql_unsupported_names_the_construct(query: str, words: str) -> None:
    with pytest.raises(PromQLError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        promql().query(query, 0)
