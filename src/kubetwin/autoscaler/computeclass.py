"""GKE ComputeClass (`cloud.google.com/v1`) in the cluster autoscaler twin: priority rules that order the node
groups a scale-up may use, fall back down the list, and (activeMigration) move pods back up it.

What it follows (GoogleCloudPlatform/cluster-autoscaler @7d250507, GKE's autoscaler, Apache-2.0; facts only):
- A node pool belongs to a class by its `cloud.google.com/compute-class: <name>` label (labels.ComputeClassLabel;
  GKE asks manually created pools to carry the label and the `cloud.google.com/compute-class=<name>:NoSchedule`
  taint, https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes). Pods select a class
  with that node selector; GKE adds the toleration for the class's taint itself (`admit_pod`), and a Namespace
  labelled `cloud.google.com/default-compute-class: <name>` gives its pods that selector
  (https://cloud.google.com/kubernetes-engine/docs/how-to/run-pods-default-compute-classes).
- Ordering (computeclass/organizer.go OrganizeByCrds, processors/node_group_list_processor.go): each class's pools are
  put in buckets, one per rule group in priority order (crd/ccc/ccc.go GroupedRules: each priority alone, or by
  priorityScore, highest first, when every priority has one); a pool goes in the first bucket whose rule matches it
  (rules/*.go Matches). Pools of the class that match no rule form a last bucket only when `whenUnsatisfiable:
  ScaleUpAnyway`; with DoNotScaleUp (the CRD's default) they are never scaled up. Pools of no class come last. The
  binpacking limiter stops after the first bucket that gave any scale-up option, so the expander chooses within the
  highest-priority rule that can take the pods; a rule whose groups are in backoff (stockout, quota) gives none,
  and the next rule is tried at the next loop: that is the fallback. Upstream shuffles the classes so none starves;
  the twin shuffles them with its own seeded RNG. With the cluster-level default class on
  (`clusterAutoscaler.defaultComputeClass`, gcloud --enable-default-compute-class), the ComputeClass named
  `default` governs the pools without the label (lister/ccc.go GetDefaultCrd) and so the pods that select no
  class; GKE does not change those pods' spec.
- Matching a pool (rules/machine_spec.go, gpu.go, flex_start.go, reservations.go, nodepools.go, placement_policy.go,
  location.go, max_run_duration.go): machineFamily, machineType, spot (when set), minCores and minMemoryGb
  (integer GiB), gpu type/count/driverVersion, flexStart.enabled (a rule without it matches flex-start pools too),
  reservations (the pool's reservationAffinity: None <-> NO_RESERVATION, AnyBestEffort <-> ANY_RESERVATION,
  AnyThenFail <-> ANY_RESERVATION_THEN_FAIL, Specific <-> SPECIFIC_RESERVATION with key
  compute.googleapis.com/reservation-name and the reservation's path; `zones` must cover the pool's zones),
  placement.policyName, location.zones, nodepools (by name), nodeLabels and taints. priorityDefaults fills a
  priority's location and nodeSystemConfig (ccc.go applyDefaultsToPriority). maxRunDurationSeconds matches a pool
  whose maxRunDuration is that many seconds; an enabled flexStart matches a flex-start pool whose recycling lead-time
  label equals the rule's nodeRecycling.leadTimeSeconds (both absent counts as equal).
- Node recycling (defrag/plugins/recycling): a node labelled with a recycle lead time whose
  machine-termination-datetime is nearer than that is replaced and drained, as active migration does
  (autoscaler/cluster_autoscaler.py `recycle`); a failed attempt waits 1 min (BackoffDuration).
- Active migration (defrag/plugins/highprioritymigration, defrag flags): with `activeMigration.optimizeRulePriority`
  a node whose pool is not in the class's first bucket is a candidate (one node at a time,
  --defrag-candidate-node-limit 1); its pods must fit a node of a higher rule's group, which is scaled up; once the
  new node is ready the candidate is drained as a scale-down drains (pods evicted, re-created by their controllers)
  and removed. A failed attempt (the higher rule still out of stock) waits 5 min (BackoffDuration); a new node not
  ready within 10 min (--defrag-scale-up-timeout) ends the attempt.
- autoscalingPolicy (ccc.go ConsolidationDelay/ConsolidationThreshold/GPUConsolidationThreshold): a class's nodes
  use consolidationDelayMinutes as the scale-down unneeded time and the thresholds (percent) as the utilization
  thresholds, in place of the cluster's.

Reserved capacity: a rule's `reservations` matches pools by their reservationAffinity, and those pools' VMs consume
the reservations as any pool's do (autoscaler/reservations.py); a rule whose reservation is full fails with
RESERVATION_CAPACITY_EXCEEDED and the class falls back down its list like for a stockout.

nodePoolAutoCreation: the class's pools are created by node auto-provisioning (autoscaler/nap.py), rule by rule.

Not modelled (validate gives a notice): storage, nodeSystemConfig, minCpuPlatform, minimumCapacity,
ensureAllDaemonSetPodsRunning.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubetwin import catalog
from kubetwin.autoscaler import reservations as rsv
from kubetwin.k8s.names import COMPUTE_CLASS, GKE_NODEPOOL, GKE_RECYCLE_LEAD_TIME
from kubetwin.k8s.units import parse_duration
from kubetwin.store.store import Obj, Store

if TYPE_CHECKING:
    pass

KIND = "ComputeClass"
DEFAULT_CLASS = "default"  # labels.DefaultCCCName
NS_DEFAULT = "cloud.google.com/default-compute-class"
NS_DEFAULT_NON_DS = "cloud.google.com/default-compute-class-non-daemonset"
RESERVATION_NAME_KEY = rsv.NAME_KEY  # gkeclient.ReservationNameKey
PROJECT = rsv.PROJECT  # the cluster's project
AFFINITY = {"None": "NO_RESERVATION", "AnyBestEffort": "ANY_RESERVATION", "AnyThenFail": "ANY_RESERVATION_THEN_FAIL",
            "Specific": "SPECIFIC_RESERVATION"}
DRIVER = {"DEFAULT": "default", "LATEST": "latest", "INSTALLATION_DISABLED": "autoinstall-disabled"}
MIGRATION_BACKOFF = 300.0  # highprioritymigration BackoffDuration
MIGRATION_SCALE_UP_TIMEOUT = 600.0  # --defrag-scale-up-timeout


def class_of(labels_or_selector: dict | None) -> str | None:
    return (labels_or_selector or {}).get(COMPUTE_CLASS)


def priorities(cc: Obj) -> list[dict]:
    """The class's priorities with priorityDefaults applied (ccc.go applyDefaultsToPriority: location,
    nodeSystemConfig, enableNestedVirtualization; not to a priority of nodepools only)."""
    spec = cc.get("spec") or {}
    defaults = spec.get("priorityDefaults") or {}
    out = []
    for p in spec.get("priorities") or []:
        p = dict(p)
        if "nodepools" not in p:
            for k in ("location", "nodeSystemConfig", "enableNestedVirtualization"):
                if k not in p and k in defaults:
                    p[k] = defaults[k]
        out.append(p)
    return out


def grouped_rules(prios: list[dict]) -> list[list[int]]:
    """crd/ccc/ccc.go GroupedRules: each priority its own group in order, or, when every priority has a
    priorityScore, one group per score from the highest down (ties kept in list order)."""
    if prios and all("priorityScore" in p for p in prios):
        scores = sorted({int(p["priorityScore"]) for p in prios}, reverse=True)
        return [[i for i, p in enumerate(prios) if int(p["priorityScore"]) == s] for s in scores]
    return [[i] for i in range(len(prios))]


def reservation_path(res: dict) -> str:
    """gceclient.ReservationRef.RelativePath: the name, or projects/<p>/reservations/<name> for another
    project's (shared) reservation, then /reservationBlocks/<b>[/reservationSubBlocks/<s>]."""
    path = res.get("name") or ""
    project = res.get("project") or ""
    if project and project != PROJECT:
        path = f"projects/{project}/reservations/{path}"
    block = res.get("reservationBlock") or {}
    if block.get("name"):
        path += f"/reservationBlocks/{block['name']}"
        sub = block.get("reservationSubBlock") or {}
        if sub.get("name"):
            path += f"/reservationSubBlocks/{sub['name']}"
    return path


