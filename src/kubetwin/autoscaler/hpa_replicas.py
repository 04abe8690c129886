"""How the HPA controller reads a metric and turns it into a replica count (kubernetes/kubernetes
pkg/controller/podautoscaler/replica_calculator.go, and the computeStatusFor*Metric parts of horizontal.go): the
External metrics servers registered per store, the custom metrics API over the twin's per-pod series for Pods and
Object metrics, pod grouping, tolerance, and the quantity formatting the status shows. A mixin of
`HorizontalPodAutoscalerController` (hpa.py), kept apart because it is the per-metric arithmetic, not the control
loop."""

from __future__ import annotations

import math
from collections.abc import Callable

from kubetwin.k8s.conditions import is_condition_true
from kubetwin.k8s.labels import matches
from kubetwin.k8s.units import parse_quantity
from kubetwin.prometheus.promql import LOOKBACK, MetricsProvider
from kubetwin.prometheus.staleness import newest
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

# An External metrics API server: fn(namespace, metric name, selector) -> metric values, or raises.
ExternalMetrics = Callable[[str, str, dict | None], list[float]]
EXTERNAL_METRICS_API = "external.metrics.k8s.io/v1beta1"  # the group/version the HPA controller's client asks


def register_external_metrics(store: Store, server: ExternalMetrics) -> None:
    """Serve external.metrics.k8s.io for this store (what an APIService registration does). Servers are asked in
    registration order; one that does not know the metric raises LookupError."""
    store.api_services.setdefault(EXTERNAL_METRICS_API, []).append(server)


def milli(value: object) -> int:
    """A quantity's MilliValue (rounded up, as resource.Quantity.MilliValue does)."""
    return int(math.ceil(parse_quantity(value) * 1000))


def format_milli(m: int) -> str:
    """resource.NewMilliQuantity(m, DecimalSI).String(): the canonical decimal-SI form."""
    if m % 1000:
        return f"{m}m"
    n, i = m // 1000, 0
    while n and n % 1000 == 0 and i < 6:
        n, i = n // 1000, i + 1
    return f"{n}{['', 'k', 'M', 'G', 'T', 'P', 'E'][i]}"


def go_selector(sel: dict | None) -> str:
    """A *metav1.LabelSelector printed with %+v (the generated String()), as it appears in the HPA's messages."""
    if sel is None:
        return "nil"
    labels = "".join(f"{k}: {v}," for k, v in sorted((sel.get("matchLabels") or {}).items()))
    exprs = ",".join(f"LabelSelectorRequirement{{Key:{e['key']},Operator:{e['operator']},Values:[]string{{"
                     f"{','.join(e.get('values') or [])}}},}}" for e in sel.get("matchExpressions") or [])
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")


class MetricError(Exception):
    """One metric could not be computed: the condition reason and the replica calculator's error."""

    def __init__(self, reason: str, calc_error: str, wrapped: str) -> None:
        super().__init__(wrapped)
        self.reason, self.calc_error = reason, calc_error


def _pod_ready(pod: Obj) -> bool:
    """podutil.IsPodReady: Running with the Ready condition True (a pod without conditions counts as ready once
    Running, for stores without a kubelet)."""
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    conds = st.get("conditions")
    return not conds or is_condition_true(conds, "Ready")


