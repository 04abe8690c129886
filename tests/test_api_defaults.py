"""The API server's defaulting of every built-in kind the twin accepts and reads, as `kubectl get -o yaml` shows the
stored object (api.defaults, applied as the first admission step). Cases ported from kubernetes
pkg/apis/core/v1/defaults_test.go (TestSetDefaultRequestsPod, TestSetDefaultServiceSessionAffinity,
TestSetDefaultServiceTargetPort, TestSetDefaultNamespace(Labels), TestSetDefaultNodeStatusAllocatable,
TestSetDefaultPersistentVolume, TestSetDefaultHostNetworkPorts, TestSetDefaultProbe, TestSetDefaultEnableServiceLinks,
TestSetDefaultSchedulerName...) and pkg/apis/apps/v1/defaults_test.go (TestSetDefaultDaemonSetSpec,
TestSetDefaultStatefulSet) where they apply."""

from __future__ import annotations

import pytest

from kubetwin.api import defaults, podresources
from kubetwin.controllers import admission
from kubetwin.sim.env import Environment
from kubetwin.store.store import Store

NOW = "2026-01-01T00:00:00Z"


def _stored(obj: dict) -> dict:
    """The object as the runner's admission chain stores it."""
    store = Store(Environment(), 0, NOW)
    store.admit(admission.api_defaults, admission.API_DEFAULTED)
    store.admit(admission.pod_defaults, ("Pod",))
    return store.create(admission.default_namespace(obj))


