"""Issue 32 goal 2: Kueue's API client paces its writes (clientConnection as a token bucket on the simulated
clock), bare Workloads are queued and finished as Kueue's performance suite runs them, and the suite's generator
configs run through the twin."""

from __future__ import annotations

import pytest
from k8s_builders import make_scenario
from kueue_builders import make_configuration, make_cq, make_flavor, make_lq

from kubetwin.api.loader import Manifest
from kubetwin.experiments import kueue_perf
from kubetwin.kueue import config as kueue_config
from kubetwin.kueue.controller.perfrunner import RUNNING_TIME_LABEL
from kubetwin.runner import run as kt_run
from kubetwin.sim.apiclient import ApiClient, TokenBucket
from kubetwin.validation.validate import validate


def bare_wl(name: str, cpu: str, ms: int | None = 1000, priority: int = 0, at: str | None = None,
            ns: str = "default") -> dict:
    """A Workload as Kueue's performance generator creates it (MakeWorkload(...).Queue().Label().Priority()
    .Request(cpu))."""
    meta: dict = {"name": name, "namespace": ns}
    if ms is not None:
        meta["labels"] = {RUNNING_TIME_LABEL: str(ms)}
    if at is not None:
        meta["annotations"] = {"kubetwin.io/create-at": at}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta,
            "spec": {"queueName": "main", "priority": priority, "podSets": [{
                "name": "main", "count": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}}


def queue(cpu: str = "10", **preemption: str) -> list[dict]:
    cq = make_cq("cq").flavor("rf", cpu=cpu).obj()
    if preemption:
        cq["spec"]["preemption"] = preemption
    return [make_flavor("rf").obj(), cq, make_lq("main").cluster_queue("cq").obj()]


def client(qps: float, burst: int) -> dict:
    return make_configuration().fields(clientConnection={"qps": qps, "burst": burst}).obj()


def admitted_at(result, name: str) -> float:
    """When the Admitted=True write reached the API server."""
    t = result.first_time("Workload", lambda o: any(c["type"] == "Admitted" and c["status"] == "True"
                                                      for c in (o.get("status") or {}).get("conditions") or []),
                          name)
    assert t is not None, name
    return t


def conditions(obj: dict) -> list[dict]:
    return (obj.get("status") or {}).get("conditions") or []


def condition(result, name: str, ctype: str) -> dict:
    conds = (result.last("Workload", name).get("status") or {}).get("conditions") or []
    return next(c for c in conds if c["type"] == ctype)


# -- the token bucket ------------------------------------------------------------------------------------------


def test_token_bucket_gives_the_burst_at_once_then_one_token_per_1_over_qps():
    bucket = TokenBucket(qps=50, burst=100)
    due = [bucket.reserve(0.0) for _ in range(150)]
    assert due[:100] == [0.0] * 100
    assert due[100] == pytest.approx(0.02)
    assert due[149] == pytest.approx(1.0)


def test_token_bucket_refills_while_idle_up_to_its_burst():
    bucket = TokenBucket(qps=10, burst=5)
    for _ in range(5):
        bucket.reserve(0.0)
    assert bucket.reserve(0.0) == pytest.approx(0.1)  # in debt: the sixth waits for a token
    assert bucket.reserve(10.0) == 10.0  # refilled, capped at burst
    assert [bucket.reserve(10.0) for _ in range(4)] == [10.0] * 4
    assert bucket.reserve(10.0) == pytest.approx(10.1)


def test_api_client_shares_one_bucket_or_keeps_one_per_resource():
    shared = ApiClient("kueue", 1, 1)
    assert shared.reserve("workloads/status", "patch", 0.0) == 0.0
    assert shared.reserve("clusterqueues/status", "update", 0.0) == pytest.approx(1.0)
    per = ApiClient("minimalkueue", 1, 1, shared=False)
    assert per.reserve("workloads/status", "patch", 0.0) == 0.0
    assert per.reserve("clusterqueues/status", "update", 0.0) == 0.0
    assert per.reserve("workloads", "create", 0.0) == pytest.approx(1.0)  # status and object: one API type
    assert per.summary()["requests"] == {"create workloads": 1, "patch workloads/status": 1,
                                         "update clusterqueues/status": 1}
    assert ApiClient("off", -1, 0).reserve("workloads/status", "patch", 5.0) == 5.0  # negative qps: no limit


# -- clientConnection ------------------------------------------------------------------------------------------


def test_client_connection_is_read_with_kueues_defaults():
    assert (kueue_config.KueueConfig().client_qps, kueue_config.KueueConfig().client_burst) == (300.0, 500)
    parsed = kueue_config.parse(client(50, 100))
    assert (parsed.client_qps, parsed.client_burst) == (50.0, 100)
    assert kueue_config.parse(make_configuration().obj()).client_qps == 300.0


def test_client_connection_with_an_unknown_field_is_refused():
    cfg = make_configuration().fields(clientConnection={"qps": 5, "burts": 10}).obj()
    errors = [d for d in validate([Manifest(cfg, "c.yaml", 1)]) if d.severity == "error"]
    assert [d.field for d in errors] == ["clientConnection.burts"]


# -- Kueue's writes wait for tokens ---------------------------------------------------------------------------


def test_admissions_are_stamped_at_the_cycle_and_written_as_tokens_come():
    objs = [make_scenario("1m").obj(), client(10, 5), *queue("100"),
            *[bare_wl(f"w{i:02d}", "1", ms=None) for i in range(20)]]
    result = kt_run(objects=objs)
    writes = sorted(admitted_at(result, f"w{i:02d}") for i in range(20))
    assert writes[:5] == [0.0] * 5  # the burst
    assert writes[5:] == pytest.approx([0.1 * k for k in range(1, 16)])  # then 10 per second
    # the conditions carry the cycle's time, as the scheduler stamps them before the patch waits
    assert {condition(result, f"w{i:02d}", "Admitted")["lastTransitionTime"] for i in range(20)} == {
        result.last("Workload", "w00")["metadata"]["creationTimestamp"]}
    api_client = result.summary["kueue_api_client"]
    assert api_client["requests"]["patch workloads/status"] == 20
    assert (api_client["qps"], api_client["burst"]) == (10.0, 5)


def test_without_a_shortage_of_tokens_nothing_waits():
    objs = [make_scenario("1m").obj(), *queue("100"), *[bare_wl(f"w{i}", "1", ms=None) for i in range(5)]]
    result = kt_run(objects=objs)
    assert {admitted_at(result, f"w{i}") for i in range(5)} == {0.0}
    assert result.summary["kueue_api_client"]["waited_s"] == 0.0


def test_pending_conditions_are_written_through_the_client_and_block_the_next_cycle():
    # quota for one: the second gets a Pending condition (a write), which waits behind the first's admission
    objs = [make_scenario("1m").obj(), client(1, 1), *queue("1"),
            bare_wl("a", "1", ms=5000), bare_wl("b", "1", ms=5000)]
    result = kt_run(objects=objs)
    requests = result.summary["kueue_api_client"]["requests"]
    assert requests["patch workloads/status"] >= 3  # a admitted, b pending, b admitted
    pending = result.first_time("Workload", lambda o: any(
        c["type"] == "QuotaReserved" and c["status"] == "False" for c in conditions(o)), "b")
    assert pending == pytest.approx(1.0)  # one token a second: a's admission took the first


def test_cluster_queue_status_is_written_one_batch_after_the_cache_changed_while_the_scheduler_waits():
    # one token a second: a and b are admitted at 0 (a's patch at once, b's at 1 s); c does not fit, so the
    # scheduler's Pending patch for it waits until 2 s and no cycle runs before. Kueue's ClusterQueue reconciler,
    # not the scheduler, writes the status: one batch (1 s) after the first Workload event, reading the cache then.
    objs = [make_scenario("1m").obj(), client(1, 1), *queue("2"),
            bare_wl("a", "1", ms=500), bare_wl("b", "1", ms=5000), bare_wl("c", "1", ms=5000)]
    result = kt_run(objects=objs)

    def usage(total: str):
        return lambda o: any(r["total"] == total for f in (o.get("status") or {}).get("flavorsUsage") or []
                             for r in f["resources"])

    # a and b took the quota at 0 and a finished at 0.5 s: the batch due at 1 s reads b alone
    assert result.first_time("ClusterQueue", usage("1"), "cq") == pytest.approx(1.0)
    # the scheduler's next cycle (2 s) admits c, whose patch takes the token of 3 s; the cache took it at 2 s
    assert admitted_at(result, "c") == pytest.approx(3.0)
    # the requeuer put c back at 1.5 s (a finished at 0.5 s + its 1 s batch): that starts a batch, due at 2.5 s
    assert result.first_time("ClusterQueue", usage("2"), "cq") == pytest.approx(2.5)


# -- bare Workloads ----------------------------------------------------------------------------------------------


def test_a_bare_workload_is_admitted_and_finished_by_the_runner_after_its_running_time():
    objs = [make_scenario("1m").obj(), *queue("1"), bare_wl("first", "1", ms=2500),
            bare_wl("second", "1", ms=1000)]
    result = kt_run(objects=objs)
    finished = condition(result, "first", "Finished")
    assert (finished["status"], finished["reason"], finished["message"]) == ("True", "ByTest", "By test runner")
    t_finished = result.first_time("Workload", lambda o: any(
        c["type"] == "Finished" for c in (o.get("status") or {}).get("conditions") or []), "first")
    assert t_finished == pytest.approx(2.5)
    # the quota freed by the Finished Workload, retried by Kueue's requeuer 1 s later (#9232)
    assert admitted_at(result, "second") == pytest.approx(3.5)
    assert condition(result, "second", "Finished")["status"] == "True"


def test_a_bare_workload_without_a_running_time_holds_its_quota_and_validate_says_so():
    wl = bare_wl("forever", "1", ms=None)
    notices = [d for d in validate([Manifest(wl, "w.yaml", 1)]) if d.severity == "notice"]
    assert any("holds its quota until it is deleted" in d.message for d in notices)
    assert not any("not simulated" in d.message for d in notices)
    result = kt_run(objects=[make_scenario("10m").obj(), *queue("1"), wl, bare_wl("next", "1", ms=100)])
    assert condition(result, "forever", "Admitted")["status"] == "True"
    assert condition(result, "next", "QuotaReserved")["status"] == "False"


def test_a_bare_workload_without_pod_sets_is_refused():
    wl = bare_wl("empty", "1")
    wl["spec"]["podSets"] = []
    errors = [d for d in validate([Manifest(wl, "w.yaml", 1)]) if d.severity == "error"]
    assert [d.field for d in errors] == ["spec.podSets"]


def test_a_preempted_bare_workload_is_released_by_the_runner_requeued_and_finishes_later():
    objs = [make_scenario("1m").obj(), *queue("1", withinClusterQueue="LowerPriority"),
            bare_wl("low", "1", ms=10_000, priority=1), bare_wl("high", "1", ms=1000, priority=100, at="1s")]
    result = kt_run(objects=objs)
    assert any(c["type"] == "Preempted" and c["status"] == "True"
               for v in result.versions("Workload", "low") for c in conditions(v.object))
    assert admitted_at(result, "high") == pytest.approx(1.0)
    low = result.last("Workload", "low")
    assert condition(result, "low", "Finished")["status"] == "True"
    assert low["status"]["admission"]["clusterQueue"] == "cq"  # admitted again after high finished


# -- the suite ----------------------------------------------------------------------------------------------------

SMALL = {"cohorts": [{"className": "cohort", "count": 1, "queuesSets": [{
    "className": "cq", "count": 2, "nominalQuota": 20, "borrowingLimit": 100, "reclaimWithinCohort": "Any",
    "withinClusterQueue": "LowerPriority", "workloadsSets": [
        {"count": 20, "creationIntervalMs": 100, "workloads": [
            {"className": "small", "runtimeMs": 200, "priority": 50, "request": 1}]},
        {"count": 4, "creationIntervalMs": 500, "workloads": [
            {"className": "medium", "runtimeMs": 500, "priority": 100, "request": 5}]},
        {"count": 2, "creationIntervalMs": 1200, "workloads": [
            {"className": "large", "runtimeMs": 1000, "priority": 200, "request": 20}]}]}]}]}


def test_the_generator_makes_kueues_objects_with_its_names_and_times():
    objs = kueue_perf.to_objects(SMALL)
    cqs = [o for o in objs if o["kind"] == "ClusterQueue"]
    assert [c["metadata"]["name"] for c in cqs] == ["cq-0-0-cohort-0", "cq-0-1-cohort-0"]
    assert cqs[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}]
    wls = [o for o in objs if o["kind"] == "Workload" and o["metadata"]["namespace"] == "cq-0-0-cohort-0"]
    assert len(wls) == 26
    large = [w for w in wls if w["metadata"]["name"].startswith("large")]
    assert [(w["metadata"]["name"], w["metadata"]["annotations"]["kubetwin.io/create-at"]) for w in large] == [
        ("large-2-0-0", "1.2s"), ("large-2-1-0", "2.4s")]
    assert large[0]["metadata"]["labels"][RUNNING_TIME_LABEL] == "1000"
    config = next(o for o in objs if o["kind"] == "Configuration")
    assert config["clientConnection"] == {"qps": 50, "burst": 100}  # minimalkueue's client


