"""Write one realistic GKE cluster, `ml-prod`, in the three dump formats the importer reads (issue 36 item 4).

Deterministic (names, uids, IPs and times come from hashes of the object's name): run it again and the files are
byte for byte the same. Written by the kubetwin project from the formats' code and documentation, not dumped from a
real cluster (README.md beside this file says what each format is and where its shape comes from):

  examples/your-cluster/cluster.json        kubectl get <every kind below> -A -o json (a v1 List, compact)
  tests/data/import/gke-large-kwokctl.yaml  kwokctl snapshot save --format k8s (documents, resourceVersion cleared)
  tests/data/import/gke-large-simulator-export.json   kube-scheduler-simulator GET /api/v1/export (pods, nodes,
                                            namespaces, storage and priority classes, schedulerConfig; no apiVersion
                                            or kind on its items)
  tests/data/import/gke-large-simulator-rest.json     kubectl get of the kinds the simulator does not export

The cluster at 2026-12-01T10:00:00Z (us-central1, GKE 1.34): node pools system-pool (3 n2-standard-8, one per
zone), cpu-pool (4 e2-standard-16), h100-pool (8 a3-highgpu-8g, device plugin), h100-dra (2 a3-highgpu-8g running
the NVIDIA DRA driver instead of the device plugin), l4-spot (20 Spot g2-standard-24, 10 in each of two zones);
node capacity and allocatable from the twin's catalog (GKE's reservations, which it cites). GKE's system pods
per node (kube-proxy static pods, fluentbit-gke and pdcsi-node of DaemonSets that the dump does not hold, the GPU
device plugin or the DRA kubelet plugin); kube-dns and Kueue's controller; an L4 vLLM Deployment on Spot and a CPU
embeddings Deployment; Kueue v1beta2 with two ClusterQueues in one cohort, three admitted Indexed Jobs holding all 64
H100s of h100-pool and three pending ones (suspended, Workloads QuotaReserved=False); DRA: the driver's DeviceClasses
and ResourceSlices, a Deployment whose pods hold 4 GPUs each through claims from a ResourceClaimTemplate, and a
notebook pod holding a named claim of 2 GPUs, all allocated; a JobSet of 2 Indexed Jobs on the free L4 nodes.
No TPU pool: the importer keeps TPU nodes as static
Nodes only (not grouped into NodePools), so a TPU slice would not exercise pools.

    PYTHONPATH=src python tests/data/import/make_gke_cluster.py
"""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from kubetwin import catalog
from kubetwin.devices.dra import nvidia

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
PROJECT, REGION, CLUSTER = "ml-prod", "us-central1", "ml-prod"
NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)  # the snapshot's time (the newest time the dump records)
CREATED = datetime(2026, 11, 20, 8, 0, 0, tzinfo=UTC)  # the cluster's creation
KUBELET = "v1.34.1-gke.1829001"
Obj = dict[str, Any]