def _reservations_match(rule: dict, pool_spec: dict) -> bool:
    """rules/reservations.go Matches: a pool without reservationAffinity matches no reservation rule; Specific
    matches a pool consuming one of the listed reservations whose zones (when given) cover the pool's."""
    aff = pool_spec.get("reservationAffinity")
    if not aff:
        return False
    want = AFFINITY.get(rule.get("affinity", ""))
    if want != aff.get("consumeReservationType"):
        return False
    if want != "SPECIFIC_RESERVATION":
        return not aff.get("key") and not aff.get("values")
    for res in rule.get("specific") or []:
        if aff.get("key") != RESERVATION_NAME_KEY or list(aff.get("values") or []) != [reservation_path(res)]:
            continue
        zones = res.get("zones")
        if zones and not set(pool_spec.get("zones") or []) <= set(zones):
            continue
        return True
    return False


def rule_matches(rule: dict, pool: Obj) -> bool:
    """Whether a node pool satisfies one priority rule (module doc)."""
    spec = pool.get("spec") or {}
    if "nodepools" in rule:
        return pool["metadata"]["name"] in (rule.get("nodepools") or [])
    try:
        mt = catalog.machine_type(spec["machineType"])
    except (catalog.CatalogError, KeyError):
        return False
    if "machineFamily" in rule and rule["machineFamily"] != mt.family:
        return False
    if "machineType" in rule and rule["machineType"] != mt.name:
        return False
    if "spot" in rule and bool(rule["spot"]) != bool(spec.get("spot")):
        return False
    if "minCores" in rule and (mt.vcpus or 0) < int(rule["minCores"]):
        return False
    if "minMemoryGb" in rule and int(mt.memory_gib or 0) < int(rule["minMemoryGb"]):
        return False
    gpu = rule.get("gpu")
    if gpu is not None and not _gpu_matches(gpu, spec, mt):
        return False
    tpu_rule = rule.get("tpu")
    if tpu_rule is not None and not _tpu_matches(tpu_rule, spec, mt):
        return False
    flex = rule.get("flexStart") or {}
    if flex.get("enabled"):  # rules/flex_start.go: a flex-start pool with the rule's recycling lead time, or none
        lead = (flex.get("nodeRecycling") or {}).get("leadTimeSeconds")
        if not spec.get("flexStart") or (spec.get("labels") or {}).get(GKE_RECYCLE_LEAD_TIME, "") != (
                "" if lead is None else str(int(lead))):
            return False
    if "maxRunDurationSeconds" in rule:  # rules/max_run_duration.go: the pool's --max-run-duration, in seconds
        run = spec.get("maxRunDuration")
        if run is None or int(parse_duration(run)) != int(rule["maxRunDurationSeconds"]):
            return False
    if "reservations" in rule and not _reservations_match(rule["reservations"], spec):
        return False
    policy = (rule.get("placement") or {}).get("policyName")
    if policy and (spec.get("placementPolicy") or {}).get("policyName") != policy:
        return False
    zones = (rule.get("location") or {}).get("zones")
    if zones and not set(spec.get("zones") or []) <= set(zones):
        return False
    labels = spec.get("labels") or {}
    if any(labels.get(k) != v for k, v in (rule.get("nodeLabels") or {}).items()):
        return False
    taints = [(t.get("key"), t.get("value", ""), t.get("effect")) for t in spec.get("taints") or []]
    return all((t.get("key"), t.get("value", ""), t.get("effect")) in taints for t in rule.get("taints") or [])


