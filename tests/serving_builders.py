"""Builders for serving scenarios, so each test reads like its scenario; each ends in `.obj()` as every builder in
tests/ (k8s_builders.py): `inference_pool().router("round-robin").obj()`, `vllm("srv", 2).obj()`,
`trace("t").rate(5).obj()`."""

from __future__ import annotations

from typing import Any, Self

from k8s_builders import NodePoolWrapper, ScenarioWrapper, Wrapper, make_pool

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def serving_scenario(duration: str = "20m") -> ScenarioWrapper:
    """A Scenario "s" of `duration`, seed 0, sampled every 30 s."""
    return ScenarioWrapper({"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                            "spec": {"duration": duration, "seed": 0, "sampleInterval": "30s",
                                     "report": ["summary"]}})


def h100_pool(nodes: int) -> NodePoolWrapper:
    """A pool "h100" of a3-highgpu-1g nodes (one H100 80GB each)."""
    return make_pool("h100", "a3-highgpu-1g", nodes).gpus("nvidia-h100-80gb", 1)


def a100_pool() -> NodePoolWrapper:
    """One a2-ultragpu-1g node "a100": its A100 whole, or `.gpu_partition(...)` / `.gpu_sharing(...)`."""
    return make_pool("a100", "a2-ultragpu-1g", 1).gpus("nvidia-a100-80gb", 1)


class DeploymentWrapper(Wrapper):
    def _container(self) -> dict:
        return self._obj["spec"]["template"]["spec"]["containers"][0]

    def args(self, args: list[str]) -> DeploymentWrapper:
        self._container()["args"] = args
        return self

    def app(self, app: str) -> DeploymentWrapper:
        """The `app` label its selector and its pods carry."""
        self._obj["spec"]["selector"]["matchLabels"]["app"] = app
        self._obj["spec"]["template"]["metadata"]["labels"]["app"] = app
        return self

    def create_at(self, t: str) -> DeploymentWrapper:
        return self.annotation("kubetwin.io/create-at", t)

    def pod_annotations(self, annotations: dict) -> DeploymentWrapper:
        self._obj["spec"]["template"]["metadata"]["annotations"] = annotations
        return self

    def volumes(self, volumes: list) -> DeploymentWrapper:
        self._obj["spec"]["template"]["spec"]["volumes"] = volumes
        return self

    def mounts(self, mounts: list) -> DeploymentWrapper:
        self._container()["volumeMounts"] = mounts
        return self


def vllm(name: str, replicas: int) -> DeploymentWrapper:
    """A Deployment of vLLM serving MODEL on one GPU per replica, pods labelled app=srv."""
    container: dict[str, Any] = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1", "args": ["--model", MODEL],
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return DeploymentWrapper({"apiVersion": "apps/v1", "kind": "Deployment",
                              "metadata": {"name": name, "namespace": "default"},
                              "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "srv"}},
                                       "template": {"metadata": {"labels": {"app": "srv"}, "annotations": {}},
                                                    "spec": {"containers": [container]}}}})


class RoutedWrapper(Wrapper):
    """An InferencePool or a Service: the pods it selects and the router that spreads requests over them."""

    def router(self, router: str) -> Self:
        return self.annotation("kubetwin.io/router", router)

    def request_ttl(self, ttl: str) -> Self:
        return self.annotation("kubetwin.io/request-ttl", ttl)


class InferencePoolWrapper(RoutedWrapper):
    def app(self, app: str) -> InferencePoolWrapper:
        self._obj["spec"]["selector"]["matchLabels"]["app"] = app
        return self


def inference_pool(name: str = "pool") -> InferencePoolWrapper:
    """A Gateway API InferencePool over the app=srv pods' port 8000."""
    return InferencePoolWrapper({"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
                                 "metadata": {"name": name, "namespace": "default", "annotations": {}},
                                 "spec": {"selector": {"matchLabels": {"app": "srv"}},
                                          "targetPorts": [{"number": 8000}],
                                          "endpointPickerRef": {"name": f"{name}-epp", "port": {"number": 9002}}}})


class ServiceWrapper(RoutedWrapper):
    def app(self, app: str) -> ServiceWrapper:
        self._obj["spec"]["selector"]["app"] = app
        return self


def service(name: str = "svc") -> ServiceWrapper:
    """A v1 Service over the app=srv pods, port 80 -> 8000."""
    return ServiceWrapper({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
                           "spec": {"selector": {"app": "srv"}, "ports": [{"port": 80, "targetPort": 8000}]}})


class TraceWrapper(Wrapper):
    def _gen(self) -> dict:
        return self._obj["spec"]["generator"]

    def target(self, kind: str, name: str) -> TraceWrapper:
        self._obj["spec"]["target"] = {"kind": kind, "name": name}
        return self

    def rate(self, rate: float) -> TraceWrapper:
        self._gen()["rate"] = rate
        return self

    def duration(self, d: str) -> TraceWrapper:
        self._gen()["duration"] = d
        return self

    def start(self, t: str) -> TraceWrapper:
        return self.annotation("kubetwin.io/create-at", t)

    def model(self, model: str) -> TraceWrapper:
        self._obj["spec"]["model"] = model
        return self

    def prompt(self, tokens: int) -> TraceWrapper:
        self._gen()["promptTokens"] = tokens
        return self

    def output(self, tokens: int) -> TraceWrapper:
        self._gen()["outputTokens"] = tokens
        return self

    def shared_prefix(self, shared: dict) -> TraceWrapper:
        """Requests sharing prompt prefixes (the generator's sharedPrefix), instead of fixed prompt/output sizes."""
        del self._gen()["promptTokens"], self._gen()["outputTokens"]
        self._gen()["sharedPrefix"] = shared
        return self

    def priority(self, p: int) -> TraceWrapper:
        self._obj["spec"]["priority"] = p
        return self


def trace(name: str = "t") -> TraceWrapper:
    """A generated RequestTrace to InferencePool "pool": Poisson, 5 req/s for 5 min from 0 s, 500 -> 50 tokens."""
    return TraceWrapper({"apiVersion": "kubetwin.io/v1alpha1", "kind": "RequestTrace",
                         "metadata": {"name": name, "namespace": "default",
                                      "annotations": {"kubetwin.io/create-at": "0s"}},
                         "spec": {"format": "generator", "target": {"kind": "InferencePool", "name": "pool"},
                                  "model": MODEL, "generator": {"rate": 5.0, "duration": "5m",
                                                                "process": {"type": "poisson"},
                                                                "promptTokens": 500, "outputTokens": 50}}})


class InferenceModelWrapper(Wrapper):
    def model(self, model: str) -> InferenceModelWrapper:
        self._obj["spec"]["modelName"] = model
        return self

    def criticality(self, c: str) -> InferenceModelWrapper:
        self._obj["spec"]["criticality"] = c
        return self

    def pool(self, pool: str) -> InferenceModelWrapper:
        self._obj["spec"]["poolRef"] = {"name": pool}
        return self


def inference_model(name: str) -> InferenceModelWrapper:
    """An InferenceModel serving MODEL from InferencePool "pool", criticality Standard."""
    return InferenceModelWrapper({"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferenceModel",
                                  "metadata": {"name": name, "namespace": "default"},
                                  "spec": {"modelName": MODEL, "criticality": "Standard", "poolRef": {"name": "pool"}}})