def h(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


def uid(*parts: object) -> str:
    x = h("uid", *parts)
    return f"{x[:8]}-{x[8:12]}-4{x[13:16]}-{'89ab'[int(x[16], 16) % 4]}{x[17:20]}-{x[20:32]}"


ALNUM = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.String's alphabet (no vowels, no 0/1/3)


def suffix(n: int, *parts: object) -> str:
    x = int(h("sfx", *parts), 16)
    return "".join(ALNUM[(x >> (5 * i)) % len(ALNUM)] for i in range(n))


def ts(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


_rv = [48000000]


def rv() -> str:
    _rv[0] += 7
    return str(_rv[0])


def mf(manager: str, t: datetime, fields: Obj, subresource: str | None = None, api: str = "v1",
       op: str = "Update") -> Obj:
    """One managedFields entry (metav1.ManagedFieldsEntry), keys as the API server prints them."""
    e = {"apiVersion": api, "fieldsType": "FieldsV1", "fieldsV1": fields, "manager": manager, "operation": op}
    if subresource:
        e["subresource"] = subresource
    e["time"] = ts(t)
    return e


def meta(name: str, t: datetime, *, ns: str | None = None, labels: Obj | None = None, ann: Obj | None = None,
         owner: Obj | None = None, managed: list[Obj] | None = None, key: tuple = (), generation: int | None = None,
         finalizers: list[str] | None = None) -> Obj:
    m: Obj = {}
    if ann:
        m["annotations"] = ann
    m["creationTimestamp"] = ts(t)
    if finalizers:
        m["finalizers"] = finalizers
    if generation is not None:
        m["generation"] = generation
    if labels:
        m["labels"] = labels
    m["managedFields"] = managed or []
    m["name"] = name
    if ns:
        m["namespace"] = ns
    if owner:
        m["ownerReferences"] = [owner]
    m["resourceVersion"] = rv()
    m["uid"] = uid(*(key or (ns, name)))
    return m


def ref(api: str, kind: str, obj: Obj, block: bool = True) -> Obj:
    r = {"apiVersion": api}
    if block:
        r["blockOwnerDeletion"] = True
    r.update(controller=True, kind=kind, name=obj["metadata"]["name"], uid=obj["metadata"]["uid"])
    return r


LABELS_F = {"f:metadata": {"f:labels": {".": {}}}}
SPEC_F = {"f:spec": {}}
STATUS_F = {"f:status": {"f:conditions": {".": {}}}}

# -- nodes --------------------------------------------------------------------------------------------------------
POOLS = [  # name, machine type, {zone: nodes}, accelerator, spot, DRA, user labels
    ("system-pool", "n2-standard-8", {"us-central1-a": 1, "us-central1-b": 1, "us-central1-c": 1}, None, False, False,
     {}),
    ("cpu-pool", "e2-standard-16", {"us-central1-a": 2, "us-central1-b": 2}, None, False, False,
     {"team": "ml-platform"}),
    ("h100-pool", "a3-highgpu-8g", {"us-central1-a": 8}, "nvidia-h100-80gb", False, False, {"team": "ml-platform"}),
    ("h100-dra", "a3-highgpu-8g", {"us-central1-a": 2}, "nvidia-h100-80gb", False, True,
     {"gke-no-default-nvidia-gpu-device-plugin": "true", "nvidia.com/gpu.present": "true", "team": "ml-platform"}),
    ("l4-spot", "g2-standard-24", {"us-central1-a": 8, "us-central1-b": 8}, "nvidia-l4", True, False,
     {"team": "ml-serving"}),
]
GPU_TAINT = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
SPOT_TAINT = {"effect": "NoSchedule", "key": "cloud.google.com/gke-spot", "value": "true"}
DISK_CAP, DISK_ALLOC = "98831908Ki", "47060071478"  # 100 GB pd-balanced boot disk as the kubelet reports it


def ki(n: int) -> str:
    return f"{n // 1024}Ki"


def node(pool: str, machine: str, zone: str, i: int, acc: str | None, spot: bool, dra: bool, user: Obj,
         ip: str, cidr: str) -> Obj:
    mt = catalog.machine_type(machine)
    group = h("ig", pool, zone)[:8]
    name = f"gke-{CLUSTER}-{pool}-{group}-{suffix(4, pool, zone, i)}"
    born = CREATED + timedelta(minutes=12 + 3 * len(pool) + i)
    labels = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": machine,
              "beta.kubernetes.io/os": "linux"}
    if acc:
        labels["cloud.google.com/gke-accelerator"] = acc
    labels.update({"cloud.google.com/gke-boot-disk": "pd-balanced",
                   "cloud.google.com/gke-container-runtime": "containerd",
                   "cloud.google.com/gke-cpu-scaling-level": str(mt.vcpus)})
    if acc:
        labels["cloud.google.com/gke-gpu"] = "true"
        if not dra:  # DRA pools: gpu-driver-version=disabled, the driver is installed by hand
            labels["cloud.google.com/gke-gpu-driver-version"] = "default"
    labels.update({"cloud.google.com/gke-logging-variant": "DEFAULT", "cloud.google.com/gke-max-pods-per-node": "110",
                   "cloud.google.com/gke-nodepool": pool, "cloud.google.com/gke-os-distribution": "cos",
                   "cloud.google.com/gke-provisioning": "spot" if spot else "standard"})
    if spot:
        labels["cloud.google.com/gke-spot"] = "true"
    labels.update({"cloud.google.com/gke-stack-type": "IPV4", "cloud.google.com/machine-family": mt.family,
                   "cloud.google.com/private-node": "false", "failure-domain.beta.kubernetes.io/region": REGION,
                   "failure-domain.beta.kubernetes.io/zone": zone, **user, "kubernetes.io/arch": "amd64",
                   "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   "node.kubernetes.io/instance-type": machine, "topology.gke.io/zone": zone,
                   "topology.kubernetes.io/region": REGION, "topology.kubernetes.io/zone": zone})
    labels = dict(sorted(labels.items()))
    cap, alloc = catalog.capacity(mt), catalog.allocatable(mt)
    capacity = {"cpu": str(cap["cpu"] // 1000), "ephemeral-storage": DISK_CAP, "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": ki(cap["memory"])}
    allocatable = {"cpu": f"{alloc['cpu']}m", "ephemeral-storage": DISK_ALLOC, "hugepages-1Gi": "0",
                   "hugepages-2Mi": "0", "memory": ki(alloc["memory"])}
    if acc and not dra:  # the device plugin advertises the GPUs; with DRA the driver publishes ResourceSlices
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(mt.gpu_count)
    capacity["pods"] = allocatable["pods"] = "110"
    taints = ([GPU_TAINT] if acc else []) + ([SPOT_TAINT] if spot else [])
    beat = NOW - timedelta(seconds=20 + int(h("beat", name)[:2], 16) % 60)
    status_fields = {"f:status": {"f:allocatable": {}, "f:capacity": {}, "f:conditions": {}, "f:images": {},
                                  "f:nodeInfo": {}}}
    m = meta(name, born, labels=labels, key=("node", name), ann={
        "container.googleapis.com/instance_id": str(int(h("iid", name)[:15], 16)),
        "csi.volume.kubernetes.io/nodeid": json.dumps(
            {"pd.csi.storage.gke.io": f"projects/{PROJECT}/zones/{zone}/instances/{name}"}),
        "node.alpha.kubernetes.io/ttl": "0",
        "node.gke.io/last-applied-node-labels": ",".join(f"{k}={v}" for k, v in sorted(
            {"cloud.google.com/gke-nodepool": pool, **user}.items())),
        "node.gke.io/last-applied-node-taints": ",".join(f"{t['key']}={t['value']}:{t['effect']}" for t in taints),
        "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        managed=[mf("kubelet", born, LABELS_F), mf("kube-controller-manager", born + timedelta(seconds=21),
                                                   {"f:spec": {"f:podCIDR": {}, "f:podCIDRs": {}}}),
                 mf("gcp-controller-manager", born + timedelta(seconds=30), {"f:spec": {"f:taints": {}}}),
                 mf("kubelet", beat, status_fields, "status")])
    ready = born + timedelta(seconds=41)

    def cond(t: str, s: str, reason: str, msg: str, since: datetime = born) -> Obj:
        return {"lastHeartbeatTime": ts(beat), "lastTransitionTime": ts(since), "message": msg, "reason": reason,
                "status": s, "type": t}

    conditions = [cond("FrequentUnregisterNetDevice", "False", "NoFrequentUnregisterNetDevice",
                       "node is functioning properly"),
                  cond("KernelDeadlock", "False", "KernelHasNoDeadlock", "kernel has no deadlock"),
                  cond("MemoryPressure", "False", "KubeletHasSufficientMemory",
                       "kubelet has sufficient memory available"),
                  cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                  cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                  cond("Ready", "True", "KubeletReady", "kubelet is posting ready status", ready)]
    boot = h("boot", name)
    return {"apiVersion": "v1", "kind": "Node", "metadata": m, "spec": {
        "podCIDR": cidr, "podCIDRs": [cidr], "providerID": f"gce://{PROJECT}/{zone}/{name}",
        **({"taints": taints} if taints else {})}, "status": {
        "addresses": [{"address": ip, "type": "InternalIP"}, {"address": name, "type": "Hostname"}],
        "allocatable": allocatable, "capacity": capacity, "conditions": conditions,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "images": [{"names": [f"gke.gcr.io/gke-metadata-server@sha256:{h('img', 'gms')}"], "sizeBytes": 57914412}],
        "nodeInfo": {"architecture": "amd64", "bootID": uid("boot", name), "containerRuntimeVersion":
                     "containerd://2.0.6", "kernelVersion": "6.6.97+", "kubeProxyVersion": "",
                     "kubeletVersion": KUBELET, "machineID": boot[:32], "operatingSystem": "linux",
                     "osImage": "Container-Optimized OS from Google", "systemUUID": uid("sys", name)}}}


# -- pods ---------------------------------------------------------------------------------------------------------
TOLERATE_NOT_READY = [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
                       "tolerationSeconds": 300},
                      {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
                       "tolerationSeconds": 300}]
TOLERATE_ALL = [{"effect": "NoExecute", "operator": "Exists"}, {"effect": "NoSchedule", "operator": "Exists"}]
GPU_TOLERATION = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}
SPOT_TOLERATION = {"effect": "NoSchedule", "key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true"}