def _pod(*containers: dict, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": list(containers), **spec}}


# --- Pod ------------------------------------------------------------------------------------------------

def test_pod_spec_defaults_as_set_defaults_pod_spec_and_pod() -> None:
    spec = _stored(_pod({"name": "c", "image": "busybox:1.36"}))["spec"]
    assert {k: spec[k] for k in ("dnsPolicy", "restartPolicy", "securityContext", "terminationGracePeriodSeconds",
                                 "schedulerName", "enableServiceLinks")} == {
        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "securityContext": {},
        "terminationGracePeriodSeconds": 30, "schedulerName": "default-scheduler", "enableServiceLinks": True}


def test_pod_spec_keeps_what_is_set() -> None:
    spec = _stored(_pod({"name": "c", "image": "i:1"}, restartPolicy="Never", schedulerName="custom",
                        terminationGracePeriodSeconds=0, enableServiceLinks=False, dnsPolicy="Default"))["spec"]
    assert (spec["restartPolicy"], spec["schedulerName"], spec["terminationGracePeriodSeconds"],
            spec["enableServiceLinks"], spec["dnsPolicy"]) == ("Never", "custom", 0, False, "Default")


@pytest.mark.parametrize(("image", "policy"), [
    ("busybox", "Always"),  # no tag: ParseImageName's default tag is latest
    ("busybox:latest", "Always"),
    ("busybox:1.36", "IfNotPresent"),
    ("vllm/vllm-openai:v0.10.1", "IfNotPresent"),
    ("us-docker.pkg.dev/p/r/img", "Always"),
    ("localhost:5000/img", "Always"),  # the port is not a tag
    ("localhost:5000/img:2", "IfNotPresent"),
    ("busybox@sha256:" + "a" * 64, "IfNotPresent"),  # a digest without a tag: no default tag
    ("busybox:latest@sha256:" + "a" * 64, "Always"),
])
def test_container_image_pull_policy(image, policy) -> None:
    [c] = _stored(_pod({"name": "c", "image": image}))["spec"]["containers"]
    assert c["imagePullPolicy"] == policy
    assert (c["terminationMessagePath"], c["terminationMessagePolicy"]) == ("/dev/termination-log", "File")


def test_image_pull_policy_set_is_kept_and_init_containers_are_defaulted() -> None:
    spec = _stored(_pod({"name": "c", "image": "i", "imagePullPolicy": "Never"},
                        initContainers=[{"name": "i", "image": "init:latest"}]))["spec"]
    assert spec["containers"][0]["imagePullPolicy"] == "Never"
    assert spec["initContainers"][0]["imagePullPolicy"] == "Always"


def test_set_default_requests_pod() -> None:
    """TestSetDefaultRequestsPod: requests default to limits, per resource, on containers and init containers;
    a request already set is kept."""
    c = {"name": "c", "image": "i:1", "resources": {"limits": {"cpu": "100m", "nvidia.com/gpu": "1"},
                                                    "requests": {"memory": "1Gi"}}}
    i = {"name": "i", "image": "i:1", "resources": {"limits": {"cpu": "1"}}}
    spec = _stored(_pod(c, initContainers=[i]))["spec"]
    assert spec["containers"][0]["resources"] == {
        "limits": {"cpu": "100m", "nvidia.com/gpu": "1"},
        "requests": {"memory": "1Gi", "cpu": "100m", "nvidia.com/gpu": "1"}}
    assert spec["initContainers"][0]["resources"]["requests"] == {"cpu": "1"}
    no_limits = _stored(_pod({"name": "c", "image": "i:1", "resources": {"requests": {"cpu": "1"}}}))
    assert no_limits["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


def test_the_reader_and_the_stored_pod_agree() -> None:
    """podresources reads a manifest (before defaulting) and a stored pod the same: one rule."""
    pod = _pod({"name": "c", "image": "i:1", "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}})
    stored = _stored(pod)
    assert podresources.pod_requests(pod) == podresources.pod_requests(stored) == {"cpu": 2000,
                                                                                    "memory": 4 * 2**30}


def test_container_ports_protocol_and_host_network_ports() -> None:
    """ContainerPort.protocol defaults to TCP; with hostNetwork each port's hostPort is its containerPort
    (TestSetDefaultHostNetworkPorts; a hostPort already set is kept)."""
    c = {"name": "c", "image": "i:1", "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]}
    assert _stored(_pod(c))["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}]
    c = {"name": "c", "image": "i:1", "ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 9}]}
    assert _stored(_pod(c, hostNetwork=True))["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP", "hostPort": 80}, {"containerPort": 81, "hostPort": 9,
                                                                   "protocol": "TCP"}]


def test_probes_and_volumes() -> None:
    c = {"name": "c", "image": "i:1", "readinessProbe": {"httpGet": {"port": 8000}},
         "livenessProbe": {"tcpSocket": {"port": 8000}, "periodSeconds": 5}}
    vols = [{"name": "cache"}, {"name": "cm", "configMap": {"name": "x"}}, {"name": "s", "secret": {"secretName": "y"}},
            {"name": "h", "hostPath": {"path": "/tmp"}}, {"name": "e", "emptyDir": {"medium": "Memory"}}]
    spec = _stored(_pod(c, volumes=vols))["spec"]
    c = spec["containers"][0]
    assert c["readinessProbe"] == {"httpGet": {"port": 8000, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                                   "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert c["livenessProbe"]["periodSeconds"] == 5 and c["livenessProbe"]["failureThreshold"] == 3
    assert spec["volumes"] == [
        {"name": "cache", "emptyDir": {}}, {"name": "cm", "configMap": {"name": "x", "defaultMode": 420}},
        {"name": "s", "secret": {"secretName": "y", "defaultMode": 420}},
        {"name": "h", "hostPath": {"path": "/tmp", "type": ""}}, {"name": "e", "emptyDir": {"medium": "Memory"}}]


def test_pods_of_one_template_share_their_defaulted_containers() -> None:
    """Pods a controller creates from one template share its containers list; their defaulted lists are one
    object too, so the caches keyed by the containers' identity (api.podspec.TemplateMemo) keep hitting."""
    containers = [{"name": "c", "image": "i:1", "resources": {"limits": {"cpu": "1"}}}]
    a = defaults.apply({**_pod(), "spec": {"containers": containers}})
    b = defaults.apply({**_pod(), "metadata": {"name": "q"}, "spec": {"containers": containers}})
    assert a["spec"]["containers"] is b["spec"]["containers"]
    assert a["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}


# --- other kinds ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "want"), [
    ({"ports": [{"port": 80}]}, {"type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
                                 "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]}),
    ({"ports": [{"port": 80, "targetPort": "http"}], "type": "LoadBalancer"},
     {"type": "LoadBalancer", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
      "externalTrafficPolicy": "Cluster", "allocateLoadBalancerNodePorts": True,
      "ports": [{"port": 80, "protocol": "TCP", "targetPort": "http"}]}),
    ({"type": "ExternalName", "externalName": "x.example.com"},
     {"type": "ExternalName", "externalName": "x.example.com", "sessionAffinity": "None"}),
    ({"sessionAffinity": "ClientIP", "ports": [{"port": 80, "targetPort": 0}]},
     {"type": "ClusterIP", "sessionAffinity": "ClientIP", "internalTrafficPolicy": "Cluster",
      "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
      "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]}),
])
def test_service(spec, want) -> None:
    got = _stored({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": spec})["spec"]
    assert got == want


def test_namespace() -> None:
    ns = _stored({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "a"}}})
    assert ns["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": "ml"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}


@pytest.mark.parametrize(("status", "want"), [
    ({"capacity": {"cpu": "8", "memory": "32Gi"}}, {"cpu": "8", "memory": "32Gi"}),
    ({"capacity": {"cpu": "8"}, "allocatable": {"cpu": "7"}}, {"cpu": "7"}),
])
def test_node_status_allocatable(status, want) -> None:
    node = _stored({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": status})
    assert node["status"]["allocatable"] == want


def test_persistent_volume_and_claim() -> None:
    pv = _stored({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
                  "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}})
    assert (pv["status"], pv["spec"]["persistentVolumeReclaimPolicy"], pv["spec"]["volumeMode"]) == (
        {"phase": "Pending"}, "Retain", "Filesystem")
    pvc = _stored({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {}})
    assert (pvc["status"], pvc["spec"]["volumeMode"]) == ({"phase": "Pending"}, "Filesystem")


def test_statefulset_and_daemonset() -> None:
    sts = _stored({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {}})["spec"]
    assert sts == {"replicas": 1, "revisionHistoryLimit": 10, "podManagementPolicy": "OrderedReady",
                   "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                   "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"}}
    ondelete = _stored({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
                        "spec": {"updateStrategy": {"type": "OnDelete"}}})["spec"]["updateStrategy"]
    assert ondelete == {"type": "OnDelete"}
    ds = _stored({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {}})["spec"]
    assert ds == {"revisionHistoryLimit": 10, "updateStrategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}}


def test_pod_disruption_budget_has_no_defaults_in_policy_v1() -> None:
    """policy/v1 has no SetDefaults_* (pkg/apis/policy/v1 has no defaults.go): the object is stored as given."""
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "default"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}}
    assert _stored(pdb)["spec"] == pdb["spec"]


def test_a_static_node_with_capacity_only_takes_pods() -> None:
    """A v1 Node written with status.capacity and no allocatable (a dump trimmed by hand): the API server stores
    allocatable = capacity, so the scheduler places the pod on it."""
    from kubetwin.api.loader import load_text
    from kubetwin.runner import run

    text = ("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  capacity: {cpu: '8', memory: 32Gi, "
            "pods: '110'}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - {name: c, image: 'busybox:1.36', resources: {requests: {cpu: '1', memory: 1Gi}}}\n---\n"
            "apiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nspec: {duration: 5m}\n")
    r = run(manifests=load_text(text, "f.yaml"))
    bound = [o for _, _, _, o in r.history if o["kind"] == "Pod" and o["spec"].get("nodeName") == "n1"]
    assert bound


def test_hpa_behavior_rules_are_filled_when_behavior_is_given() -> None:
    """SetDefaults_HorizontalPodAutoscalerBehavior: a behavior with only a scale-down window gets both rules
    whole (scale-down keeps no default window); no behavior stays none."""
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
           "spec": {"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}
    assert _stored(hpa)["spec"]["behavior"] == {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                 {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                      "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}
    del hpa["spec"]["behavior"]
    assert "behavior" not in _stored(hpa)["spec"]


def test_limit_range_item_defaults() -> None:
    """TestSetDefaultLimitRangeItem: a Container item's default limit comes from max, its default request from the
    default limit, then from min."""
    lr = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "100Mi"}, "default": {"memory": "1Gi"}},
        {"type": "Pod", "max": {"cpu": "4"}}]}}
    items = _stored(lr)["spec"]["limits"]
    assert items[0]["default"] == {"cpu": "2", "memory": "1Gi"}
    assert items[0]["defaultRequest"] == {"cpu": "2", "memory": "1Gi"}
    assert items[1] == {"type": "Pod", "max": {"cpu": "4"}}


@pytest.mark.parametrize("kind", ["Job", "StatefulSet", "DaemonSet", "PodTemplate"])
def test_pod_templates_get_pod_spec_and_container_defaults_but_not_set_defaults_pod(kind) -> None:
    """SetObjectDefaults_* walk a template's PodSpec and containers; SetDefaults_Pod (requests from limits,
    enableServiceLinks) is a Pod's alone ("we only want this defaulting semantic to take place on a v1.Pod and not a
    v1.PodTemplate")."""
    tmpl = {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "1"}}, "ports": [{"containerPort": 80}]}]}}
    api = {"Job": "batch/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "PodTemplate": "v1"}[kind]
    obj = {"apiVersion": api, "kind": kind, "metadata": {"name": "x"}}
    obj.update({"template": tmpl} if kind == "PodTemplate" else {"spec": {"template": tmpl}})
    stored = _stored(obj)
    spec = (stored if kind == "PodTemplate" else stored["spec"])["template"]["spec"]
    [c] = spec["containers"]
    assert (c["imagePullPolicy"], c["terminationMessagePolicy"], c["ports"][0]["protocol"]) == (
        "Always", "File", "TCP")
    assert c["resources"] == {"limits": {"cpu": "1"}}
    assert (spec["dnsPolicy"], spec["schedulerName"], spec["securityContext"]) == (
        "ClusterFirst", "default-scheduler", {})
    assert "enableServiceLinks" not in spec
