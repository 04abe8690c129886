"""Fluent builders for Kueue manifests in their real shape (like Kueue's pkg/util/testing wrappers).

    make_cq("eng-alpha").cohort("eng").flavor("on-demand", cpu=("50", "50")).obj()
    make_wl("eng-alpha", "new").queue("main").podset("one", 51, cpu="1").obj()
    make_lq("main", "eng-alpha").cluster_queue("eng-alpha").obj()

A quota is "nominal" or (nominal, borrowingLimit[, lendingLimit]) with None for unset, as Kueue's
``Resource(name, nominal, borrowingLimit, lendingLimit)``.
"""

from __future__ import annotations

from k8s_builders import PriorityClassWrapper, Wrapper

from kubetwin.kueue.api import amount, format_amount, format_time

V1BETA2 = "kueue.x-k8s.io/v1beta2"
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def _quota(res: str, q) -> dict:
    if isinstance(q, str | int):
        q = (q,)
    out = {"name": res, "nominalQuota": str(q[0])}
    if len(q) > 1 and q[1] is not None:
        out["borrowingLimit"] = str(q[1])
    if len(q) > 2 and q[2] is not None:
        out["lendingLimit"] = str(q[2])
    return out


class _QuotaWrapper(Wrapper):
    def __init__(self, kind: str, name: str) -> None:
        super().__init__({"apiVersion": V1BETA2, "kind": kind, "metadata": {"name": name}, "spec": {}})

    def flavor(self, name: str, res: dict | None = None, **quotas) -> _QuotaWrapper:
        """Add a flavor's quotas; it joins the last resource group when it covers the same resources."""
        quotas = {**(res or {}), **quotas}
        fq = {"name": name, "resources": [_quota(r, q) for r, q in quotas.items()]}
        groups = self._obj["spec"].setdefault("resourceGroups", [])
        covered = list(quotas)
        if groups and groups[-1]["coveredResources"] == covered:
            groups[-1]["flavors"].append(fq)
        else:
            groups.append({"coveredResources": covered, "flavors": [fq]})
        return self

    def new_group(self, name: str, res: dict | None = None, **quotas) -> _QuotaWrapper:
        """A flavor that starts a new resource group even if it covers the same resources (rejected by the CRD)."""
        quotas = {**(res or {}), **quotas}
        self._obj["spec"].setdefault("resourceGroups", []).append(
            {"coveredResources": list(quotas), "flavors": [{"name": name, "resources": [
                _quota(r, q) for r, q in quotas.items()]}]})
        return self

    def weight(self, w: str) -> _QuotaWrapper:
        self._obj["spec"]["fairSharing"] = {"weight": w}
        return self


class ClusterQueueWrapper(_QuotaWrapper):
    def __init__(self, name: str) -> None:
        super().__init__("ClusterQueue", name)
        self._obj["spec"]["namespaceSelector"] = {}

    def cohort(self, name: str) -> ClusterQueueWrapper:
        self._obj["spec"]["cohortName"] = name
        return self

    def strategy(self, s: str) -> ClusterQueueWrapper:
        self._obj["spec"]["queueingStrategy"] = s
        return self

    def namespace_selector(self, selector: dict | None) -> ClusterQueueWrapper:
        if selector is None:
            self._obj["spec"].pop("namespaceSelector", None)
        else:
            self._obj["spec"]["namespaceSelector"] = selector
        return self

    def dep(self, *values: str) -> ClusterQueueWrapper:
        return self.namespace_selector({"matchExpressions": [{"key": "dep", "operator": "In", "values": list(values)}]})

    def preemption(self, within: str | None = None, reclaim: str | None = None, bwc: str | None = None,
                   threshold: int | None = None) -> ClusterQueueWrapper:
        p: dict = {}
        if within:
            p["withinClusterQueue"] = within
        if reclaim:
            p["reclaimWithinCohort"] = reclaim
        if bwc:
            p["borrowWithinCohort"] = {"policy": bwc}
            if threshold is not None:
                p["borrowWithinCohort"]["maxPriorityThreshold"] = threshold
        self._obj["spec"]["preemption"] = p
        return self

    def fungibility(self, when_can_borrow: str | None = None, when_can_preempt: str | None = None,
                    preference: str | None = None) -> ClusterQueueWrapper:
        ff = {k: v for k, v in (("whenCanBorrow", when_can_borrow), ("whenCanPreempt", when_can_preempt),
                                ("preference", preference)) if v}
        self._obj["spec"]["flavorFungibility"] = ff
        return self


class CohortWrapper(_QuotaWrapper):
    def __init__(self, name: str) -> None:
        super().__init__("Cohort", name)

    def parent(self, name: str) -> CohortWrapper:
        self._obj["spec"]["parentName"] = name
        return self


def make_cq(name: str) -> ClusterQueueWrapper:
    return ClusterQueueWrapper(name)


def make_cohort(name: str) -> CohortWrapper:
    return CohortWrapper(name)