def _gpu_matches(gpu: dict, spec: dict, mt: catalog.MachineType) -> bool:
    """rules/gpu.go: one accelerator config of that type and count (a machine type with attached GPUs, e.g. a3 or
    g2, counts as its own), and the driver version (CRD default `default`)."""
    accels = spec.get("accelerators") or []
    if len(accels) > 1:
        return False
    gtype = accels[0]["type"] if accels else mt.gpu
    count = int(accels[0]["count"]) if accels else int(mt.gpu_count or 0)
    install = accels[0].get("gpuDriverInstallation", "DEFAULT") if accels else "DEFAULT"
    if not gtype:
        return False
    if gpu.get("type") and gpu["type"] != gtype:
        return False
    if gpu.get("count") and int(gpu["count"]) != count:
        return False
    return DRIVER.get(install, "default") == str(gpu.get("driverVersion", "default")).lower()


def _tpu_matches(rule: dict, spec: dict, mt: catalog.MachineType) -> bool:
    """rules/tpu.go: the TPU type (GKE's accelerator name), chips per node and the slice topology."""
    if not mt.tpu:
        return False
    if rule.get("type") and catalog.tpu_type(mt.tpu).gke_accelerator != rule["type"]:
        return False
    if rule.get("count") and int(rule["count"]) != int(mt.tpu_chips or 0):
        return False
    topo = rule.get("topology")
    return not topo or (spec.get("placementPolicy") or {}).get("tpuTopology") == topo