def container(name: str, image: str, requests: Obj, limits: Obj | None = None, **extra: Any) -> Obj:
    c: Obj = {**extra, "image": image, "imagePullPolicy": "IfNotPresent", "name": name,
              "resources": {**({"limits": limits} if limits else {}), "requests": requests},
              "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    return dict(sorted(c.items()))


def pod_spec(containers: list[Obj], **extra: Any) -> Obj:
    s: Obj = {"containers": containers, "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
              "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
              "schedulerName": "default-scheduler", "securityContext": {}, "serviceAccount": "default",
              "serviceAccountName": "default", "terminationGracePeriodSeconds": 30}
    s.update(extra)
    return dict(sorted(s.items()))


def template_spec(spec: Obj) -> Obj:
    """A controller's pod template as the API server prints it: no nodeName, serviceAccount, preemption fields."""
    return {k: v for k, v in spec.items() if k not in ("nodeName", "serviceAccount", "enableServiceLinks",
                                                       "preemptionPolicy", "priority")}


class Cluster:
    def __init__(self) -> None:
        self.objs: list[Obj] = []
        self.nodes: dict[str, Obj] = {}
        self.pool_nodes: dict[str, list[str]] = {}
        self.ips: dict[str, str] = {}
        self.pod_n: dict[str, int] = {}

    def add(self, obj: Obj) -> Obj:
        self.objs.append(obj)
        return obj

    # nodes
    def make_nodes(self) -> None:
        n = 0
        for pool, machine, zones, acc, spot, dra, user in POOLS:
            for zone, count in zones.items():
                for i in range(count):
                    n += 1
                    ip, cidr = f"10.128.0.{10 + n}", f"10.84.{n}.0/24"
                    obj = self.add(node(pool, machine, zone, i, acc, spot, dra, user, ip, cidr))
                    name = obj["metadata"]["name"]
                    self.nodes[name] = obj
                    self.pool_nodes.setdefault(pool, []).append(name)
                    self.ips[name] = ip
                    self.pod_n[name] = 2

    def pod(self, name: str, ns: str, spec: Obj, node_name: str | None, started: datetime | None, *,
            labels: Obj | None = None, ann: Obj | None = None, owner: Obj | None = None, created: datetime | None
            = None, claim_statuses: list[Obj] | None = None, qos: str = "Burstable") -> Obj:
        created = created or started or NOW
        spec = dict(spec)
        if node_name:
            spec["nodeName"] = node_name
            spec = dict(sorted(spec.items()))
        managed = [mf("kube-controller-manager" if owner else "kubectl-client-side-apply", created,
                      {"f:metadata": {"f:labels": {".": {}}}, "f:spec": {"f:containers": {}}})]
        status: Obj
        if node_name and started is not None:
            self.pod_n[node_name] += 1
            ip = f"{self.nodes[node_name]['spec']['podCIDR'].rsplit('.', 1)[0]}.{self.pod_n[node_name]}"
            host = self.ips[node_name]
            managed.append(mf("kubelet", started + timedelta(seconds=3), {"f:status": {
                "f:conditions": {}, "f:containerStatuses": {}, "f:phase": {}, "f:podIP": {}, "f:startTime": {}}},
                "status"))
            conds = [{"lastProbeTime": None, "lastTransitionTime": ts(started + timedelta(seconds=s)),
                      "status": "True", "type": t}
                     for t, s in (("PodReadyToStartContainers", 2), ("Initialized", 0), ("Ready", 3),
                                  ("ContainersReady", 3), ("PodScheduled", 0))]
            status = {"conditions": conds, "containerStatuses": [{
                "containerID": f"containerd://{h('cid', ns, name, c['name'])}", "image": c["image"],
                "imageID": c["image"].split(":")[0].split("@")[0] + "@sha256:" + h("iid", c["image"]),
                "lastState": {}, "name": c["name"], "ready": True, "restartCount": 0, "started": True,
                "state": {"running": {"startedAt": ts(started + timedelta(seconds=2))}}} for c in spec["containers"]],
                "hostIP": host, "hostIPs": [{"ip": host}], "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                "qosClass": qos, "startTime": ts(started)}
            if claim_statuses:
                status["resourceClaimStatuses"] = claim_statuses
            status = dict(sorted(status.items()))
        else:
            managed.append(mf("kube-scheduler", created + timedelta(seconds=1), {"f:status": {
                "f:conditions": {}}}, "status"))
            status = {"conditions": [{"lastProbeTime": None, "lastTransitionTime": ts(created + timedelta(seconds=1)),
                                      "message": "0/33 nodes are available: 33 Insufficient cpu. preemption: 0/33 "
                                      "nodes are available: 33 No preemption victims found for incoming pod.",
                                      "reason": "Unschedulable", "status": "False", "type": "PodScheduled"}],
                      "phase": "Pending", "qosClass": qos}
        return self.add({"apiVersion": "v1", "kind": "Pod", "metadata": meta(
            name, created, ns=ns, labels=labels, ann=ann, owner=owner, managed=managed), "spec": spec,
            "status": status})

    # kube-system: DaemonSet pods of DaemonSets the dump leaves out, and kube-proxy static pods
    def system_pods(self) -> None:
        for name, n in self.nodes.items():
            pool = n["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
            born = datetime.fromisoformat(n["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
            started = born + timedelta(seconds=30)
            proxy = pod_spec([container("kube-proxy", "gke.gcr.io/kube-proxy-amd64:v1.34.1-gke.1829001",
                                        {"cpu": "100m"}, command=["/bin/sh", "-c", "exec kube-proxy"])],
                             hostNetwork=True, priority=2000001000, priorityClassName="system-node-critical",
                             tolerations=TOLERATE_ALL)
            self.pod(f"kube-proxy-{name}", "kube-system", proxy, name, started, labels={
                "component": "kube-proxy", "tier": "node"}, ann={
                "kubernetes.io/config.hash": h("cfg", name)[:32], "kubernetes.io/config.mirror": h("cfg", name)[:32],
                "kubernetes.io/config.seen": ts(born), "kubernetes.io/config.source": "file"},
                owner={"apiVersion": "v1", "controller": True, "kind": "Node", "name": name,
                       "uid": n["metadata"]["uid"]})
            daemons = [("fluentbit-gke", "gke.gcr.io/fluent-bit:v1.8.12-gke.52", {"cpu": "100m", "memory": "200Mi"},
                        {"memory": "500Mi"}),
                       ("pdcsi-node", "gke.gcr.io/gcp-compute-persistent-disk-csi-driver:v1.17.6-gke.0",
                        {"cpu": "10m", "memory": "20Mi"}, {"memory": "100Mi"})]
            if pool == "h100-dra":  # gpu-driver-version=disabled: the driver installer DaemonSet applied by hand
                daemons.append(("nvidia-driver-installer", "gke.gcr.io/nvidia-driver-installer:cos-v20250822",
                                {"cpu": "150m"}, None))
            elif n["metadata"]["labels"].get("cloud.google.com/gke-accelerator"):
                daemons.append(("nvidia-gpu-device-plugin-large-cos" if "h100" in pool else
                                "nvidia-gpu-device-plugin-medium-cos",
                                "gke.gcr.io/nvidia-gpu-device-plugin:v1.0.25-gke.80", {"cpu": "50m", "memory": "50Mi"},
                                {"memory": "50Mi"}))
            for ds, image, req, lim in daemons:
                dsuid = uid("ds", ds)
                spec = pod_spec([container(ds, image, req, lim)], priority=2000001000,
                                priorityClassName="system-node-critical", tolerations=TOLERATE_ALL + TOLERATE_NOT_READY,
                                affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                                            "values": [name]}]}]}}})
                self.pod(f"{ds}-{suffix(5, ds, name)}", "kube-system", spec, name, started, labels={
                    "controller-revision-hash": h("crh", ds)[:10], "k8s-app": ds, "pod-template-generation": "1"},
                    owner={"apiVersion": "apps/v1", "blockOwnerDeletion": True, "controller": True,
                           "kind": "DaemonSet", "name": ds, "uid": dsuid})
            if pool == "h100-dra":
                ds = "nvidia-dra-driver-gpu-kubelet-plugin"
                spec = pod_spec([container("gpus", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1",
                                           {"cpu": "10m", "memory": "64Mi"})],
                                priority=2000001000, priorityClassName="system-node-critical",
                                serviceAccount="nvidia-dra-driver-gpu-service-account",
                                serviceAccountName="nvidia-dra-driver-gpu-service-account",
                                tolerations=[GPU_TOLERATION, *TOLERATE_NOT_READY])
                self.pod(f"{ds}-{suffix(5, ds, name)}", "nvidia-dra-driver-gpu", spec, name,
                         started + timedelta(minutes=4), labels={
                             "app.kubernetes.io/name": "nvidia-dra-driver-gpu", "controller-revision-hash":
                             h("crh", ds)[:10], "pod-template-generation": "1"},
                         owner={"apiVersion": "apps/v1", "blockOwnerDeletion": True, "controller": True,
                                "kind": "DaemonSet", "name": ds, "uid": uid("ds", ds)})

    def deployment(self, name: str, ns: str, replicas: int, spec: Obj, nodes: list[str], started: datetime,
                   labels: Obj, claims: list[Obj] | None = None) -> list[Obj]:
        """A Deployment, its current ReplicaSet and its Running pods (one per node given, in turn)."""
        dep_created = started - timedelta(minutes=2)
        tmpl_labels = dict(labels)
        dep = self.add({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(
            name, dep_created, ns=ns, labels=labels, generation=1, ann={"deployment.kubernetes.io/revision": "1"},
            managed=[mf("kubectl-client-side-apply", dep_created, {"f:spec": {"f:replicas": {}, "f:template": {}}},
                        api="apps/v1"),
                     mf("kube-controller-manager", started + timedelta(minutes=3), STATUS_F, "status", "apps/v1")]),
            "spec": {"progressDeadlineSeconds": 600, "replicas": replicas, "revisionHistoryLimit": 10,
                     "selector": {"matchLabels": labels}, "strategy": {
                         "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
                     "template": {"metadata": {"creationTimestamp": None, "labels": tmpl_labels},
                                  "spec": template_spec(spec)}},
            "status": {"availableReplicas": replicas, "conditions": [
                {"lastTransitionTime": ts(started + timedelta(minutes=3)),
                 "lastUpdateTime": ts(started + timedelta(minutes=3)),
                 "message": "Deployment has minimum availability.",
                 "reason": "MinimumReplicasAvailable", "status": "True", "type": "Available"},
                {"lastTransitionTime": ts(dep_created), "lastUpdateTime": ts(started + timedelta(minutes=3)),
                 "message": f'ReplicaSet "{name}-{h("pth", ns, name)[:10]}" has successfully progressed.',
                 "reason": "NewReplicaSetAvailable", "status": "True", "type": "Progressing"}],
                "observedGeneration": 1, "readyReplicas": replicas, "replicas": replicas,
                "updatedReplicas": replicas}})
        pth = h("pth", ns, name)[:10]
        rs_name = f"{name}-{pth}"
        rs_labels = {**labels, "pod-template-hash": pth}
        rs = self.add({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta(
            rs_name, dep_created, ns=ns, labels=rs_labels, generation=1, owner=ref("apps/v1", "Deployment", dep),
            ann={"deployment.kubernetes.io/desired-replicas": str(replicas),
                 "deployment.kubernetes.io/max-replicas": str(replicas + -(-replicas // 4)),
                 "deployment.kubernetes.io/revision": "1"},
            managed=[mf("kube-controller-manager", dep_created, {"f:spec": {"f:replicas": {}}}, api="apps/v1"),
                     mf("kube-controller-manager", started + timedelta(minutes=3), {"f:status": {
                         "f:readyReplicas": {}}}, "status", "apps/v1")]),
            "spec": {"replicas": replicas, "selector": {"matchLabels": rs_labels}, "template": {
                "metadata": {"creationTimestamp": None, "labels": rs_labels}, "spec": template_spec(spec)}},
            "status": {"availableReplicas": replicas, "fullyLabeledReplicas": replicas, "observedGeneration": 1,
                       "readyReplicas": replicas, "replicas": replicas}})
        pods = []
        for i in range(replicas):
            pname = f"{rs_name}-{suffix(5, rs_name, i)}"
            node_name = nodes[i % len(nodes)]
            cs = None
            if claims:
                cs = [{"name": c["name"], "resourceClaimName": f"{pname}-{c['name']}-{suffix(5, 'claim', pname)}"}
                      for c in claims]
            pods.append(self.pod(pname, ns, spec, node_name, started + timedelta(seconds=5 * i),
                                 labels=rs_labels, owner=ref("apps/v1", "ReplicaSet", rs),
                                 created=dep_created + timedelta(seconds=1), claim_statuses=cs))
        return pods


def kueue(c: Cluster) -> None:
    """Kueue v1beta2 (as kubectl returns the served version): one flavor per H100 pool, two ClusterQueues in the
    cohort ml-org, a LocalQueue per team; admitted Jobs running on h100-pool, pending ones suspended."""
    kv = "kueue.x-k8s.io/v1beta2"
    kueue_mgr = "kueue"
    c.add({"apiVersion": kv, "kind": "ResourceFlavor", "metadata": meta(
        "h100", CREATED + timedelta(hours=2), key=("rf", "h100"), generation=1,
        finalizers=["kueue.x-k8s.io/resource-in-use"],
        managed=[mf("kubectl-client-side-apply", CREATED + timedelta(hours=2), SPEC_F, api=kv)]),
        "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "h100-pool"},
                 "tolerations": [GPU_TOLERATION]}})
    quota = [{"name": "cpu", "nominalQuota": "800"}, {"name": "memory", "nominalQuota": "6800Gi"},
             {"name": "nvidia.com/gpu", "nominalQuota": "32"}]
    for team, used, pending, admitted_n in (("team-a", (1, 96 * 4, 800 * 4, 32), 1, 1),
                                            ("team-b", (2, 96 * 4, 800 * 4, 32), 2, 2)):
        cq_t = CREATED + timedelta(hours=2, minutes=1)
        c.add({"apiVersion": kv, "kind": "ClusterQueue", "metadata": meta(
            team, cq_t, key=("cq", team), generation=1, finalizers=["kueue.x-k8s.io/resource-in-use"],
            managed=[mf("kubectl-client-side-apply", cq_t, SPEC_F, api=kv),
                     mf(kueue_mgr, NOW, STATUS_F, "status", kv)]),
            "spec": {"cohortName": "ml-org", "flavorFungibility": {"whenCanBorrow": "MayStopSearch",
                                                                   "whenCanPreempt": "TryNextFlavor"},
                     "namespaceSelector": {"matchLabels": {"kueue.x-k8s.io/team": team}},
                     "preemption": {"borrowWithinCohort": {"policy": "Never"}, "reclaimWithinCohort": "Any",
                                    "withinClusterQueue": "LowerPriority"},
                     "queueingStrategy": "BestEffortFIFO",
                     "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
                         {"name": "h100", "resources": quota}]}], "stopPolicy": "None"},
            "status": {"admittedWorkloads": admitted_n, "conditions": [{
                "lastTransitionTime": ts(cq_t), "message": "Can admit new workloads", "observedGeneration": 1,
                "reason": "Ready", "status": "True", "type": "Active"}],
                "flavorsReservation": [{"name": "h100", "resources": [
                    {"borrowed": "0", "name": "cpu", "total": str(used[1])},
                    {"borrowed": "0", "name": "memory", "total": f"{used[2]}Gi"},
                    {"borrowed": "0", "name": "nvidia.com/gpu", "total": str(used[3])}]}],
                "pendingWorkloads": pending, "reservingWorkloads": admitted_n}})
        c.add({"apiVersion": kv, "kind": "LocalQueue", "metadata": meta(
            "main", cq_t, ns=team, generation=1, managed=[mf("kubectl-client-side-apply", cq_t, SPEC_F, api=kv)]),
            "spec": {"clusterQueue": team, "stopPolicy": "None"},
            "status": {"admittedWorkloads": admitted_n, "pendingWorkloads": pending,
                       "reservingWorkloads": admitted_n, "conditions": [{
                           "lastTransitionTime": ts(cq_t), "message": "Can submit new workloads",
                           "observedGeneration": 1, "reason": "Ready", "status": "True", "type": "Active"}]}})
    h100 = c.pool_nodes["h100-pool"]
    # (team, job, pods, created minutes ago, admitted); admitted jobs fill h100-pool's 8 nodes
    jobs = [("team-a", "finetune-llama-70b", 4, 95, True), ("team-b", "sweep-lr-1", 2, 70, True),
            ("team-b", "sweep-lr-2", 2, 60, True), ("team-a", "eval-mmlu", 1, 40, False),
            ("team-b", "sweep-lr-3", 2, 30, False), ("team-b", "sweep-lr-4", 2, 25, False)]
    free = iter(h100)
    for team, name, n, minutes, admitted in jobs:
        created = ago(minutes)
        started = created + timedelta(seconds=2)
        juid = uid(team, "job", name)
        req = {"cpu": "96", "memory": "800Gi", "nvidia.com/gpu": "8"}
        tmpl_labels = {"batch.kubernetes.io/controller-uid": juid, "batch.kubernetes.io/job-name": name,
                       "controller-uid": juid, "job-name": name, "kueue.x-k8s.io/queue-name": "main"}
        cont = container("trainer", f"us-docker.pkg.dev/{PROJECT}/train/{name.split('-')[0]}:2026.11", req,
                         {"nvidia.com/gpu": "8"}, command=["torchrun", "--nproc-per-node=8", "train.py"])
        tspec = {"containers": [cont], "dnsPolicy": "ClusterFirst", "restartPolicy": "Never",
                 "schedulerName": "default-scheduler", "securityContext": {}, "terminationGracePeriodSeconds": 30,
                 "tolerations": [GPU_TOLERATION]}
        if admitted:  # Kueue's podset.Merge: the flavor's nodeLabels and tolerations into the template
            tspec["nodeSelector"] = {"cloud.google.com/gke-nodepool": "h100-pool"}
            tspec = dict(sorted(tspec.items()))
        job_labels = {"kueue.x-k8s.io/queue-name": "main"}
        jstatus: Obj
        if admitted:
            jstatus = {"active": n, "conditions": [{
                "lastProbeTime": ts(started), "lastTransitionTime": ts(started), "message": "Job resumed",
                "reason": "JobResumed", "status": "False", "type": "Suspended"}], "ready": n, "startTime": ts(started),
                "terminating": 0, "uncountedTerminatedPods": {}}
        else:
            jstatus = {"conditions": [{
                "lastProbeTime": ts(created), "lastTransitionTime": ts(created), "message": "Job suspended",
                "reason": "JobSuspended", "status": "True", "type": "Suspended"}]}
        job = c.add({"apiVersion": "batch/v1", "kind": "Job", "metadata": {**meta(
            name, created, ns=team, labels=job_labels, generation=2 if admitted else 1,
            managed=[mf("kubectl-client-side-apply", created, {"f:spec": {"f:template": {}}}, api="batch/v1"),
                     *([mf("kueue", started, {"f:spec": {"f:suspend": {}, "f:template": {"f:spec": {
                         "f:nodeSelector": {}}}}}, api="batch/v1")] if admitted else []),
                     mf("kube-controller-manager", started, {"f:status": {"f:conditions": {}}}, "status",
                        "batch/v1")]), "uid": juid},
            "spec": {"backoffLimit": 6, "completionMode": "Indexed", "completions": n, "manualSelector": False,
                     "parallelism": n, "podReplacementPolicy": "TerminatingOrFailed", "selector": {
                         "matchLabels": {"batch.kubernetes.io/controller-uid": juid}}, "suspend": not admitted,
                     "template": {"metadata": {"creationTimestamp": None, "labels": tmpl_labels}, "spec": tspec}},
            "status": jstatus})
        wl_name = workload_name("Job", "batch", name, juid)
        podset_tmpl = {"metadata": {"labels": tmpl_labels}, "spec": {k: v for k, v in tspec.items()
                                                                     if k != "nodeSelector"}}
        wl_status: Obj
        if admitted:
            wl_status = {"admission": {"clusterQueue": team, "podSetAssignments": [{
                "count": n, "flavors": {"cpu": "h100", "memory": "h100", "nvidia.com/gpu": "h100"}, "name": "main",
                "resourceUsage": {"cpu": str(96 * n), "memory": f"{800 * n}Gi", "nvidia.com/gpu": str(8 * n)}}]},
                "conditions": [
                    {"lastTransitionTime": ts(started), "message": f"Quota reserved in ClusterQueue {team}",
                     "observedGeneration": 1, "reason": "QuotaReserved", "status": "True", "type": "QuotaReserved"},
                    {"lastTransitionTime": ts(started), "message": "The workload is admitted",
                     "observedGeneration": 1, "reason": "Admitted", "status": "True", "type": "Admitted"}]}
        else:
            wl_status = {"conditions": [{
                "lastTransitionTime": ts(created + timedelta(seconds=1)), "message":
                "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
                f"h100, {8 * n} more needed", "observedGeneration": 1, "reason": "WaitingForQuota",
                "status": "False", "type": "QuotaReserved"}],
                "resourceRequests": [{"name": "main", "resources": {"cpu": str(96 * n), "memory": f"{800 * n}Gi",
                                                                    "nvidia.com/gpu": str(8 * n)}}]}
        c.add({"apiVersion": kv, "kind": "Workload", "metadata": meta(
            wl_name, created + timedelta(seconds=1), ns=team, key=(team, "wl", name), generation=1,
            labels={"kueue.x-k8s.io/job-uid": juid}, owner=ref("batch/v1", "Job", job),
            finalizers=["kueue.x-k8s.io/resource-in-use"] if admitted else None,
            managed=[mf("kueue", created + timedelta(seconds=1), {"f:spec": {"f:podSets": {}}}, api=kv),
                     mf("kueue-admission", started, STATUS_F, "status", kv, "Apply")]),
            "spec": {"active": True, "podSets": [{"count": n, "name": "main", "template": podset_tmpl}],
                     "priority": 0, "queueName": "main"}, "status": wl_status})
        if not admitted:
            continue
        for i in range(n):
            pspec = pod_spec([cont], hostname=f"{name}-{i}", restartPolicy="Never", subdomain=name,
                             nodeSelector=tspec["nodeSelector"], tolerations=[GPU_TOLERATION, *TOLERATE_NOT_READY])
            c.pod(f"{name}-{i}-{suffix(5, team, name, i)}", team, pspec, next(free), started + timedelta(seconds=4),
                  labels={**tmpl_labels, "batch.kubernetes.io/job-completion-index": str(i),
                          "job-completion-index": str(i)},
                  ann={"batch.kubernetes.io/job-completion-index": str(i)}, owner=ref("batch/v1", "Job", job),
                  created=started + timedelta(seconds=1))