class ResourceFlavorWrapper(Wrapper):
    def node_labels(self, labels: dict) -> ResourceFlavorWrapper:
        self._obj["spec"]["nodeLabels"] = labels
        return self

    def taints(self, taints: list) -> ResourceFlavorWrapper:
        self._obj["spec"]["nodeTaints"] = taints
        return self

    def tolerations(self, tolerations: list) -> ResourceFlavorWrapper:
        self._obj["spec"]["tolerations"] = tolerations
        return self

    def topology_name(self, name: str) -> ResourceFlavorWrapper:
        """spec.topologyName: a TAS flavor (Kueue's ResourceFlavorWrapper.TopologyName)."""
        self._obj["spec"]["topologyName"] = name
        return self


def make_flavor(name: str) -> ResourceFlavorWrapper:
    return ResourceFlavorWrapper({"apiVersion": V1BETA2, "kind": "ResourceFlavor", "metadata": {"name": name},
                                  "spec": {}})


def make_topology(name: str, *levels: str) -> Wrapper:
    """A kueue.x-k8s.io Topology with its levels' node labels, top first (Kueue's MakeTopology(name).Levels())."""
    return Wrapper({"apiVersion": V1BETA2, "kind": "Topology", "metadata": {"name": name},
                    "spec": {"levels": [{"nodeLabel": level} for level in levels]}})


class TopologyNodeWrapper(Wrapper):
    """A v1 Node as Kueue's testingnode.MakeNode builds it: only the labels it is given."""

    def allocatable(self, resources: dict[str, str]) -> TopologyNodeWrapper:
        self._obj["status"]["allocatable"] = dict(resources)
        self._obj["status"]["capacity"] = dict(resources)
        return self

    def ready(self) -> TopologyNodeWrapper:
        self._obj["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        return self

    def not_ready(self) -> TopologyNodeWrapper:
        self._obj["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        return self

    def unschedulable(self) -> TopologyNodeWrapper:
        self._obj["spec"]["unschedulable"] = True
        return self

    def taint(self, key: str, value: str, effect: str) -> TopologyNodeWrapper:
        taint = {"key": key, "effect": effect, **({"value": value} if value else {})}
        self._obj["spec"].setdefault("taints", []).append(taint)
        return self


def make_topology_node(name: str) -> TopologyNodeWrapper:
    return TopologyNodeWrapper({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
                                "spec": {}, "status": {}})


class BoundPodWrapper(Wrapper):
    """A pod already on a node (Kueue's testingpod.MakePod(...).NodeName().Request().StatusPhase())."""

    def node_name(self, node: str) -> BoundPodWrapper:
        self._obj["spec"]["nodeName"] = node
        return self

    def request(self, res: str, q: str) -> BoundPodWrapper:
        self._obj["spec"]["containers"][0]["resources"].setdefault("requests", {})[res] = q
        return self

    def phase(self, phase: str) -> BoundPodWrapper:
        self._obj["status"]["phase"] = phase
        return self


def make_bound_pod(name: str, ns: str = "test-ns") -> BoundPodWrapper:
    return BoundPodWrapper({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {}}]},
                            "status": {}})


class LocalQueueWrapper(Wrapper):
    def cluster_queue(self, name: str) -> LocalQueueWrapper:
        self._obj["spec"]["clusterQueue"] = name
        return self

    def create_at(self, t: str) -> LocalQueueWrapper:
        return self.annotation("kubetwin.io/create-at", t)


def make_lq(name: str, ns: str = "default") -> LocalQueueWrapper:
    """Kueue's MakeLocalQueue(name, ns).ClusterQueue(cq)."""
    return LocalQueueWrapper({"apiVersion": V1BETA2, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
                              "spec": {}})