def first_rule(cc: Obj, pool: Obj) -> int | None:
    """The index of the first priority the pool matches (matcher.go FirstMatchedRule), None: none."""
    return next((i for i, p in enumerate(priorities(cc)) if rule_matches(p, pool)), None)


@dataclass(frozen=True)
class Finding:
    """One misconfiguration GKE's ComputeClass validator reports as a status condition (conditions_constants.go):
    condition type, reason, message, and where (a pool name, or the class field) for validate's line."""

    type: str
    reason: str
    message: str
    pool: str | None = None
    field: str = "spec.priorities"


def misconfigurations(cc: Obj, pools: list[Obj], default_enabled: bool = False) -> list[Finding]:
    """What GKE's validator says about a class and the cluster's node pools (status/validator/conditions): the
    class's pools without its taint or with another value, pools that match no rule, no matching autoscaling pool
    while node pool auto-creation is off, and `nodepools` naming pools that are not there or do not autoscale."""
    name = cc["metadata"]["name"]
    spec = cc.get("spec") or {}
    prios = priorities(cc)
    out: list[Finding] = []
    matched = False
    for p in pools:
        pspec = p.get("spec") or {}
        label = class_of(pspec.get("labels"))
        if (label or (DEFAULT_CLASS if default_enabled else None)) != name:
            continue
        pool = p["metadata"]["name"]
        taints = [t for t in pspec.get("taints") or [] if t.get("key") == COMPUTE_CLASS]
        if label is None:
            pass  # a pool of the cluster-level default class by having no label needs no class taint
        elif not taints:
            out.append(Finding("NodepoolMisconfigured", "TaintMissing",
                               f"Crd taint is missing for the nodepool {pool}.", pool, "spec.taints"))
        elif any(t.get("value") != name or t.get("effect") != "NoSchedule" for t in taints):
            out.append(Finding("NodepoolMisconfigured", "TaintValueNotMatching",
                               f"Crd taint value doesn't match Crd name for the nodepool {pool}.", pool,
                               "spec.taints"))
        hit = any(rule_matches(r, p) for r in prios)
        matched |= hit and bool(pspec.get("autoscaling"))
        if not hit and spec.get("whenUnsatisfiable") == "ScaleUpAnyway":
            out.append(Finding("NodepoolMisconfigured", "NoRuleMatching",
                               f"Nodepool {pool} has an Crd label but doesn't match any priority rule.", pool))
        elif not hit:
            out.append(Finding("NodepoolMisconfigured", "NodepoolWillNeverScaleUp",
                               f"Nodepool {pool} doesn't match any priority rule and Crd is configured to not scale "
                               "up in that case", pool))
    if not (spec.get("nodePoolAutoCreation") or {}).get("enabled") and not matched:
        out.append(Finding("CrdMisconfigured", "NapDisabledAndNoMatchingNodegroups",
                           "Crd with NAP disabled should have at least one matching nodepool with autoscaling "
                           "enabled."))
    by_name = {p["metadata"]["name"]: p for p in pools}
    for i, r in enumerate(prios):
        for pool in r.get("nodepools") or []:
            if pool not in by_name or not (by_name[pool].get("spec") or {}).get("autoscaling"):
                out.append(Finding("CrdMisconfigured", "NodePoolNotExist", f"Nodepool {pool} specified by name has "
                                   "autoscaling disabled or doesn't exist in the cluster.", None,
                                   f"spec.priorities[{i}].nodepools"))
    return out