def workload_name(kind: str, group: str, name: str, job_uid: str) -> str:
    """Kueue's GetWorkloadNameForOwnerWithGVK (pkg/controller/jobframework/workload_names.go): lower(kind)-name,
    then the first 5 hex digits of sha1 over kind, group, name and uid."""
    digest = hashlib.sha1("\n".join((kind, group, name, job_uid)).encode()).hexdigest()
    return f"{kind.lower()}-{name}"[:57] + "-" + digest[:5]


def dra(c: Cluster) -> None:
    """The NVIDIA DRA driver's DeviceClasses (its helm chart) and one ResourceSlice per node of h100-dra (its
    kubelet plugin: pool named after the node, owned by the Node), a Deployment of 2 vLLM servers each holding 4
    GPUs through a claim from a ResourceClaimTemplate, and a notebook pod holding a named claim of 2 GPUs."""
    rv1 = "resource.k8s.io/v1"
    helm = CREATED + timedelta(hours=1)
    for name, expr in nvidia.catalog()["deviceClasses"].items():
        c.add({"apiVersion": rv1, "kind": "DeviceClass", "metadata": meta(
            name, helm, key=("dc", name), generation=1, labels={"app.kubernetes.io/managed-by": "Helm"},
            ann={"meta.helm.sh/release-name": "nvidia-dra-driver-gpu",
                 "meta.helm.sh/release-namespace": "nvidia-dra-driver-gpu"},
            managed=[mf("helm", helm, SPEC_F, api=rv1)]), "spec": {"selectors": [{"cel": {"expression": expr}}]}})
    slices = {}
    for node_name in c.pool_nodes["h100-dra"]:
        n = c.nodes[node_name]
        born = datetime.fromisoformat(n["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        published = born + timedelta(minutes=5)
        name = f"{node_name}-gpu.nvidia.com-{suffix(5, 'slice', node_name)}"
        devices = nvidia.devices(node_name, "nvidia-h100-80gb", 8)
        slices[node_name] = devices
        c.add({"apiVersion": rv1, "kind": "ResourceSlice", "metadata": {**meta(
            name, published, key=("slice", node_name), generation=1,
            owner={"apiVersion": "v1", "controller": True, "kind": "Node", "name": node_name,
                   "uid": n["metadata"]["uid"]},
            managed=[mf("gpu-kubelet-plugin", published, SPEC_F, api=rv1)])},
            "spec": {"devices": devices, "driver": "gpu.nvidia.com", "nodeName": node_name,
                     "pool": {"generation": 1, "name": node_name, "resourceSliceCount": 1}}})
    ns = "ml-dra"
    t0 = ago(50)
    tmpl = c.add({"apiVersion": rv1, "kind": "ResourceClaimTemplate", "metadata": meta(
        "four-h100", t0 - timedelta(minutes=3), ns=ns, managed=[
            mf("kubectl-client-side-apply", t0 - timedelta(minutes=3), SPEC_F, api=rv1)]),
        "spec": {"spec": {"devices": {"requests": [{"exactly": {
            "allocationMode": "ExactCount", "count": 4, "deviceClassName": "gpu.nvidia.com"}, "name": "gpu"}]}}}})
    claims = [{"name": "gpu", "resourceClaimTemplateName": tmpl["metadata"]["name"]}]
    dra_nodes = c.pool_nodes["h100-dra"]
    spec = pod_spec([container("vllm", "vllm/vllm-openai:v0.11.0", {"cpu": "48", "memory": "400Gi"},
                               args=["meta-llama/Llama-3.3-70B-Instruct", "--tensor-parallel-size=4"])],
                    resourceClaims=claims, tolerations=[GPU_TOLERATION, *TOLERATE_NOT_READY])
    spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    spec["containers"][0]["resources"] = dict(sorted(spec["containers"][0]["resources"].items()))
    pods = c.deployment("llama-70b-dra", ns, 2, spec, dra_nodes, t0, {"app": "llama-70b-dra"}, claims)
    for p in pods:
        node_name = p["spec"]["nodeName"]
        cname = p["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        claim(c, cname, ns, p, node_name, [d["name"] for d in slices[node_name][:4]], {
            "devices": {"requests": [{"exactly": {"allocationMode": "ExactCount", "count": 4,
                                                  "deviceClassName": "gpu.nvidia.com"}, "name": "gpu"}]}},
            generated=True)
    # a notebook holding a named claim: 2 GPUs on the first DRA node, next to the first server's 4
    named = {"devices": {"requests": [{"exactly": {"allocationMode": "ExactCount", "count": 2,
                                                   "deviceClassName": "gpu.nvidia.com"}, "name": "gpus"}]}}
    nb_spec = pod_spec([container("jupyter", "quay.io/jupyter/pytorch-notebook:cuda12-2025-11-24",
                                  {"cpu": "16", "memory": "128Gi"})],
                       resourceClaims=[{"name": "gpus", "resourceClaimName": "alice-gpus"}],
                       tolerations=[GPU_TOLERATION, *TOLERATE_NOT_READY])
    nb_spec["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    nb_spec["containers"][0]["resources"] = dict(sorted(nb_spec["containers"][0]["resources"].items()))
    nb = c.pod("notebook-alice", ns, nb_spec, dra_nodes[0], ago(30), labels={"app": "notebook", "user": "alice"})
    claim(c, "alice-gpus", ns, nb, dra_nodes[0], [d["name"] for d in slices[dra_nodes[0]][4:6]], named,
          generated=False)


def claim(c: Cluster, name: str, ns: str, pod: Obj, node_name: str, devices: list[str], spec: Obj,
          generated: bool) -> None:
    """An allocated ResourceClaim reserved for its pod (status.allocation with devices.results and the node's
    nodeSelector, status.reservedFor), as the scheduler's DynamicResources plugin writes it."""
    rv1 = "resource.k8s.io/v1"
    t = datetime.fromisoformat(pod["status"]["startTime"].replace("Z", "+00:00")) - timedelta(seconds=1)
    created = datetime.fromisoformat(pod["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    if not generated:
        created -= timedelta(minutes=2)
    request = spec["devices"]["requests"][0]["name"]
    c.add({"apiVersion": rv1, "kind": "ResourceClaim", "metadata": meta(
        name, created, ns=ns, finalizers=["resource.kubernetes.io/delete-protection"],
        ann={"resource.kubernetes.io/pod-claim-name": request} if generated else None,
        owner=ref("v1", "Pod", pod) if generated else None,
        managed=[mf("kube-controller-manager" if generated else "kubectl-client-side-apply", created, SPEC_F,
                    api=rv1),
                 mf("kube-scheduler", t, {"f:status": {"f:allocation": {}, "f:reservedFor": {}}}, "status", rv1)]),
        "spec": spec, "status": {"allocation": {"devices": {"results": [
            {"device": d, "driver": "gpu.nvidia.com", "pool": node_name, "request": request} for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                                     "values": [node_name]}]}]}},
            "reservedFor": [{"name": pod["metadata"]["name"], "resource": "pods", "uid": pod["metadata"]["uid"]}]}})


def workloads(c: Cluster) -> None:
    sysn = c.pool_nodes["system-pool"]
    dns = pod_spec([container("kubedns", "gke.gcr.io/k8s-dns-kube-dns:1.26.4-gke.2", {"cpu": "100m",
                                                                                       "memory": "70Mi"},
                              {"memory": "210Mi"})], priority=2000000000, priorityClassName="system-cluster-critical",
                   serviceAccount="kube-dns", serviceAccountName="kube-dns",
                   tolerations=[{"key": "CriticalAddonsOnly", "operator": "Exists"}, *TOLERATE_NOT_READY])
    c.deployment("kube-dns", "kube-system", 2, dns, sysn, CREATED + timedelta(minutes=20), {"k8s-app": "kube-dns"})
    kq = pod_spec([container("manager", "registry.k8s.io/kueue/kueue:v0.15.2", {"cpu": "500m", "memory": "512Mi"},
                             {"cpu": "2", "memory": "2Gi"})], serviceAccount="kueue-controller-manager",
                  serviceAccountName="kueue-controller-manager")
    c.deployment("kueue-controller-manager", "kueue-system", 1, kq, sysn[1:], CREATED + timedelta(hours=1, minutes=50),
                 {"app.kubernetes.io/component": "controller", "app.kubernetes.io/name": "kueue",
                  "control-plane": "controller-manager"})
    l4 = c.pool_nodes["l4-spot"]
    # two servers per L4 node on 12 of the 16 nodes: 24 of 32 L4s in use
    vllm = pod_spec([container("vllm", "vllm/vllm-openai:v0.11.0", {"cpu": "8", "memory": "40Gi",
                                                                    "nvidia.com/gpu": "1"},
                               {"nvidia.com/gpu": "1"}, args=["meta-llama/Llama-3.1-8B-Instruct",
                                                              "--max-model-len=8192"])],
                    nodeSelector={"cloud.google.com/gke-accelerator": "nvidia-l4"},
                    tolerations=[GPU_TOLERATION, SPOT_TOLERATION, *TOLERATE_NOT_READY])
    c.deployment("llama-8b-vllm", "ml-serving", 24, vllm, l4[:12], ago(300), {"app": "llama-8b-vllm"})
    emb = pod_spec([container("tei", "ghcr.io/huggingface/text-embeddings-inference:cpu-1.8", {
        "cpu": "4", "memory": "8Gi"})])
    c.deployment("embeddings", "ml-serving", 6, emb, c.pool_nodes["cpu-pool"], ago(600), {"app": "embeddings"})
    # a pod waiting: asks more CPU than any CPU node has free
    prep = pod_spec([container("prep", f"us-docker.pkg.dev/{PROJECT}/data/tokenize:2026.11",
                               {"cpu": "14", "memory": "48Gi"})], restartPolicy="Never")
    c.pod("tokenize-shard-7", "ml-serving", prep, None, None, created=ago(3))


def jobset(c: Cluster) -> None:
    """A JobSet (jobset.x-k8s.io/v1alpha2, as its webhook defaults it) of offline batch inference on the 4 L4 Spot
    nodes the vLLM servers leave free: replicatedJob `shard`, 2 Indexed Jobs of 2 pods with 2 L4s each; the Jobs and
    pods labelled and annotated as the JobSet controller's constructJob does (job-key: sha1 of namespace/job)."""
    ns, name, rj, replicas, per_job = "ml-serving", "llm-eval", "shard", 2, 2
    created = ago(35)
    free = c.pool_nodes["l4-spot"][12:]
    cont = container("infer", f"us-docker.pkg.dev/{PROJECT}/eval/batch-infer:2026.11", {
        "cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "2"},
        command=["python", "-m", "batch_infer", "--model=google/gemma-3-12b-it", "--shard=$(JOB_COMPLETION_INDEX)"])
    tolerations = [GPU_TOLERATION, SPOT_TOLERATION]
    job_tmpl = {"spec": {"backoffLimit": 0, "completionMode": "Indexed", "completions": per_job,
                         "parallelism": per_job, "template": {"metadata": {"creationTimestamp": None}, "spec": {
                             "containers": [cont], "restartPolicy": "Never", "tolerations": tolerations}}}}
    js = c.add({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta(
        name, created, ns=ns, generation=1, managed=[
            mf("kubectl-client-side-apply", created, SPEC_F, api="jobset.x-k8s.io/v1alpha2"),
            mf("manager", created + timedelta(minutes=2), {"f:status": {"f:replicatedJobsStatus": {}}}, "status",
               "jobset.x-k8s.io/v1alpha2")]),
        "spec": {"network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
                 "replicatedJobs": [{"groupName": "default", "name": rj, "replicas": replicas, "template": job_tmpl}],
                 "startupPolicy": {"startupPolicyOrder": "AnyOrder"}, "successPolicy": {"operator": "All"},
                 "suspend": False},
        "status": {"replicatedJobsStatus": [{"active": replicas, "failed": 0, "name": rj, "ready": replicas,
                                             "succeeded": 0, "suspended": 0}], "restarts": 0}})
    node_i = 0
    for idx in range(replicas):
        jname = f"{name}-{rj}-{idx}"
        keys = {"jobset.sigs.k8s.io/global-replicas": str(replicas), "jobset.sigs.k8s.io/job-global-index": str(idx),
                "jobset.sigs.k8s.io/job-index": str(idx),
                "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{ns}/{jname}".encode()).hexdigest(),
                "jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": rj,
                "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas), "jobset.sigs.k8s.io/restart-attempt": "0"}
        juid = uid(ns, "job", jname)
        batch = {"batch.kubernetes.io/controller-uid": juid, "batch.kubernetes.io/job-name": jname,
                 "controller-uid": juid, "job-name": jname}
        tspec = {"containers": [cont], "dnsPolicy": "ClusterFirst", "restartPolicy": "Never",
                 "schedulerName": "default-scheduler", "securityContext": {}, "subdomain": name,
                 "terminationGracePeriodSeconds": 30, "tolerations": tolerations}
        started = created + timedelta(seconds=3)
        job = c.add({"apiVersion": "batch/v1", "kind": "Job", "metadata": {**meta(
            jname, created + timedelta(seconds=1), ns=ns, labels=keys, ann=dict(keys), generation=1,
            owner=ref("jobset.x-k8s.io/v1alpha2", "JobSet", js),
            managed=[mf("manager", created + timedelta(seconds=1), {"f:spec": {"f:template": {}}}, api="batch/v1"),
                     mf("kube-controller-manager", started, {"f:status": {"f:active": {}}}, "status", "batch/v1")]),
            "uid": juid},
            "spec": {"backoffLimit": 0, "completionMode": "Indexed", "completions": per_job, "manualSelector": False,
                     "parallelism": per_job, "podReplacementPolicy": "TerminatingOrFailed",
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": juid}}, "suspend": False,
                     "template": {"metadata": {"annotations": dict(keys), "creationTimestamp": None,
                                               "labels": {**keys, **batch}}, "spec": tspec}},
            "status": {"active": per_job, "ready": per_job, "startTime": ts(started), "terminating": 0,
                       "uncountedTerminatedPods": {}}})
        for i in range(per_job):
            pspec = pod_spec([cont], hostname=f"{jname}-{i}", restartPolicy="Never", subdomain=name,
                             tolerations=[*tolerations, *TOLERATE_NOT_READY])
            c.pod(f"{jname}-{i}-{suffix(5, ns, jname, i)}", ns, pspec, free[node_i], started + timedelta(seconds=2),
                  labels={**keys, **batch, "batch.kubernetes.io/job-completion-index": str(i),
                          "job-completion-index": str(i)},
                  ann={**keys, "batch.kubernetes.io/job-completion-index": str(i)},
                  owner=ref("batch/v1", "Job", job), created=started)
            node_i += 1


def namespaces(c: Cluster) -> None:
    for ns, extra in (("default", {}), ("kube-system", {}), ("kueue-system", {}), ("ml-dra", {}),
                      ("ml-serving", {}), ("nvidia-dra-driver-gpu", {}),
                      ("team-a", {"kueue.x-k8s.io/team": "team-a"}), ("team-b", {"kueue.x-k8s.io/team": "team-b"})):
        t = CREATED + timedelta(minutes=1 if ns in ("default", "kube-system") else 90)
        c.add({"apiVersion": "v1", "kind": "Namespace", "metadata": meta(
            ns, t, labels={**extra, "kubernetes.io/metadata.name": ns}, key=("ns", ns),
            managed=[mf("kube-apiserver" if ns in ("default", "kube-system") else "kubectl-create", t, LABELS_F)]),
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    for name, default, typ in (("premium-rwo", False, "pd-ssd"), ("standard", False, "pd-standard"),
                               ("standard-rwo", True, "pd-balanced")):
        c.add({"allowVolumeExpansion": True, "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": meta(name, CREATED, key=("sc", name), labels={"addonmanager.kubernetes.io/mode":
                                                                           "EnsureExists"},
                                ann={"components.gke.io/component-name": "pdcsi",
                                     "storageclass.kubernetes.io/is-default-class": str(default).lower()},
                                managed=[mf("kube-addon-manager", CREATED, LABELS_F, api="storage.k8s.io/v1")]),
               "parameters": {"type": typ}, "provisioner": "pd.csi.storage.gke.io" if name != "standard" else
               "kubernetes.io/gce-pd", "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"})


def build() -> list[Obj]:
    c = Cluster()
    namespaces(c)
    c.make_nodes()
    c.system_pods()
    workloads(c)
    jobset(c)
    kueue(c)
    dra(c)
    return c.objs


ORDER = ["Namespace", "Node", "StorageClass", "Deployment", "ReplicaSet", "JobSet", "Job", "ResourceFlavor",
         "ClusterQueue", "LocalQueue", "Workload", "DeviceClass", "ResourceSlice", "ResourceClaimTemplate",
         "ResourceClaim", "Pod"]
SIMULATOR = {"Pod": "pods", "Node": "nodes", "Namespace": "namespaces", "StorageClass": "storageClasses"}


def ordered(objs: list[Obj]) -> list[Obj]:
    """kubectl get a,b,c prints kind by kind in the order asked, each kind sorted by namespace and name."""
    return sorted(objs, key=lambda o: (ORDER.index(o["kind"]), o["metadata"].get("namespace", ""),
                                       o["metadata"]["name"]))


def kubectl_list(objs: list[Obj]) -> str:
    """kubectl -o json: a v1 List of unstructured objects, so every map's keys sorted (encoding/json), apiVersion/
    items/kind/metadata; kubectl indents by 4 (printers.JSONPrinter), this file is compact to stay small."""
    return json.dumps({"apiVersion": "v1", "items": sorted_keys(objs), "kind": "List",
                       "metadata": {"resourceVersion": ""}}, separators=(",", ":")) + "\n"


def sorted_keys(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: sorted_keys(o[k]) for k in sorted(o)}
    if isinstance(o, list):
        return [sorted_keys(v) for v in o]
    return o


def kwokctl(objs: list[Obj]) -> str:
    """kwokctl snapshot save --format k8s: one document per object, resourceVersion cleared, sigs.k8s.io/yaml's
    marshalling (keys sorted, block style), `---` between documents."""
    docs = []
    for o in objs:
        o = copy.deepcopy(o)
        o["metadata"].pop("resourceVersion", None)
        docs.append(yaml.safe_dump(sorted_keys(o), sort_keys=True, default_flow_style=False, width=10**6))
    return "---\n".join(docs)


def simulator(objs: list[Obj]) -> str:
    """GET /api/v1/export: ResourcesForSnap's lists, their items without apiVersion/kind (typed List calls)."""
    out: Obj = {k: [] for k in ("pods", "nodes", "pvs", "pvcs", "storageClasses", "priorityClasses")}
    out["schedulerConfig"] = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                              "parallelism": 16, "profiles": [{"schedulerName": "default-scheduler"}]}
    out["namespaces"] = []
    for o in objs:
        key = SIMULATOR.get(o["kind"])
        if key:
            out[key].append({k: v for k, v in o.items() if k not in ("apiVersion", "kind")})
    return json.dumps(out, separators=(",", ":")) + "\n"


def write(other: Path | None = None) -> list[Path]:
    """examples/your-cluster/cluster.json (the kubectl dump, committed); with `other`, the kwokctl snapshot and the
    simulator's export (with a kubectl dump of the kinds it does not export) in that folder (tests write them to a
    temporary folder: the same cluster, generated rather than kept in the repo three times)."""
    objs = ordered(build())
    out = ROOT / "examples" / "your-cluster" / "cluster.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(kubectl_list(objs))
    paths = [out]
    if other is not None:
        other.mkdir(parents=True, exist_ok=True)
        for name, text in (("gke-large-kwokctl.yaml", kwokctl(objs)),
                           ("gke-large-simulator-export.json", simulator(objs)),
                           ("gke-large-simulator-rest.json", kubectl_list([o for o in objs
                                                                            if o["kind"] not in SIMULATOR]))):
            (other / name).write_text(text)
            paths.append(other / name)
    return paths


if __name__ == "__main__":
    import sys

    for p in write(Path(sys.argv[1]) if len(sys.argv) > 1 else None):
        print(p)