class WorkloadWrapper(Wrapper):
    def __init__(self, namespace: str, name: str) -> None:
        super().__init__({"apiVersion": V1BETA2, "kind": "Workload",
                          "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{namespace}-{name}",
                                       "creationTimestamp": format_time(NOW)},
                          "spec": {"podSets": [], "priority": 0}, "status": {}})

    def queue(self, name: str) -> WorkloadWrapper:
        self._obj["spec"]["queueName"] = name
        return self

    def priority(self, p: int) -> WorkloadWrapper:
        self._obj["spec"]["priority"] = p
        return self

    def uid(self, uid: str) -> WorkloadWrapper:
        self._obj["metadata"]["uid"] = uid
        return self

    def job_uid(self, uid: str) -> WorkloadWrapper:
        self._obj["metadata"].setdefault("labels", {})["kueue.x-k8s.io/job-uid"] = uid
        return self

    def created(self, t: float) -> WorkloadWrapper:
        self._obj["metadata"]["creationTimestamp"] = format_time(t)
        return self

    def podset(self, name: str, count: int, min_count: int | None = None, res: dict | None = None,
               node_selector: dict | None = None, tolerations: list | None = None, **requests: str) -> WorkloadWrapper:
        requests = {**(res or {}), **requests}
        spec: dict = {"containers": [{"name": "c", "resources": {"requests": dict(requests)}}]}
        if node_selector:
            spec["nodeSelector"] = node_selector
        if tolerations:
            spec["tolerations"] = tolerations
        ps: dict = {"name": name, "count": count, "template": {"spec": spec}}
        if min_count is not None:
            ps["minCount"] = min_count
        self._obj["spec"]["podSets"].append(ps)
        return self

    def topology_request(self, pod_set: str, **request) -> WorkloadWrapper:
        """podSets[].topologyRequest in v1beta2 field names (required=..., preferred=..., unconstrained=True,
        podSetSliceRequiredTopology=..., podSetSliceSize=...), as Kueue's PodSetWrapper.RequiredTopologyRequest."""
        ps = next(p for p in self._obj["spec"]["podSets"] if p["name"] == pod_set)
        ps["topologyRequest"] = dict(request)
        return self

    def topology_assignment(self, pod_set: str, levels: list[str], domains: list[tuple[list[str], int]]
                            ) -> WorkloadWrapper:
        """An admitted podSet's topologyAssignment (after ``admitted``), in v1beta1's domains form, which the twin
        reads as Kueue's conversion does."""
        psa = next(p for p in self._obj["status"]["admission"]["podSetAssignments"] if p["name"] == pod_set)
        psa["topologyAssignment"] = {"levels": list(levels),
                                     "domains": [{"values": list(v), "count": c} for v, c in domains]}
        return self

    def request(self, res: str, q: str) -> WorkloadWrapper:
        """A single podSet "main" of one pod, as Kueue's MakeWorkload(...).Request(res, q)."""
        return self.podset("main", 1, res={res: q})

    def admitted(self, cq: str, flavors: dict[str, dict[str, str]], at: float = NOW) -> WorkloadWrapper:
        """status.admission in ``cq`` with flavors per podSet and resource, QuotaReserved/Admitted at ``at``."""
        psas = []
        for ps in self._obj["spec"]["podSets"]:
            reqs = ps["template"]["spec"]["containers"][0]["resources"]["requests"]
            fl = flavors[ps["name"]]
            usage = {r: format_amount(r, amount(r, q) * ps["count"]) for r, q in reqs.items() if r in fl}
            psas.append({"name": ps["name"], "flavors": dict(fl), "resourceUsage": usage, "count": ps["count"]})
        self._obj["status"]["admission"] = {"clusterQueue": cq, "podSetAssignments": psas}
        t = format_time(at)
        self._obj["status"]["conditions"] = [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "message": f"Quota reserved in ClusterQueue {cq}", "lastTransitionTime": t},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted",
             "lastTransitionTime": t}]
        return self


def make_wl(namespace: str, name: str) -> WorkloadWrapper:
    return WorkloadWrapper(namespace, name)


class ConfigurationWrapper(Wrapper):
    def version(self, v: str) -> ConfigurationWrapper:
        """The config API version (v1beta1 spells some fields differently)."""
        self._obj["apiVersion"] = f"config.kueue.x-k8s.io/{v}"
        return self

    def fields(self, **fields) -> ConfigurationWrapper:
        """Top-level Configuration fields (waitForPodsReady, fairSharing, integrations, featureGates, ...)."""
        self._obj.update(fields)
        return self


def make_configuration() -> ConfigurationWrapper:
    """The Kueue manager's Configuration (config.kueue.x-k8s.io), as given in a scenario."""
    return ConfigurationWrapper({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"})


def make_workload_priority_class(name: str) -> PriorityClassWrapper:
    """Kueue's WorkloadPriorityClass: a priority for workloads only, not for their pods."""
    return PriorityClassWrapper({"apiVersion": V1BETA2, "kind": "WorkloadPriorityClass", "metadata": {"name": name}})


def fair_preemptions_f3() -> list[dict]:
    """Kueue's TestFairPreemptions F3 as a run: three ClusterQueues of 3 cpu in one cohort; a (at nominal) asks for
    1 more cpu at 5m while b borrows 2. Classical preemption cannot take it (borrowWithinCohort only below priority
    -3); fair sharing preempts b's newest."""
    from k8s_builders import make_job, make_pool, make_scenario

    objs = [make_scenario("1h").obj(), make_pool("cpu", "e2-standard-16", 2).obj(), make_flavor("default").obj()]
    objs += [make_cq(n).flavor("default", cpu="3").cohort("all")
             .preemption(within="LowerPriority", reclaim="Any", bwc="LowerPriority", threshold=-3).obj() for n in "abc"]
    objs += [make_lq(n).cluster_queue(n).obj() for n in "abc"]
    objs += [make_job(f"a{i}").queue("a").duration("2h").obj() for i in range(1, 4)]
    objs += [make_job(f"b{i}").queue("b").duration("2h").create_at(f"{i}s").obj() for i in range(1, 6)]
    objs += [make_job("c1").queue("c").duration("2h").obj(),
             make_job("a-incoming").queue("a").duration("2h").create_at("5m").obj()]
    return objs