def status_conditions(findings: list[Finding], now: str) -> list[dict]:
    """The class's status.conditions: Health True "Crd is healthy." or False "Crd is not healthy." (reason Health),
    then one condition per finding type, the first finding's reason and message (conditions_constants.go)."""
    healthy = not findings
    out = [{"type": "Health", "status": "True" if healthy else "False", "lastTransitionTime": now,
            "reason": "Health", "message": "Crd is healthy." if healthy else "Crd is not healthy."}]
    seen: set[str] = set()
    for f in findings:
        if f.type not in seen:
            seen.add(f.type)
            out.append({"type": f.type, "status": "True", "lastTransitionTime": now, "reason": f.reason,
                        "message": f.message})
    return out


def admit_pod(store: Store) -> Callable[[Obj], Obj]:
    """GKE's admission for ComputeClasses: a pod of a Namespace labelled with a default class (the non-DaemonSet
    variant for pods no DaemonSet owns) that selects no class gets the class's node selector; a pod selecting a
    class gets the toleration for the class's NoSchedule taint (GKE tolerates it for the pod; workloads need not)."""

    def plugin(obj: Obj) -> Obj:
        if obj.get("kind") != "Pod":
            return obj
        spec = obj["spec"]
        selector = spec.get("nodeSelector") or {}
        name = selector.get(COMPUTE_CLASS)
        if name is None:
            ns = store.get("Namespace", "", obj["metadata"].get("namespace") or "default")
            labels = ((ns or {}).get("metadata") or {}).get("labels") or {}
            owned_by_ds = any(r.get("kind") == "DaemonSet" for r in obj["metadata"].get("ownerReferences") or [])
            name = labels.get(NS_DEFAULT) or (None if owned_by_ds else labels.get(NS_DEFAULT_NON_DS))
            if name is None:
                return obj
            spec = {**spec, "nodeSelector": {**selector, COMPUTE_CLASS: name}}
        tol = {"key": COMPUTE_CLASS, "operator": "Equal", "value": name, "effect": "NoSchedule"}
        tols = list(spec.get("tolerations") or [])
        if tol not in tols:
            spec = {**spec, "tolerations": [*tols, tol]}
        return {**obj, "spec": spec}

    return plugin


@dataclass
class Migration:
    """One defrag attempt: the node to move off, its group, the group grown for it and the nodes it added; the
    plugin that chose it: highprioritymigration (activeMigration) or recycling (flex-start node recycling)."""

    node: str
    group: Any  # NodeGroup
    added: list[str]
    since: float
    plugin: str = "highprioritymigration"
    hosts: list[str] | None = None  # a multi-host TPU slice's nodes: it moves, and goes, whole


