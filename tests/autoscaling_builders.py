"""Builders for autoscaling objects (KEDA ScaledObject, autoscaling/v2 HorizontalPodAutoscaler), ending in `.obj()` as
every builder in tests/ (k8s_builders.py):

    scaled_object("so").replicas(0, 10).prometheus(QUERY, threshold=5).obj()
    horizontal_pod_autoscaler("h", "model").replicas(1, 10).metrics(PODS_METRIC).obj()
"""

from __future__ import annotations

from typing import Any

from k8s_builders import Wrapper

PROMETHEUS = "http://prometheus.monitoring:9090"


class ScaledObjectWrapper(Wrapper):
    def replicas(self, min_count: int, max_count: int) -> ScaledObjectWrapper:
        """minReplicaCount and maxReplicaCount."""
        self._obj["spec"]["minReplicaCount"], self._obj["spec"]["maxReplicaCount"] = min_count, max_count
        return self

    def spec(self, **fields: Any) -> ScaledObjectWrapper:
        """Any other ScaledObject spec field (pollingInterval, cooldownPeriod, idleReplicaCount, ...)."""
        self._obj["spec"].update(fields)
        return self

    def prometheus(self, query: str, threshold: float | None = 5, activation: float | None = None,
                   metric_type: str | None = None, name: str | None = None, server: str = PROMETHEUS,
                   **meta: str) -> ScaledObjectWrapper:
        """A prometheus trigger (KEDA's scaler metadata: serverAddress, query, threshold, activationThreshold)."""
        md = {"serverAddress": server, "query": query, **meta}
        if threshold is not None:
            md["threshold"] = str(threshold)
        if activation is not None:
            md["activationThreshold"] = str(activation)
        trig: dict = {"type": "prometheus", **({"name": name} if name else {}), "metadata": md}
        if metric_type:
            trig["metricType"] = metric_type
        self._obj["spec"]["triggers"].append(trig)
        return self

    def behavior(self, behavior: dict) -> ScaledObjectWrapper:
        """The HPA behavior KEDA passes on (spec.advanced.horizontalPodAutoscalerConfig.behavior)."""
        self._obj["spec"]["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": behavior}}
        return self


def scaled_object(name: str = "so", target: str = "model") -> ScaledObjectWrapper:
    """A ScaledObject scaling the Deployment `target`, with no trigger yet."""
    return ScaledObjectWrapper({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                                "metadata": {"name": name, "namespace": "default"},
                                "spec": {"scaleTargetRef": {"name": target}, "triggers": []}})


class HorizontalPodAutoscalerWrapper(Wrapper):
    def replicas(self, min_replicas: int, max_replicas: int) -> HorizontalPodAutoscalerWrapper:
        self._obj["spec"]["minReplicas"], self._obj["spec"]["maxReplicas"] = min_replicas, max_replicas
        return self

    def metrics(self, metrics: list) -> HorizontalPodAutoscalerWrapper:
        self._obj["spec"]["metrics"] = metrics
        return self

    def behavior(self, behavior: dict) -> HorizontalPodAutoscalerWrapper:
        self._obj["spec"]["behavior"] = behavior
        return self


def horizontal_pod_autoscaler(name: str, deployment: str) -> HorizontalPodAutoscalerWrapper:
    """An autoscaling/v2 HPA of the Deployment `deployment`, 1 to 10 replicas."""
    return HorizontalPodAutoscalerWrapper({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
                 "minReplicas": 1, "maxReplicas": 10}})