class ReplicaCalculator:
    """The per-metric replica proposals (replica_calculator.go's ReplicaCalculator, which the HPA controller holds):
    it reads pods from the store and metrics from the provider, with the controller's tolerance flag."""

    def __init__(self, store: Store, env: Environment, metrics: MetricsProvider | None, tolerance: float) -> None:
        self.store, self.env, self.metrics, self.tolerance = store, env, metrics, tolerance

    def _tolerances(self, hpa: Obj) -> tuple[float, float]:
        """(scale-down, scale-up) tolerance: the per-HPA behavior tolerance (HPAConfigurableTolerance, k8s 1.33)
        or the controller flag."""
        b = (hpa.get("spec") or {}).get("behavior") or {}
        down = (b.get("scaleDown") or {}).get("tolerance")
        up = (b.get("scaleUp") or {}).get("tolerance")
        return (float(parse_quantity(down)) if down is not None else self.tolerance,
                float(parse_quantity(up)) if up is not None else self.tolerance)

    def metric_replicas(self, hpa: Obj, target: Obj, m: dict) -> tuple[int, str, dict]:
        """One metric spec's proposal: (replicas, metric name, its MetricStatus), or MetricError."""
        ns = hpa["metadata"].get("namespace") or "default"
        spec_replicas = int((target.get("spec") or {}).get("replicas", 1))
        status_replicas = int((target.get("status") or {}).get("replicas", 0))
        down_tol, up_tol = self._tolerances(hpa)

        def within(ratio: float) -> bool:
            return (1.0 - down_tol) <= ratio <= (1.0 + up_tol)

        mtype = m.get("type")
        if mtype == "External":
            ext = m.get("external") or {}
            metric, tgt = ext.get("metric") or {}, ext.get("target") or {}
            mname, sel = metric.get("name", ""), metric.get("selector")
            label = f"external metric {mname}({go_selector(sel)})"
            try:
                values = self._external(ns, mname, sel)
            except Exception as e:  # noqa: BLE001 - any metrics server failure is a metric error
                calc = f"unable to get external metric {ns}/{mname}/{go_selector(sel)}: {e}"
                raise MetricError("FailedGetExternalMetric", calc,
                                  f"failed to get {mname} external metric: {calc}") from None
            usage = sum(int(v * 1000) for v in values)  # the metrics server's int64(value*1000) milli-values
            if tgt.get("averageValue") is not None:  # GetExternalPerPodMetricReplicas
                t_milli = milli(tgt["averageValue"])
                ratio = usage / (t_milli * status_replicas) if status_replicas else math.inf
                count = status_replicas if within(ratio) else math.ceil(usage / t_milli)
                avg = math.ceil(usage / status_replicas) if status_replicas else usage
                return count, label, {"type": "External", "external": {
                    "metric": metric, "current": {"averageValue": format_milli(avg)}}}
            if tgt.get("value") is not None:  # GetExternalMetricReplicas
                ratio = usage / milli(tgt["value"])
                count = self._usage_ratio_count(spec_replicas, ratio, within, ns, target, "FailedGetExternalMetric")
                return count, label, {"type": "External", "external": {
                    "metric": metric, "current": {"value": format_milli(usage)}}}
            err = "invalid external metric source: neither a value target nor an average value target was set"
            raise MetricError("FailedGetExternalMetric", err, err)
        if mtype == "Pods":
            pm = m.get("pods") or {}
            metric, tgt = pm.get("metric") or {}, pm.get("target") or {}
            mname = metric.get("name", "")
            t_milli = milli(tgt.get("averageValue", 0))
            count, avg = self._pods_metric(ns, target, mname, metric.get("selector"), t_milli, spec_replicas, within)
            return count, f"pods metric {mname}", {"type": "Pods", "pods": {
                "metric": metric, "current": {"averageValue": format_milli(avg)}}}
        if mtype == "Object":
            om = m.get("object") or {}
            metric, tgt, obj = om.get("metric") or {}, om.get("target") or {}, om.get("describedObject") or {}
            mname = metric.get("name", "")
            value = self._object_metric(ns, mname, metric.get("selector"), obj)
            if tgt.get("value") is not None:  # GetObjectMetricReplicas
                ratio = value / milli(tgt["value"])
                count = self._usage_ratio_count(spec_replicas, ratio, within, ns, target, "FailedGetObjectMetric")
                return count, f"{obj.get('kind')} metric {mname}", {"type": "Object", "object": {
                    "metric": metric, "describedObject": obj, "current": {"value": format_milli(value)}}}
            if tgt.get("averageValue") is not None:  # GetObjectPerPodMetricReplicas
                t_milli = milli(tgt["averageValue"])
                ratio = value / (t_milli * status_replicas) if status_replicas else math.inf
                count = status_replicas if within(ratio) else math.ceil(value / t_milli)
                avg = math.ceil(value / status_replicas) if status_replicas else value
                return count, f"external metric {mname}({go_selector(metric.get('selector'))})", {
                    "type": "Object", "object": {"metric": metric, "describedObject": obj,
                                                 "current": {"averageValue": format_milli(avg)}}}
            err = "invalid object metric source: neither a value target nor an average value target was set"
            raise MetricError("FailedGetObjectMetric", err, err)
        if mtype == "Resource" or mtype == "ContainerResource":
            res = (m.get("resource") or m.get("containerResource") or {}).get("name", "cpu")
            calc = f"unable to get metrics for resource {res}: no metrics returned from resource metrics API"
            raise MetricError("FailedGetResourceMetric", calc, f"failed to get {res} utilization: {calc}")
        err = f"unknown metric source type {mtype!r}"
        raise MetricError("InvalidMetricSourceType", err, err)

    def _external(self, ns: str, name: str, selector: dict | None) -> list[float]:
        for server in self.store.api_services.get(EXTERNAL_METRICS_API, []):
            try:
                return server(ns, name, selector)
            except LookupError:
                continue
        raise LookupError(f'the server could not find the requested resource (get {name}.external.metrics.k8s.io)')

    def _pods(self, ns: str, target: Obj) -> list[Obj]:
        sel = (target.get("spec") or {}).get("selector")
        if target.get("kind") == "LeaderWorkerSet":  # its scale subresource's labelSelectorPath: the leaders
            pairs = str((target.get("status") or {}).get("hpaPodSelector") or "")
            sel = {"matchLabels": dict(kv.split("=", 1) for kv in pairs.split(",") if "=" in kv)} if pairs else None
        return [p for p in self.store.list("Pod", ns) if sel and matches(sel, p["metadata"].get("labels"))]

    def _usage_ratio_count(self, current: int, ratio: float, within: Callable[[float], bool], ns: str,
                           target: Obj, reason: str) -> int:
        """getUsageRatioReplicaCount: ceil(ratio × ready pods); from zero replicas, ceil(ratio)."""
        if current == 0:
            return math.ceil(ratio)
        if within(ratio):
            return current
        pods = self._pods(ns, target)
        if not pods:
            raise MetricError(reason, "no pods returned by selector while calculating replica "
                              "count", "unable to calculate ready pods: no pods returned by selector while "
                              "calculating replica count")
        return math.ceil(ratio * sum(1 for p in pods if _pod_ready(p)))

    def _pods_metric(self, ns: str, target: Obj, name: str, selector: dict | None, t_milli: int, current: int,
                     within: Callable[[float], bool]) -> tuple[int, int]:
        """calcPlainMetricReplicas with groupPods: deleted/failed pods ignored, pending pods unready (0 on a
        scale-up), pods without a metric missing (target on a scale-down, 0 on a scale-up)."""
        if self.metrics is None:
            calc = f"unable to get metric {name}: no custom metrics API is served"
            raise MetricError("FailedGetPodsMetric", calc, calc)
        now = self.env.now
        values: dict[str, int] = {}
        for labels, samples in self.metrics.series(name, now - LOOKBACK, now):
            if labels.get("namespace", ns) != ns or "pod" not in labels:
                continue
            if selector and not matches(selector, labels):
                continue
            v = newest(samples, now)
            if v is not None:
                values[labels["pod"]] = int(v * 1000)
        pods = self._pods(ns, target)
        if not pods:
            calc = "no pods returned by selector while calculating replica count"
            raise MetricError("FailedGetPodsMetric", calc, calc)
        ready, unready, missing = 0, [], []
        metrics: dict[str, int] = {}
        for p in pods:
            pname, phase = p["metadata"]["name"], (p.get("status") or {}).get("phase")
            if p["metadata"].get("deletionTimestamp") or phase == "Failed":
                continue
            if phase == "Pending":
                unready.append(pname)
                continue
            if pname not in values:
                missing.append(pname)
                continue
            metrics[pname] = values[pname]
            ready += 1
        if not metrics:
            calc = f"unable to get metric {name}: did not receive metrics for any ready pods"
            raise MetricError("FailedGetPodsMetric", calc, calc)
        avg = sum(metrics.values()) / len(metrics)
        ratio, utilization = avg / t_milli, int(avg)
        rebalance = bool(unready) and ratio > 1.0
        if not rebalance and not missing:
            return (current if within(ratio) else math.ceil(ratio * ready)), utilization
        for pname in missing:
            metrics[pname] = t_milli if ratio < 1.0 else 0
        if rebalance:
            for pname in unready:
                metrics[pname] = 0
        new_ratio = sum(metrics.values()) / len(metrics) / t_milli
        if within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
            return current, utilization
        new = math.ceil(new_ratio * len(metrics))
        if (new_ratio < 1.0 and new > current) or (new_ratio > 1.0 and new < current):
            return current, utilization
        return new, utilization

    def _object_metric(self, ns: str, name: str, selector: dict | None, obj: dict) -> int:
        """The custom metrics API for one object: the series of `name` labelled with the object (its lowercased
        kind as the label name, e.g. service="gw") in the namespace."""
        if self.metrics is None:
            raise MetricError("FailedGetObjectMetric", f"unable to get metric {name}: no custom metrics API is served",
                              f"failed to get {name} object metric")
        now, kind = self.env.now, (obj.get("kind") or "").lower()
        total, found = 0, False
        for labels, samples in self.metrics.series(name, now - LOOKBACK, now):
            if labels.get("namespace", ns) != ns or labels.get(kind) != obj.get("name"):
                continue
            if selector and not matches(selector, labels):
                continue
            v = newest(samples, now)
            if v is not None:
                total, found = total + int(v * 1000), True
        if not found:
            calc = (f"unable to get metric {name}: {obj.get('kind')} on {ns} {obj.get('name')}/the server could not "
                    "find the metric")
            raise MetricError("FailedGetObjectMetric", calc, f"failed to get {name} object metric: {calc}")
        return total