class ComputeClasses:
    """The cluster's ComputeClasses as the autoscaler reads them: bucket order, fallback, migration, policy."""

    def __init__(self, store: Store, seed: int = 0, default_enabled: bool = False) -> None:
        self.store = store
        self.default_enabled = default_enabled  # the cluster-level default class (lister GetDefaultCrd)
        self.rng = random.Random(f"computeclass/{seed}")
        self.migrations: list[Migration] = []
        self.migration_backoff: dict[str, float] = {}  # node -> not before
        self.migrated: list[dict] = []
        self._created: dict[str, float] = {}  # pod key -> first seen
        self.waits: dict[str, list[float]] = {}  # "class/rule" -> pod waits in seconds

    def classes(self) -> dict[str, Obj]:
        return {c["metadata"]["name"]: c for c in self.store.list(KIND)}

    def __bool__(self) -> bool:
        return self.store.count(KIND) > 0

    # -- ordering -------------------------------------------------------------------------------------------------
    def bucket_of(self, pool: Obj, classes: dict[str, Obj]) -> tuple[str | None, int | None]:
        """(class, bucket index within it) of a pool: None index when the class's rules do not take the pool
        (leftover: ScaleUpAnyway only), (None, 0) for a pool of no (existing) class."""
        name = self.pool_class(pool)
        cc = classes.get(name) if name else None
        if cc is None:
            return None, 0
        prios = priorities(cc)
        for b, group in enumerate(grouped_rules(prios)):
            if any(rule_matches(prios[i], pool) for i in group):
                return name, b
        return name, None

    def eligible(self, pool: Obj) -> bool:
        """False for a class's pool that matches none of its rules when the class says DoNotScaleUp (organizer.go
        organizeByRules drops such groups)."""
        classes = self.classes()
        name, b = self.bucket_of(pool, classes)
        if name is None or b is not None:
            return True
        return (classes[name].get("spec") or {}).get("whenUnsatisfiable") == "ScaleUpAnyway"

    def order(self, options: list, pool_of: Callable[[Any], Obj | None]) -> list:
        """The options of the first bucket that has any, buckets in upstream's order (module doc)."""
        classes = self.classes()
        keyed: dict[tuple[int, int], list] = {}
        names = sorted(classes)
        self.rng.shuffle(names)
        rank = {n: i for i, n in enumerate(names)}
        for o in options:
            pool = pool_of(o)
            if pool is None:
                continue
            name, b = self.bucket_of(pool, classes)
            if name is None:
                key = (len(names), 0)
            else:
                key = (rank[name], b if b is not None else 10**6)
            keyed.setdefault(key, []).append(o)
        if not keyed:
            return options
        return keyed[min(keyed)]

    def rule_label(self, pool: Obj, classes: dict[str, Obj] | None = None) -> tuple[str, str] | None:
        """("class", "priorities[i]" or "unmatched") for a pool of a class, for the per-rule report."""
        classes = self.classes() if classes is None else classes
        name = self.pool_class(pool)
        cc = classes.get(name) if name else None
        if cc is None:
            return None
        i = first_rule(cc, pool)
        return name, (f"priorities[{i}]" if i is not None else "unmatched")

    def pool_class(self, pool: Obj) -> str | None:
        """The class a pool belongs to: its label, else "default" when the cluster-level default class is on
        (lister/ccc.go NodeGroupCrd falls back to GetDefaultCrd)."""
        name = class_of((pool.get("spec") or {}).get("labels"))
        return name if name or not self.default_enabled else DEFAULT_CLASS

    # -- policy ---------------------------------------------------------------------------------------------------
    def policy(self, node: Obj) -> dict:
        """autoscalingPolicy of the node's class ({} when none)."""
        name = class_of((node.get("metadata") or {}).get("labels")) or (DEFAULT_CLASS if self.default_enabled
                                                                         else None)
        if not name:
            return {}
        cc = self.store.get(KIND, "", name)
        return dict(((cc or {}).get("spec") or {}).get("autoscalingPolicy") or {})

    # -- usage --------------------------------------------------------------------------------------------------
    def observe_pod(self, etype: str, pod: Obj, now: float) -> None:
        """A class pod's wait: from when it was created to when it was bound, per rule of the node it got."""
        key = f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}/{pod['metadata'].get('uid')}"
        if etype == "DELETED":
            self._created.pop(key, None)
            return
        if class_of(pod["spec"].get("nodeSelector")) is None:
            return
        if etype == "ADDED":
            self._created.setdefault(key, now)
        node = pod["spec"].get("nodeName")
        if not node or key not in self._created:
            return
        since = self._created.pop(key)
        n = self.store.get("Node", "", node)
        pool = self.store.get("NodePool", "", ((n or {}).get("metadata") or {}).get("labels", {}).get(GKE_NODEPOOL,
                                                                                                       ""))
        label = self.rule_label(pool) if pool is not None else None
        where = "/".join(label) if label else f"{class_of(pod['spec'].get('nodeSelector'))}/no-class-pool"
        self.waits.setdefault(where, []).append(now - since)

    def report(self, node_cost: Iterable[tuple[str, str, float, float]],
               capacity_type: Callable[[str], str] | None = None) -> dict:
        """summary.json's compute_classes: per class and rule, its pools, node-hours, cost and the waits of the
        pods that landed there. `node_cost`: (node, pool, hours, usd) of every node of the run; `capacity_type`
        (when the scenario has reservations): each node's capacity (reserved, spot, flex-start, on-demand), for
        a per-rule `by_capacity_type`."""
        classes = self.classes()
        out: dict[str, dict] = {}
        for name, cc in sorted(classes.items()):
            spec = cc.get("spec") or {}
            out[name] = {"whenUnsatisfiable": spec.get("whenUnsatisfiable", "DoNotScaleUp"),
                         "optimizeRulePriority": bool((spec.get("activeMigration") or {}).get(
                             "optimizeRulePriority")), "rules": {}}
        labels: dict[str, tuple[str, str] | None] = {}
        for _node, pool_name, hours, usd in node_cost:
            if pool_name not in labels:
                pool = self.store.get("NodePool", "", pool_name)
                labels[pool_name] = self.rule_label(pool, classes) if pool is not None else None
            label = labels[pool_name]
            if label is None:
                continue
            r = out[label[0]]["rules"].setdefault(label[1], _empty_rule())
            if pool_name not in r["pools"]:
                r["pools"].append(pool_name)
            r["nodes"] += 1
            r["node_hours"] += hours
            r["cost_usd"] += usd
            if capacity_type is not None:
                t = r.setdefault("by_capacity_type", {}).setdefault(capacity_type(_node), {"node_hours": 0.0,
                                                                                          "cost_usd": 0.0})
                t["node_hours"] += hours
                t["cost_usd"] += usd
        for where, waits in sorted(self.waits.items()):
            name, _, rule = where.partition("/")
            if name not in out:
                continue
            r = out[name]["rules"].setdefault(rule, _empty_rule())
            r["pods_started"] = len(waits)
            r["wait_s_mean"] = round(sum(waits) / len(waits), 1)
            r["wait_s_max"] = round(max(waits), 1)
        for name in out:
            for r in out[name]["rules"].values():
                r["node_hours"], r["cost_usd"] = round(r["node_hours"], 3), round(r["cost_usd"], 2)
                for t in (r.get("by_capacity_type") or {}).values():
                    t["node_hours"], t["cost_usd"] = round(t["node_hours"], 3), round(t["cost_usd"], 2)
            out[name]["rules"] = dict(sorted(out[name]["rules"].items(), key=lambda kv: _rule_sort(kv[0])))
            out[name]["migrations"] = [m for m in self.migrated if m["class"] == name]
        return out


def _empty_rule() -> dict:
    return {"pools": [], "nodes": 0, "node_hours": 0.0, "cost_usd": 0.0, "pods_started": 0, "wait_s_mean": None,
            "wait_s_max": None}


def _rule_sort(label: str) -> tuple[int, int]:
    if label.startswith("priorities["):
        return (0, int(label[len("priorities["):-1]))
    return (1, 0)

