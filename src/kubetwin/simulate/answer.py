"""The run behind `kubetwin simulate` and what it reads of it (the package docstring says what and why)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.api.loader import Manifest, load_paths
from kubetwin.api.podresources import pod_requests
from kubetwin.importer import runtime as runtime_rules
from kubetwin.importer import sources as import_sources
from kubetwin.importer.convert import Draw, Options, parse_time, redraw
from kubetwin.k8s.conditions import find_condition
from kubetwin.k8s.names import GKE_NODEPOOL, GPU
from kubetwin.k8s.units import parse_quantity
from kubetwin.runner import run

__all__ = ["Answer", "Outcome", "simulate"]

WORKLOAD_KINDS = frozenset({"Job", "JobSet", "Deployment", "ReplicaSet", "Pod", "LeaderWorkerSet"})
PRICE = "kubetwin.io/hourly-price-usd"
READ = frozenset({"Pod", "Workload"})  # the kinds whose versions an outcome reads, besides the incoming objects


@dataclass
class Outcome:
    """One incoming workload in one run (times in seconds from t=0; None: not within the run)."""

    kind: str
    namespace: str
    name: str
    admitted: float | None = None  # Kueue's Admitted condition (None without Kueue)
    cluster_queue: str | None = None
    flavors: list[str] = field(default_factory=list)
    waited_because: str | None = None  # the last reason it waited: Kueue's Pending message, else FailedScheduling
    started: float | None = None  # its first pod Running
    finished: float | None = None  # Complete (a Job, a JobSet) or its last pod Succeeded
    nodes: list[str] = field(default_factory=list)
    node_pools: list[str] = field(default_factory=list)
    cost_usd: float = 0.0


@dataclass
class Answer:
    """Every incoming workload's outcome per run (one run per seed), the start time's spread over the runs."""

    duration_s: float
    seeds: list[int]
    runs: list[list[Outcome]]
    notices: list[str] = field(default_factory=list)

    def start_percentiles(self) -> list[dict[str, Any]]:
        """Per workload, P10 / P50 / P90 of its start over the runs (None when it did not start in some run).

        The (n+1)p ranks (statistics' "exclusive" method, clamped to the runs' range): between the P10 and P90 so
        ranked lies the next draw with probability 80 % whatever the distribution (a new draw falls between the
        j-th and k-th of n with probability (k-j)/(n+1)), where the "inclusive" ranks 1+(n-1)p hold only
        (n-1)/(n+1) of that: 72 % for 20 runs. The calibration (benchmarks/bench_simulate_calibration.py) counts
        on it."""
        out = []
        for i, first in enumerate(self.runs[0]):
            starts = [r[i].started for r in self.runs]
            known = sorted(s for s in starts if s is not None)
            row: dict[str, Any] = {"workload": f"{first.kind}/{first.namespace}/{first.name}",
                                   "started_in_runs": len(known), "runs": len(starts)}
            if len(known) == len(starts):
                q = statistics.quantiles(known, n=10, method="exclusive") if len(known) > 1 else [known[0]] * 9
                row.update(p10=max(q[0], known[0]), p50=statistics.median(known), p90=min(q[8], known[-1]))
            out.append(row)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"duration_s": self.duration_s, "seeds": self.seeds, "notices": self.notices,
                "runs": [[asdict(o) for o in r] for r in self.runs], "start": self.start_percentiles()}


def simulate(incoming: list[str | Path], snapshot: list[str | Path], duration: str = "24h", runs: int = 1,
             seed: int = 0, runtime: list[str] | None = None, snapshot_time: str | None = None) -> Answer:
    """Run the snapshot with the incoming objects created at t=0, `runs` times (seeds seed, seed+1, ...).

    `runtime`: `--runtime OWNER=DIST` rules (importer/runtime.py) for the snapshot's pods and queued Jobs, and for
    the incoming workloads (their own kubetwin.io/duration as a dump's, the first matching rule before it), drawn
    again for each seed, so the runs spread over the run times too; `snapshot_time`: t=0 (RFC 3339; default: the
    latest time the dump records), from which running pods' elapsed time is counted."""
    rules = runtime_rules.parse_rules(list(runtime or []))
    if snapshot_time is not None and parse_time(snapshot_time) is None:
        raise KubetwinError([Diagnostic("-", 0, "-", "--snapshot-time", f"Invalid value: {snapshot_time!r}: not "
                                        "an RFC 3339 time", "e.g. 2026-12-01T10:00:00Z")])
    options = Options(runtime=rules, snapshot_time=snapshot_time, seed=seed)
    state, report = import_sources.load(list(snapshot), options) if snapshot else ([], None)
    new = load_paths(list(incoming))
    wanted = [m for m in new if m.kind in WORKLOAD_KINDS]
    draws = _incoming_draws(wanted, rules)
    if report is None and ((rules and not draws) or snapshot_time):
        flag = "--runtime" if rules and not draws else "--snapshot-time"
        raise KubetwinError([Diagnostic("-", 0, "-", flag, "Invalid value: no cluster dump among --from's sources "
                                        "(they are manifests: their own kubetwin.io/duration is their run time)",
                                        "give --from a kubectl, kube-scheduler-simulator or kwokctl dump, or drop "
                                        + flag)])
    notices = report.lines() if report is not None else []
    seeds = list(range(seed, seed + max(1, runs)))
    results = []
    for s in seeds:
        if report is not None and report.draws:
            report.draw(s)  # this run's run times
        redraw(draws, s)  # and the incoming workloads'
        # validated once: the runs differ only in their seed and the run times drawn (valid durations)
        res = run(manifests=[*state, *new], duration=duration, seed=s, validated=s != seeds[0])
        notices = notices or [n for n in res.summary.get("notices", [])]
        results.append(_outcomes(res, wanted))
    from kubetwin.k8s.units import parse_duration

    return Answer(parse_duration(duration), seeds, results, notices)


def _incoming_draws(wanted: list[Manifest], rules: list[runtime_rules.Rule]) -> list[Draw]:
    """The incoming workloads' run times that a --runtime rule gives, by the same matching as the snapshot's (the
    workload's own NAMESPACE/KIND/NAME and KIND/NAME; `*` for Jobs, JobSets and bare pods): drawn for each run into
    their pod templates (one draw per workload; per replicatedJob of a JobSet), seeded by the run's seed and the
    workload's uid, else its name."""
    draws = []
    for m in wanted:
        meta = m.obj.get("metadata")
        if not isinstance(meta, dict):
            continue  # validate says what is wrong with it
        ns, name, kind = meta.get("namespace") or "default", meta.get("name") or "", m.kind.lower()
        rule = next((r for r in rules if r.matches(runtime_rules.POD_OWNER.get(m.kind),
                                                   [f"{ns}/{kind}/{name}", f"{kind}/{name}"])), None)
        if rule is None:
            continue
        uid = str(meta.get("uid") or f"{ns}/{kind}/{name}")
        draws += [Draw(ann, f"{uid}/{part}" if part else uid, 0.0, rule.dist)
                  for part, ann in runtime_rules.templates(m.obj)]
    return draws


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace") or "default", meta["name"]


def _outcomes(res: Any, wanted: list[Manifest]) -> list[Outcome]:
    """What the run did with each incoming workload, read from its history."""
    first_uid: dict[tuple[str, str, str], str] = {}  # the incoming objects' uids (their first version)
    parent: dict[str, str] = {}  # uid -> its controller's uid
    versions: dict[str, list[tuple[float, str, dict[str, Any]]]] = {}
    nodes: dict[str, dict[str, Any]] = {}
    scheduling: dict[str, str] = {}  # pod uid -> its last FailedScheduling message
    wanted_keys = {(m.kind, m.obj["metadata"].get("namespace") or "default", m.obj["metadata"]["name"])
                   for m in wanted}
    for t, _, etype, o in res.history:
        meta = o["metadata"]
        uid = meta.get("uid")
        if o["kind"] == "Event":
            inv = o.get("involvedObject") or {}
            if o.get("reason") == "FailedScheduling" and inv.get("uid"):
                scheduling[inv["uid"]] = o.get("message", "")
            continue
        if o["kind"] == "Node" and etype != "DELETED":
            nodes[meta["name"]] = o
        key = _key(o)
        if key in wanted_keys and key not in first_uid:
            first_uid[key] = uid
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller"):
                parent[uid] = ref.get("uid")
        if o["kind"] in READ or key in wanted_keys:  # the versions read; every other object only its owner link
            versions.setdefault(uid, []).append((t, etype, o))

    def root(uid: str) -> str:
        seen = set()
        while uid in parent and uid not in seen:
            seen.add(uid)
            uid = parent[uid]
        return uid

    by_root: dict[str, list[str]] = {}
    for uid in versions:
        by_root.setdefault(root(uid), []).append(uid)
    out = []
    for m in wanted:
        key = (m.kind, m.obj["metadata"].get("namespace") or "default", m.obj["metadata"]["name"])
        o = Outcome(*key)
        uid = first_uid.get(key)
        if uid is not None:
            _read(o, uid, by_root.get(uid, []), versions, nodes, scheduling, res.summary["duration_seconds"],
                  _pool_prices(res.summary))
        out.append(o)
    return out


def _pool_prices(summary: dict[str, Any]) -> dict[str, float]:
    """Each pool's hourly price per node, from the run's cost (its nodes' lifetimes times their price): the price of
    a node that carries none itself (an imported node its pool adopted)."""
    cost = summary.get("cost") or {}
    hours = cost.get("node_hours_by_pool") or {}
    return {pool: usd / hours[pool] for pool, usd in (cost.get("by_pool") or {}).items() if hours.get(pool)}


def _read(o: Outcome, uid: str, family: list[str], versions: dict[str, list[tuple[float, str, dict[str, Any]]]],
          nodes: dict[str, dict[str, Any]], scheduling: dict[str, str], end: float, prices: dict[str, float]
          ) -> None:
    pods = [u for u in family if versions[u][0][2]["kind"] == "Pod"]
    for u in family:
        kind = versions[u][0][2]["kind"]
        if kind == "Workload":
            for t, _, w in versions[u]:
                st = w.get("status") or {}
                adm = find_condition(st.get("conditions"), "Admitted")
                if adm is not None and adm.get("status") == "True":
                    if o.admitted is None:
                        o.admitted = t
                        a = st.get("admission") or {}
                        o.cluster_queue = a.get("clusterQueue")
                        o.flavors = sorted({f for ps in a.get("podSetAssignments") or []
                                            for f in (ps.get("flavors") or {}).values()})
                elif o.admitted is None:
                    pending = find_condition(st.get("conditions"), "QuotaReserved")
                    if pending is not None and pending.get("status") == "False" and pending.get("message"):
                        o.waited_because = pending["message"]
    for t, _, obj in versions[uid]:
        conds = (obj.get("status") or {}).get("conditions")
        done = find_condition(conds, "Complete") or find_condition(conds, "Completed")
        if done is not None and done.get("status") == "True" and o.finished is None:
            o.finished = t
    for u in pods:
        running_since = None
        for t, etype, p in versions[u]:
            phase = (p.get("status") or {}).get("phase")
            node = (p.get("spec") or {}).get("nodeName")
            if node and node not in o.nodes:
                o.nodes.append(node)
            if phase == "Running" and running_since is None and etype != "DELETED":
                running_since = t
                o.started = t if o.started is None else min(o.started, t)
            if running_since is not None and (etype == "DELETED" or phase in ("Succeeded", "Failed")):
                o.cost_usd += _cost(p, nodes.get(node or ""), t - running_since, prices)
                running_since = None
        if running_since is not None:
            p = versions[u][-1][2]
            o.cost_usd += _cost(p, nodes.get((p.get("spec") or {}).get("nodeName") or ""), end - running_since,
                                prices)
        if o.started is None and u in scheduling and o.waited_because is None:
            o.waited_because = scheduling[u]
    o.node_pools = sorted({str(((nodes.get(n) or {}).get("metadata") or {}).get("labels", {}).get(GKE_NODEPOOL, ""))
                           for n in o.nodes} - {""})
    o.nodes.sort()
    o.cost_usd = round(o.cost_usd, 4)


def _cost(pod: dict[str, Any], node: dict[str, Any] | None, seconds: float, prices: dict[str, float]) -> float:
    """The pod's share of its node's hourly price for `seconds` (GPUs if it asked for any, else CPUs)."""
    if node is None or seconds <= 0:
        return 0.0
    meta = node["metadata"]
    price = float((meta.get("annotations") or {}).get(PRICE) or 0) or prices.get(
        str((meta.get("labels") or {}).get(GKE_NODEPOOL, "")), 0.0)
    alloc = (node.get("status") or {}).get("allocatable") or {}
    req = pod_requests(pod)  # the one rule for a pod's requests (milli-CPU, GPUs as a count)
    resource = GPU if req.get(GPU) else "cpu"
    asked = float(req.get(resource, 0)) / (1000 if resource == "cpu" else 1)
    have = float(parse_quantity(str(alloc.get(resource, "0")))) if alloc.get(resource) else 0.0
    share = min(1.0, asked / have) if have else 0.0
    return price * share * seconds / 3600