def test_a_scaled_down_suite_drains_and_the_recorder_reads_it():
    result = kt_run(objects=kueue_perf.to_objects(SMALL, duration="10m"))
    summary = kueue_perf.record(result.history)
    assert summary.counts == {"large": 4, "medium": 8, "small": 40}
    assert set(summary.admission_ms) == {"large", "medium", "small"}
    assert 0 < summary.usage_pct["cq"] <= 100
    assert 2.4 < summary.drained_s < 60
    assert all(condition(result, n, "Finished")["status"] == "True"
               for n in ("large-2-1-0", "small-0-19-0", "medium-1-3-0"))
    rows = kueue_perf.table(summary, "baseline")
    assert rows[0][0] == "large: avg time to admission" and rows[0][2] == "16.5 s"
    assert kueue_perf.table(summary, "baseline/SchedulingEquivalenceHashing=false")[0][2] == "6.7 s"


def test_the_shipped_configs_resolve_by_name():
    path, published = kueue_perf.resolve("baseline")
    assert path.name == "baseline.yaml" and published == "baseline"
    cfg = kueue_perf.load_config(path)
    assert sum(1 for o in kueue_perf.to_objects(cfg) if o["kind"] == "Workload") == 15_000
    assert kueue_perf.resolve("baseline", {"SchedulingEquivalenceHashing": False})[1] == (
        "baseline/SchedulingEquivalenceHashing=false")
    assert kueue_perf.resolve("large-scale-2000")[1] is None  # Kueue published no numbers for it


def test_the_scheduling_equivalence_hashing_gate_reaches_the_queues():
    from kubetwin.kueue.cycle import KueueScheduler

    for on in (True, False):
        cfg = kueue_config.parse(make_configuration().fields(featureGates={"SchedulingEquivalenceHashing": on}).obj())
        assert cfg.equivalence_hashing is on
        sched = KueueScheduler(equivalence_hashing=cfg.equivalence_hashing)
        sched.apply(make_flavor("rf").obj())
        sched.apply(make_cq("cq").flavor("rf", cpu="1").obj())
        assert sched.queues.queues["cq"].equivalence_hashing is on
    assert kueue_config.KueueConfig().equivalence_hashing  # beta, on by default


def _wl_version(admitted_at: str | None) -> dict:
    conds = [] if admitted_at is None else [
        {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": admitted_at}]
    return {"kind": "Workload", "metadata": {"name": "large-2-0-0", "namespace": "cq",
                                            "creationTimestamp": "2026-01-01T00:00:00Z",
                                            "labels": {kueue_perf.CLASS_LABEL: "large"}},
            "status": {"conditions": conds}}


def test_the_recorder_reads_both_kueues_measures_of_the_time_to_admission():
    # created at 0.3 s (stamped 00:00:00), admitted by the cycle of 1.0 s (stamped 00:00:01), its patch landing
    # at 2.7 s: the recorder before kueue#13313 (which measured every published number) takes the times it saw the
    # two events, 2,400 ms; the one since, the stamps, 1,000 ms
    history = [(0.3, 1, "ADDED", _wl_version(None)),
               (2.7, 2, "MODIFIED", _wl_version("2026-01-01T00:00:01Z"))]
    summary = kueue_perf.record(history)
    assert summary.admission_observed_ms == {"large": 2400}
    assert summary.admission_ms == {"large": 1000}
    row = kueue_perf.table(summary, "baseline")[0]
    assert row[:3] == ("large: avg time to admission", "2.4 s", "16.5 s")  # Kueue's numbers: observed times


def test_workloads_created_at_the_same_instant_reach_the_scheduler_one_at_a_time():
    # cohort of two 1-cpu ClusterQueues; a (2 cpu, borrowing) is created just before b (1 cpu, in its nominal quota),
    # at the same instant. Kueue's scheduler pops a as soon as it is queued and admits it; b then finds the cohort
    # full. Seen together in one cycle, b would go first (a head that does not borrow sorts before one that does).
    objs = [make_scenario("1m").obj(), make_flavor("rf").obj(),
            make_cq("cq1").flavor("rf", cpu="1").cohort("c").obj(),
            make_cq("cq2").flavor("rf", cpu="1").cohort("c").obj(),
            make_lq("main").cluster_queue("cq1").obj(), make_lq("main", "other").cluster_queue("cq2").obj(),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}},
            bare_wl("a", "2", ms=5000), bare_wl("b", "1", ms=1000, ns="other")]
    result = kt_run(objects=objs)
    assert admitted_at(result, "a") == 0.0
    b = next(c for c in conditions(result.last("Workload", "b", at=1.0)) if c["type"] == "QuotaReserved")
    assert b["reason"] == "WaitingForQuota" and "insufficient unused quota for cpu in flavor rf" in b["message"]
    assert admitted_at(result, "b") == pytest.approx(6.0)  # a's 5 s + the requeuer's 1 s
