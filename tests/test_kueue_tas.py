"""Kueue's Topology-Aware Scheduling in the twin: the scheduler's TAS step, the topology ungater, the pod-set
annotations, the v1beta2 assignment encoding, and one run end to end.

Ported cases cite kubernetes-sigs/kueue test files and case names (Apache-2.0: behaviour and cases, not code):
pkg/scheduler/scheduler_tas_test.go TestScheduleForTAS, pkg/controller/tas/topology_ungater_test.go TestReconcile
and TestIsTAS, pkg/controller/jobframework/tas_validation_test.go, pkg/util/tas/tas_assignment_test.go. The
placement algorithm's own cases are in tests/test_kueue_tas_assignments.py.
"""

from __future__ import annotations

from conftest import condition
from k8s_builders import make_job, make_pool, make_scenario
from kueue_builders import (
    NOW,
    make_bound_pod,
    make_cq,
    make_flavor,
    make_lq,
    make_topology,
    make_topology_node,
    make_wl,
)

from kubetwin.kueue import KueueScheduler
from kubetwin.kueue.controller.tas import TopologyUngater, assign_gated_pods, has_gate, pods_for_pod_set
from kubetwin.kueue.tas.assignment import Assignment, assignment_from_api
from kubetwin.kueue.tas.request import TOPOLOGY_GATE, TopologyRequest, from_annotations, is_tas, validation_errors
from kubetwin.runner import run as kt_run
from kubetwin.sim.env import Environment
from kubetwin.store.store import Store

HOST = "kubernetes.io/hostname"
BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"


# ------------------------------------------------------------------------------------------------ scheduler
def _single_node():
    """scheduler_tas_test.go `defaultSingleNode`: x1, 1 CPU, 1Gi, 10 pods."""
    return (make_topology_node("x1").label("tas-node", "true").label(HOST, "x1")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"}).ready())


def _cycle(objs, workloads, nodes=None, pods=()):
    """One cycle of a scheduler that sees ``nodes`` and ``pods`` through its TAS inputs."""
    sched = KueueScheduler()
    sched.set_namespace("default", {})
    sched.tas_inputs = lambda: ([n.obj() for n in (nodes or [_single_node()])], [p.obj() for p in pods])
    for obj in [make_topology("tas-single-level", HOST).obj(), make_lq("tas-main").cluster_queue("tas-main").obj(),
                *objs]:
        sched.apply(obj)
    for wl in workloads:
        sched.add_workload(wl)
    return sched, sched.schedule(NOW)


def _tas_flavor(name="tas-default", topology="tas-single-level"):
    return make_flavor(name).node_labels({"tas-node": "true"}).topology_name(topology)


def _assignment(result, key="default/foo"):
    admitted = {a.key: a.admission for a in result.admitted}
    return admitted.get(key)


def _domains(psa):
    return (assignment_from_api(psa["topologyAssignment"]).levels,
            assignment_from_api(psa["topologyAssignment"]).domains)


def test_workload_without_tas_annotation_uses_the_only_tas_flavor():
    """scheduler_tas_test.go TestScheduleForTAS: "workload which does not specify TAS annotation uses the only TAS
    flavor" -- a TAS-only ClusterQueue places it as unconstrained."""
    _, result = _cycle([_tas_flavor().obj(), make_flavor("default").obj(),
                        make_cq("tas-main").flavor("tas-default", cpu="50").obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1").obj()])
    psa = _assignment(result)["podSetAssignments"][0]
    assert psa["flavors"] == {"cpu": "tas-default"}
    assert _domains(psa) == ((HOST,), [(("x1",), 1)])


def test_workload_requiring_tas_skips_the_non_tas_flavor():
    """scheduler_tas_test.go TestScheduleForTAS: "workload requiring TAS skips the non-TAS flavor" (the event's
    Flavors considered names why)."""
    _, result = _cycle([_tas_flavor().obj(), make_flavor("default").obj(),
                        make_cq("tas-main").flavor("default", cpu="50").flavor("tas-default", cpu="50").obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                        .topology_request("one", required=HOST).obj()])
    psa = _assignment(result)["podSetAssignments"][0]
    assert psa["flavors"] == {"cpu": "tas-default"} and _domains(psa) == ((HOST,), [(("x1",), 1)])
    assert result.admitted[0].event_message.endswith(
        'Flavors considered: one: default(NoFit;Flavor "default" does not support TopologyAwareScheduling)')


def test_workload_which_does_not_need_tas_skips_the_tas_flavor():
    """scheduler_tas_test.go TestScheduleForTAS: "workload which does not need TAS skips the TAS flavor"."""
    _, result = _cycle([_tas_flavor().obj(), make_flavor("default").obj(),
                        make_cq("tas-main").flavor("tas-default", cpu="50").flavor("default", cpu="50").obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1").obj()])
    psa = _assignment(result)["podSetAssignments"][0]
    assert psa["flavors"] == {"cpu": "default"} and "topologyAssignment" not in psa
    assert result.admitted[0].event_message.endswith(
        'Flavors considered: one: tas-default(NoFit;Flavor "tas-default" supports only TopologyAwareScheduling)')


def test_workload_with_mixed_pod_sets_requiring_tas_and_not():
    """scheduler_tas_test.go TestScheduleForTAS: "workload with mixed PodSets (requiring TAS and not)"."""
    _, result = _cycle([_tas_flavor().obj(), make_flavor("default").obj(),
                        make_cq("tas-main").flavor("tas-default", cpu="50").flavor("default", cpu="50").obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("launcher", 1, cpu="500m")
                        .podset("worker", 1, cpu="500m").topology_request("worker", required=HOST).obj()])
    launcher, worker = _assignment(result)["podSetAssignments"]
    assert launcher["flavors"] == {"cpu": "default"} and "topologyAssignment" not in launcher
    assert worker["flavors"] == {"cpu": "tas-default"} and _domains(worker) == ((HOST,), [(("x1",), 1)])


def test_workload_required_tas_gets_scheduled():
    """scheduler_tas_test.go TestScheduleForTAS: "workload required TAS gets scheduled"."""
    _, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50", memory="50Gi").obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                        .topology_request("one", required=HOST).obj()])
    psa = _assignment(result)["podSetAssignments"][0]
    assert psa["resourceUsage"] == {"cpu": "1"} and _domains(psa) == ((HOST,), [(("x1",), 1)])
    assert psa["topologyAssignment"] == {"levels": [HOST], "slices": [
        {"domainCount": 1, "valuesPerLevel": [{"universal": "x1"}], "podCounts": {"universal": 1}}]}


def test_workload_requests_topology_level_not_present_in_topology():
    """scheduler_tas_test.go TestScheduleForTAS: "workload requests topology level which is not present in
    topology" -- NoMatchingFlavor, inadmissible."""
    sched, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj()],
                           [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                            .topology_request("one", required="cloud.com/non-existing").obj()])
    [pending] = result.pending
    assert (pending.reason, pending.message) == (
        "NoMatchingFlavor",
        'couldn\'t assign flavors to pod set one: Flavor "tas-default" does not contain the requested level')
    assert sched.pending("default/foo") == ("tas-main", "inadmissible")


def test_workload_requests_topology_level_only_present_in_second_flavor():
    """scheduler_tas_test.go TestScheduleForTAS: "workload requests topology level which is only present in
    second flavor"."""
    node = (make_topology_node("x1").label("tas-node", "true").label("cloud.com/custom-level", "x1")
            .allocatable({"cpu": "1", "pods": "10"}).ready())
    _, result = _cycle([make_topology("tas-custom-topology", "cloud.com/custom-level").obj(), _tas_flavor().obj(),
                        _tas_flavor("tas-custom-flavor", "tas-custom-topology").obj(),
                        make_cq("tas-main").flavor("tas-default", cpu="50").flavor("tas-custom-flavor", cpu="50")
                        .obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                        .topology_request("one", required="cloud.com/custom-level").obj()], nodes=[node])
    psa = _assignment(result)["podSetAssignments"][0]
    assert psa["flavors"] == {"cpu": "tas-custom-flavor"}
    assert _domains(psa) == (("cloud.com/custom-level",), [(("x1",), 1)])
    assert result.admitted[0].event_message.endswith(
        'Flavors considered: one: tas-default(NoFit;Flavor "tas-default" does not contain the requested level)')


def test_workload_does_not_fit_within_the_node_capacity():
    """scheduler_tas_test.go TestScheduleForTAS: "workload does not get scheduled as it does not fit within the node
    capacity" -- TopologyPlacementFailed, in Kueue's words."""
    sched, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj()],
                           [make_wl("default", "foo").queue("tas-main").podset("one", 2, cpu="1")
                            .topology_request("one", required=HOST).obj()])
    [pending] = result.pending
    assert (pending.reason, pending.message) == (
        "TopologyPlacementFailed",
        'couldn\'t assign flavors to pod set one: topology "tas-single-level" allows to fit only 1 out of 2 pod(s)')
    assert sched.pending("default/foo") == ("tas-main", "inadmissible")
    assert not result.admitted


def test_node_capacity_already_used_by_another_tas_workload():
    """scheduler_tas_test.go TestScheduleForTAS: "workload does not get scheduled as the node capacity is already
    used by another TAS workload" -- it would fit on empty domains, so it waits (WaitingForQuota)."""
    admitted = (make_wl("default", "bar-admitted").queue("tas-main").podset("one", 1, cpu="1")
                .topology_request("one", required=HOST).admitted("tas-main", {"one": {"cpu": "tas-default"}})
                .topology_assignment("one", [HOST], [(["x1"], 1)]).obj())
    sched, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj()],
                           [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                            .topology_request("one", required=HOST).obj(), admitted])
    [pending] = result.pending
    assert (pending.reason, pending.message) == (
        "WaitingForQuota",
        'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s). '
        'Total nodes: 1; excluded: resource "cpu": 1')
    assert sched.pending("default/foo") == ("tas-main", "inadmissible")


def test_node_capacity_already_used_by_a_non_tas_pod():
    """scheduler_tas_test.go TestScheduleForTAS: "workload does not get scheduled as the node capacity is already
    used by a non-TAS pod" -- a Pending pod bound to x1 counts."""
    _, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                        .topology_request("one", required=HOST).obj()],
                       pods=[make_bound_pod("test-pending").node_name("x1").phase("Pending").request("cpu", "600m")])
    [pending] = result.pending
    assert (pending.reason, pending.message) == (
        "TopologyPlacementFailed",
        'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s). '
        'Total nodes: 1; excluded: resource "cpu": 1')


def test_node_capacity_completely_used_by_non_tas_pod():
    """scheduler_tas_test.go TestScheduleForTAS: "workload does not get scheduled as node capacity is completely
    used by non-TAS pod"."""
    node = (make_topology_node("x1").label("tas-node", "true").label(HOST, "x1")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "1"}).ready())
    _, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                        .topology_request("one", required=HOST).obj()], nodes=[node],
                       pods=[make_bound_pod("test-pending").node_name("x1").phase("Running").request("cpu", "1")
                             .request("memory", "1Gi")])
    [pending] = result.pending
    assert pending.reason == "TopologyPlacementFailed"
    assert pending.message.endswith('excluded: resource "cpu": 1')


def test_tainted_node_with_the_toleration_on_the_resource_flavor():
    """scheduler_tas_test.go TestScheduleForTAS: "scheduling workload on a tainted node when the toleration is on
    ResourceFlavor"."""
    node = (make_topology_node("x1").label("tas-node", "true").label(HOST, "x1")
            .allocatable({"cpu": "1", "pods": "10"}).taint("example.com/gpu", "present", "NoSchedule").ready())
    flavor = _tas_flavor().tolerations([{"key": "example.com/gpu", "operator": "Exists"}])
    _, result = _cycle([flavor.obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                        .topology_request("one", preferred=HOST).obj()], nodes=[node])
    assert _domains(_assignment(result)["podSetAssignments"][0]) == ((HOST,), [(("x1",), 1)])


def test_next_cycle_sees_the_admitted_workloads_domains():
    """scheduler_tas_test.go TestScheduleForTAS: "workload does not get scheduled as the node capacity is already
    used by another TAS workload", reached through the cache: the first workload admitted in one cycle holds x1
    in the next."""
    sched, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj()],
                           [make_wl("default", n).queue("tas-main").created(NOW + i).podset("one", 1, cpu="1")
                            .topology_request("one", required=HOST).obj() for i, n in enumerate(("a", "b"))])
    assert [a.key for a in result.admitted] == ["default/a"]
    second = sched.schedule(NOW + 1)
    assert not second.admitted and [(p.key, p.reason) for p in second.pending] == [("default/b", "WaitingForQuota")]


def test_same_cycle_admission_holds_its_domains_for_the_next_head():
    """The cache's TAS usage of a workload assumed earlier in the cycle (Snapshot.AddUsage's TAS part): two
    ClusterQueues on one TAS flavor, one free host; the second head does not get it too."""
    objs = [_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj(),
            make_cq("other").flavor("tas-default", cpu="50").obj(), make_lq("other").cluster_queue("other").obj()]
    wls = [make_wl("default", "a").queue("tas-main").podset("one", 1, cpu="1").topology_request("one", required=HOST)
           .obj(),
           make_wl("default", "b").queue("other").created(NOW + 1).podset("one", 1, cpu="1")
           .topology_request("one", required=HOST).obj()]
    _, result = _cycle(objs, wls)
    assert [a.key for a in result.admitted] == ["default/a"]
    assert [p.key for p in result.pending] == ["default/b"]


# ------------------------------------------------------------------------------------------------ ungater
LEVELS = [BLOCK, RACK]


def _gated(name: str, ps: str = "main", **labels: str) -> dict:
    pod = make_bound_pod(name, "ns").annotation("kueue.x-k8s.io/workload", "unit-test").label(
        "kueue.x-k8s.io/podset", ps)
    for k, v in labels.items():
        pod = pod.label(k.replace("__", "/").replace("_", "-"), v)
    obj = pod.obj()
    obj["spec"]["schedulingGates"] = [{"name": TOPOLOGY_GATE}]
    return obj


def _ungated(name: str, selector: dict, phase: str | None = None) -> dict:
    obj = _gated(name)
    del obj["spec"]["schedulingGates"]
    obj["spec"]["nodeSelector"] = dict(selector)
    if phase:
        obj["status"]["phase"] = phase
    return obj


def _counts(pairs) -> dict:
    out: dict = {}
    for _, sel in pairs:
        key = tuple(sorted(sel.items()))
        out[key] = out.get(key, 0) + 1
    return out


def test_ungate_single_pod():
    """topology_ungater_test.go TestReconcile: "ungate single pod"."""
    got = assign_gated_pods(Assignment(tuple(LEVELS), [(("b1", "r1"), 1)]), [_gated("pod")])
    assert [(p["metadata"]["name"], s) for p, s in got] == [("pod", {BLOCK: "b1", RACK: "r1"})]


def test_ungate_multiple_pods_in_a_single_domain():
    """topology_ungater_test.go TestReconcile: "ungate multiple pods in a single domain"."""
    got = assign_gated_pods(Assignment(tuple(LEVELS), [(("b1", "r1"), 2)]), [_gated("pod1"), _gated("pod2")])
    assert _counts(got) == {((BLOCK, "b1"), (RACK, "r1")): 2}


def test_ungate_multiple_pods_across_multiple_domains():
    """topology_ungater_test.go TestReconcile: "ungate multiple pods across multiple domains"."""
    got = assign_gated_pods(Assignment(tuple(LEVELS), [(("b1", "r1"), 1), (("b1", "r2"), 1)]),
                            [_gated("pod1"), _gated("pod2")])
    assert _counts(got) == {((BLOCK, "b1"), (RACK, "r1")): 1, ((BLOCK, "b1"), (RACK, "r2")): 1}


def test_expect_single_pod_one_already_running_dont_ungate_second():
    """topology_ungater_test.go TestReconcile: "expect single pod; one already running - don't ungate second pod"."""
    pods = [_ungated("pod-already-running", {BLOCK: "b1", RACK: "r1"}, "Running"), _gated("pod-gated")]
    assert assign_gated_pods(Assignment(tuple(LEVELS), [(("b1", "r1"), 1)]), pods) == []


def test_expect_single_pod_one_ungated_pod_failed_ungate_second():
    """topology_ungater_test.go TestReconcile: "expect single pod; one ungated pod failed - ungate second pod"."""
    pods = pods_for_pod_set([_ungated("pod-already-running", {BLOCK: "b1", RACK: "r1"}, "Failed"),
                             _gated("pod-gated")], "unit-test", "main")
    got = assign_gated_pods(Assignment(tuple(LEVELS), [(("b1", "r1"), 1)]), pods)
    assert [(p["metadata"]["name"], s) for p, s in got] == [("pod-gated", {BLOCK: "b1", RACK: "r1"})]


def test_expect_single_pod_one_ungated_pod_succeeded_ungate_second():
    """topology_ungater_test.go TestReconcile: "expect single pod; one ungated pod succeeded - ungate second
    pod"."""
    pods = pods_for_pod_set([_ungated("pod-done", {BLOCK: "b1", RACK: "r1"}, "Succeeded"), _gated("pod-gated")],
                            "unit-test", "main")
    assert [p["metadata"]["name"] for p, _ in assign_gated_pods(
        Assignment(tuple(LEVELS), [(("b1", "r1"), 1)]), pods)] == ["pod-gated"]


def test_two_pods_one_already_ungated_second_to_ungate():
    """topology_ungater_test.go TestReconcile: "two pods, one already ungated, second to ungate" -- the ungated pod
    holds its domain, the gated one takes the other."""
    pods = [_ungated("pod1", {BLOCK: "b1", RACK: "r1"}), _gated("pod2")]
    got = assign_gated_pods(Assignment(tuple(LEVELS), [(("b1", "r1"), 1), (("b1", "r2"), 1)]), pods)
    assert [(p["metadata"]["name"], s) for p, s in got] == [("pod2", {BLOCK: "b1", RACK: "r2"})]


def test_workload_annotation_and_pod_set_label_select_the_pods():
    """topology_ungater_test.go TestReconcile: "workload admitted by TAS with single pod without the Workload
    annotation - Pod remains gated" and "... without the PodSet label - Pod remains gated"."""
    no_annotation = _gated("a")
    del no_annotation["metadata"]["annotations"]["kueue.x-k8s.io/workload"]
    no_label = _gated("b")
    del no_label["metadata"]["labels"]["kueue.x-k8s.io/podset"]
    assert pods_for_pod_set([no_annotation, no_label], "unit-test", "main") == []


COMPLETION = "batch.kubernetes.io/job-completion-index"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_RANKS = TopologyRequest(pod_index_label=COMPLETION)


def _indexed(name: str, index: int, job: int | None = None, gated: bool = True) -> dict:
    pod = _gated(name)
    pod["metadata"]["labels"][COMPLETION] = str(index)
    if job is not None:
        pod["metadata"]["labels"][JOB_INDEX] = str(job)
    if not gated:
        del pod["spec"]["schedulingGates"]
    return pod


def test_ranks_batch_job_for_all_pods():
    """topology_ungater_test.go TestReconcile: "ranks: ungate pods according to their ranks for batch/Job - for all
    Pods" -- completion index i takes the i-th slot of the assignment, whatever the pods' names."""
    pods = [_indexed(n, i) for n, i in (("a", 3), ("b", 0), ("c", 2), ("d", 1))]
    got = assign_gated_pods(Assignment(tuple(LEVELS), [(("b1", "r1"), 1), (("b1", "r2"), 2), (("b2", "r1"), 1)]),
                            pods, JOB_RANKS, 4)
    assert {p["metadata"]["name"]: (s[BLOCK], s[RACK]) for p, s in got} == {
        "b": ("b1", "r1"), "d": ("b1", "r2"), "c": ("b1", "r2"), "a": ("b2", "r1")}


def test_ranks_batch_job_some_pods_already_scheduled():
    """topology_ungater_test.go TestReconcile: "ranks: ungate pods according to their ranks for batch/Job - some
    Pods already scheduled" -- the ungated rank-0 pod sits in its slot, the gated ones take theirs."""
    placed = _indexed("a", 0, gated=False)
    placed["spec"]["nodeSelector"] = {BLOCK: "b1", RACK: "r1"}
    pods = [placed, _indexed("b", 2), _indexed("c", 1)]
    got = assign_gated_pods(Assignment(tuple(LEVELS), [(("b1", "r1"), 1), (("b1", "r2"), 1), (("b2", "r1"), 1)]),
                            pods, JOB_RANKS, 3)
    assert {p["metadata"]["name"]: s[BLOCK] + s[RACK] for p, s in got} == {"c": "b1r2", "b": "b2r1"}


def test_ranks_jobset_for_all_pods():
    """topology_ungater_test.go TestReconcile: "ranks: support rank-based ordering for JobSet - for all Pods" --
    rank = job index x pods per Job (count / subGroupCount) + completion index."""
    pods = [_indexed(f"p{n}", ci, job) for n, (job, ci) in enumerate(((1, 1), (0, 1), (1, 0), (0, 0)))]
    request = TopologyRequest(pod_index_label=COMPLETION, sub_group_index_label=JOB_INDEX, sub_group_count=2)
    got = assign_gated_pods(Assignment((HOST,), [(("x1",), 2), (("x2",), 2)]), pods, request, 4)
    assert {p["metadata"]["name"]: s[HOST] for p, s in got} == {"p3": "x1", "p1": "x1", "p2": "x2", "p0": "x2"}


def test_ranks_jobset_only_a_subset_of_pods_observed_so_far():
    """topology_ungater_test.go TestReconcile: "ranks: support rank-based ordering for JobSet - only subset of pods
    is observed so far" -- the pods per Job come from the PodSet's count, not from the pods seen."""
    request = TopologyRequest(pod_index_label=COMPLETION, sub_group_index_label=JOB_INDEX, sub_group_count=2)
    got = assign_gated_pods(Assignment((HOST,), [(("x1",), 2), (("x2",), 2)]), [_indexed("only", 0, 1)], request, 4)
    assert [(p["metadata"]["name"], s[HOST]) for p, s in got] == [("only", "x2")]


def test_ranks_repeated_ranks_fall_back_to_greedy():
    """topology_ungater_test.go TestReconcile: "ranks: gracefully handle situation with repeated ranks" -- every pod
    still gets a domain, greedily."""
    pods = [_indexed(f"p{i}", 0) for i in range(3)]
    got = assign_gated_pods(Assignment((HOST,), [(("x1",), 1), (("x2",), 2)]), pods, JOB_RANKS, 3)
    assert _counts(got) == {((HOST, "x1"),): 1, ((HOST, "x2"),): 2}


def test_ranks_going_below_zero_fall_back_to_greedy():
    """topology_ungater_test.go TestReconcile: "ranks: gracefully handle situation with ranks going below 0" -- an
    index below the group's offset is no rank."""
    pods = [_indexed("p0", 0), _indexed("p1", 1)]
    got = assign_gated_pods(Assignment((HOST,), [(("x1",), 1), (("x2",), 1)]), pods, JOB_RANKS, 2, offset=1,
                            max_rank=3)
    assert [(p["metadata"]["name"], s[HOST]) for p, s in got] == [("p0", "x1"), ("p1", "x2")]


def test_ranks_assignment_shorter_than_the_pod_set_falls_back_to_greedy():
    """topology_ungater_test.go TestReconcile: "ranks: TopologyAssignment shorter than the PodSet count falls back to
    greedy assignment" -- rank 1 has no slot in a one-pod assignment; the pod takes the free one."""
    got = assign_gated_pods(Assignment(tuple(LEVELS), [(("b1", "r1"), 1)]), [_indexed("w1", 1)], JOB_RANKS, 2)
    assert [(p["metadata"]["name"], s) for p, s in got] == [("w1", {BLOCK: "b1", RACK: "r1"})]


def _ungater_store(admitted: bool = True, with_assignment: bool = True):
    store = Store(Environment())
    ungater = TopologyUngater(store, store.env)
    wl = make_wl("ns", "unit-test").podset("main", 1, cpu="1")
    if admitted:
        wl = wl.admitted("cq", {"main": {"cpu": "f"}})
        if with_assignment:
            wl = wl.topology_assignment("main", LEVELS, [(["b1", "r1"], 1)])
    store.create(wl.obj())
    store.create(_gated("pod"))
    store.env.run(1)
    return store, ungater


def test_reconcile_ungates_and_writes_the_node_selector():
    """topology_ungater_test.go TestReconcile: "ungate single pod", through the store: the gate goes and the
    domain's labels are the pod's nodeSelector."""
    store, _ = _ungater_store()
    pod = store.get("Pod", "ns", "pod")
    assert not has_gate(pod) and pod["spec"]["nodeSelector"] == {BLOCK: "b1", RACK: "r1"}


def test_reconcile_workload_without_admission_pod_remains_gated():
    """topology_ungater_test.go TestReconcile: "workload without admission - pod remains gated" and "workload
    admitted but without topology assignment - pod remains gated"."""
    for admitted, with_assignment in ((False, False), (True, False)):
        store, _ = _ungater_store(admitted, with_assignment)
        assert has_gate(store.get("Pod", "ns", "pod"))


def test_is_tas():
    """topology_ungater_test.go TestIsTAS: every case (no annotations, preferred, required, slice required,
    unconstrained, an unrelated annotation)."""
    assert not is_tas({}) and not is_tas({"foo": "bar"})
    for key in (PREFERRED, REQUIRED, SLICE, UNCONSTRAINED):
        assert is_tas({key: "x"})


# ------------------------------------------------------------------------------------------------ annotations
def test_annotations_to_topology_request():
    """jobframework/tas.go: the PodSet's topologyRequest from its template's annotations."""
    assert from_annotations({}) is None
    assert from_annotations({REQUIRED: BLOCK}).to_api() == {"required": BLOCK}
    assert from_annotations({PREFERRED: RACK}).to_api() == {"preferred": RACK}
    assert from_annotations({UNCONSTRAINED: "true"}).to_api() == {"unconstrained": True}
    assert from_annotations({REQUIRED: BLOCK, SLICE: HOST, SLICE_SIZE: "2"}).to_api() == {
        "required": BLOCK, "podSetSliceRequiredTopology": HOST, "podSetSliceSize": 2}


def test_validation_more_than_one_topology_annotation():
    """tas_validation_test.go: more than one of required / preferred / unconstrained is refused."""
    assert validation_errors({REQUIRED: BLOCK, PREFERRED: RACK}, "spec.template.metadata") == [
        ("spec.template.metadata.annotations",
         f'Invalid value: must not contain more than one topology annotation: ["{REQUIRED}", "{PREFERRED}", '
         f'"{UNCONSTRAINED}"]')]


def test_validation_slice_size_and_topology_go_together():
    """tas_validation_test.go: a slice topology needs a slice size, a slice size needs a slice topology, and the
    size is a positive number."""
    path = "spec.template.metadata"
    assert validation_errors({SLICE: HOST}, path) == [
        (f"{path}.annotations[{SLICE_SIZE}]", f"Required value: must be set when '{SLICE}' is specified")]
    assert validation_errors({SLICE_SIZE: "2"}, path) == [
        (f"{path}.annotations[{SLICE_SIZE}]", f"Forbidden: may not be set when '{SLICE}' is not specified")]
    assert validation_errors({SLICE: HOST, SLICE_SIZE: "0"}, path) == [
        (f"{path}.annotations[{SLICE_SIZE}]", 'Invalid value: "0": must be greater than or equal to 1')]
    assert validation_errors({UNCONSTRAINED: "maybe"}, path) == [
        (f"{path}.annotations[{UNCONSTRAINED}]", 'Invalid value: "maybe": must be a boolean value')]


# ------------------------------------------------------------------------------------------------ encoding
def test_v1beta2_encoding_prefix_suffix_and_universal():
    """tas_assignment.go singleCompactTopologyAssignmentEncoding: a common prefix and suffix come out of the
    roots, equal values are universal, equal counts universal -- and reading it back gives the domains."""
    a = Assignment((BLOCK, HOST), [(("b1", "node-1-a"), 2), (("b1", "node-22-a"), 2)])
    api = a.to_api()
    assert api == {"levels": [BLOCK, HOST], "slices": [{
        "domainCount": 2, "valuesPerLevel": [{"universal": "b1"},
                                             {"individual": {"prefix": "node-", "suffix": "-a", "roots": ["1", "22"]}}],
        "podCounts": {"universal": 2}}]}
    assert assignment_from_api(api) == a
    b = Assignment((HOST,), [(("aba",), 1), (("ababa",), 3)])  # prefix and suffix may not overlap
    assert assignment_from_api(b.to_api()) == b


# ------------------------------------------------------------------------------------------------ end to end
TOPO_BLOCK = "cloud.google.com/gce-topology-block"


def _two_blocks(annotations: dict | None, tas: bool = True) -> list[dict]:
    """Two 4-node pools, one GKE block each (the block label set on the pool), and a 4-pod Job asking 12 of a
    node's 16 CPUs per pod, so each pod takes a node of its own."""
    job = make_job("train").queue("main").pods(4).cpu("12").duration("30m")
    for k, v in (annotations or {}).items():
        job._obj["spec"]["template"]["metadata"]["annotations"][k] = v
    flavor = make_flavor("tas").node_labels({"team": "ml"})
    if tas:
        flavor = flavor.topology_name("gke")
    return [make_scenario().obj(),
            make_pool("block-a", "e2-standard-16", 4).node_labels(team="ml", **{TOPO_BLOCK: "block-a"}).obj(),
            make_pool("block-b", "e2-standard-16", 4).node_labels(team="ml", **{TOPO_BLOCK: "block-b"}).obj(),
            make_topology("gke", TOPO_BLOCK, HOST).obj(), flavor.obj(),
            make_cq("cq").flavor("tas", cpu="128").obj(), make_lq("main").cluster_queue("cq").obj(), job.obj()]



def test_end_to_end_required_block_keeps_every_pod_in_one_block():
    """KEP-2724's user story on a GKE-like cluster of two blocks: with podset-required-topology on the block
    label Kueue admits the Job with a topology assignment inside one block, its pods are created gated, the
    ungater pins each to a host of that block, and kube-scheduler binds them there; the Workload's admission
    carries the v1beta2 topologyAssignment."""
    result = kt_run(objects=_two_blocks({REQUIRED: TOPO_BLOCK}))
    wl = result.last("Workload", prefix="job-train-", at=600)
    assert condition(wl, "Admitted")["status"] == "True"
    ta = assignment_from_api(wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"])
    assert ta.levels == (HOST,) and sum(c for _, c in ta.domains) == 4
    names = sorted({o["metadata"]["name"] for _, _, o in result.versions("Pod", prefix="train-")})
    assert len(names) == 4
    for n in names:
        first = next(o for _, e, o in result.versions("Pod", prefix=n) if e == "ADDED")
        assert {"name": TOPOLOGY_GATE} in first["spec"]["schedulingGates"]
        assert first["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == wl["metadata"]["name"]
    pods = [result.last("Pod", prefix=n, at=600) for n in names]
    nodes = [p["spec"]["nodeName"] for p in pods]
    assert all(p["spec"]["nodeSelector"][HOST] == p["spec"]["nodeName"] for p in pods)
    assert sorted(nodes) == sorted(v[0] for v, _ in ta.domains)
    blocks = {result.last("Node", prefix=n)["metadata"]["labels"][TOPO_BLOCK] for n in nodes}
    assert len(blocks) == 1 and len(set(nodes)) == 4
    assert condition(result.last("Workload", prefix="job-train-"), "Finished")["status"] == "True"


def test_end_to_end_without_the_annotation_pods_may_spread():
    """The same Job on a plain flavor (no topologyName): no assignment, no gate, and kube-scheduler's spreading
    scores put the pods in both blocks."""
    result = kt_run(objects=_two_blocks(None, tas=False))
    wl = result.last("Workload", prefix="job-train-", at=600)
    assert "topologyAssignment" not in wl["status"]["admission"]["podSetAssignments"][0]
    names = sorted({o["metadata"]["name"] for _, _, o in result.versions("Pod", prefix="train-")})
    nodes = [result.last("Pod", prefix=n, at=600)["spec"]["nodeName"] for n in names]
    blocks = {result.last("Node", prefix=n)["metadata"]["labels"][TOPO_BLOCK] for n in nodes}
    assert blocks == {"block-a", "block-b"}


def test_end_to_end_required_block_larger_than_a_block_stays_pending():
    """Five pods of a node each cannot fit a 4-node block: the Workload stays pending with Kueue's message."""
    objs = _two_blocks({REQUIRED: TOPO_BLOCK})
    objs[-1]["spec"]["parallelism"] = objs[-1]["spec"]["completions"] = 5
    result = kt_run(objects=objs)
    wl = result.last("Workload", prefix="job-train-", at=600)
    qr = condition(wl, "QuotaReserved")
    assert qr["status"] == "False" and qr["reason"] == "TopologyPlacementFailed"
    assert qr["message"] == ('couldn\'t assign flavors to pod set main: topology "gke" allows to fit only 4 out '
                             'of 5 pod(s)')
    assert not result.versions("Pod", prefix="train-")


def test_cluster_queue_with_a_tas_flavor_and_no_topology_is_inactive():
    """clusterqueue_test.go (pkg/cache/scheduler) TopologyNotFound: a TAS flavor whose Topology does not exist
    keeps its ClusterQueue inactive until the Topology is created."""
    sched = KueueScheduler()
    sched.set_namespace("default", {})
    sched.tas_inputs = lambda: ([_single_node().obj()], [])
    for obj in (_tas_flavor(topology="missing").obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj(),
                make_lq("tas-main").cluster_queue("tas-main").obj()):
        sched.apply(obj)
    sched.add_workload(make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                       .topology_request("one", required=HOST).obj())
    assert sched.inactive_reason("tas-main") == (
        'TopologyNotFound: there is no Topology "missing" for TAS flavor "tas-default"')
    assert not sched.schedule(NOW).admitted  # an inactive ClusterQueue offers no head
    sched.apply(make_topology("missing", HOST).obj())
    assert sched.inactive_reason("tas-main") == ""
    assert [a.key for a in sched.schedule(NOW + 1).admitted] == ["default/foo"]


def test_validate_refuses_what_kueues_job_webhook_refuses():
    """tas_validation_test.go through `kubetwin validate`: a queued Job with two topology annotations is an error
    at its template, a numeric podset-group-name too; the multi-layer constraints annotation is accepted with a
    notice (not modelled); an unqueued Job is not Kueue's."""
    from kubetwin.api.loader import load_text
    from kubetwin.validation.validate import validate

    def job(annotations: dict, queued: bool = True) -> str:
        labels = "{kueue.x-k8s.io/queue-name: main}" if queued else "{}"
        ann = "".join(f"\n        {k}: {v}" for k, v in annotations.items())
        return (f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: j, namespace: default, labels: {labels}}}\n"
                f"spec:\n  template:\n    metadata:\n      annotations:{ann}\n    spec:\n      restartPolicy: Never\n"
                "      containers: [{name: c, image: busybox}]\n")

    two = {REQUIRED: BLOCK, PREFERRED: HOST}
    diags = [d for d in validate(load_text(job(two), "j.yaml")) if d.field.startswith("spec.template")]
    assert [(d.severity, d.field, d.line) for d in diags] == [("error", "spec.template.metadata.annotations", 7)]
    assert not [d for d in validate(load_text(job(two, queued=False), "j.yaml")) if d.severity == "error"]
    layers = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
    grouped = validate(load_text(job({REQUIRED: BLOCK, "kueue.x-k8s.io/podset-group-name": "g", layers: "x"}),
                                 "j.yaml"))
    assert [(d.severity, d.field.rsplit("[", 1)[-1]) for d in grouped if d.field.startswith("spec.template")] == [
        ("notice", f"{layers}]")]
    numeric = validate(load_text(job({REQUIRED: BLOCK, "kueue.x-k8s.io/podset-group-name": "'7'"}), "j.yaml"))
    assert [d.message for d in numeric if "group-name" in d.field] == ['Invalid value: "7": must not be a number']


def test_end_to_end_jobset_leader_and_workers_of_one_group_share_a_block():
    """kueue.x-k8s.io/podset-group-name on a JobSet's leader and workers (KEP-2724's LeaderWorkerSet story): the
    two pod sets are placed together, the leader beside a worker on a host with room for both, in the tighter of
    the two blocks that holds the group (BestFit: the 3-node block, not the 4-node one)."""
    from kueue_builders import make_configuration

    def rjob(name: str, pods: int, cpu: str) -> dict:
        return {"name": name, "replicas": 1, "template": {"spec": {
            "parallelism": pods, "completions": pods, "completionMode": "Indexed", "template": {
                "metadata": {"annotations": {"kubetwin.io/duration": "20m", REQUIRED: TOPO_BLOCK,
                                             "kueue.x-k8s.io/podset-group-name": "lws"}},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}}}}

    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "train", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "main"}},
              "spec": {"replicatedJobs": [rjob("leader", 1, "2"), rjob("workers", 3, "12")]}}
    objs = [make_scenario().obj(),
            make_pool("block-a", "e2-standard-16", 3).node_labels(team="ml", **{TOPO_BLOCK: "block-a"}).obj(),
            make_pool("block-b", "e2-standard-16", 4).node_labels(team="ml", **{TOPO_BLOCK: "block-b"}).obj(),
            make_topology("gke", TOPO_BLOCK, HOST).obj(),
            make_flavor("tas").node_labels({"team": "ml"}).topology_name("gke").obj(),
            make_cq("cq").flavor("tas", cpu="128").obj(), make_lq("main").cluster_queue("cq").obj(),
            make_configuration().fields(integrations={"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}).obj(),
            jobset]
    result = kt_run(objects=objs)
    wl = result.last("Workload", prefix="jobset-train-", at=300)
    leader, workers = (assignment_from_api(psa["topologyAssignment"])
                       for psa in wl["status"]["admission"]["podSetAssignments"])
    assert sum(c for _, c in leader.domains) == 1 and sum(c for _, c in workers.domains) == 3
    assert leader.domains[0][0] in [v for v, _ in workers.domains]  # the leader shares a worker's host
    names = sorted({o["metadata"]["name"] for _, _, o in result.versions("Pod", prefix="train-")})
    nodes = [result.last("Pod", prefix=n, at=300)["spec"]["nodeName"] for n in names]
    assert {result.last("Node", prefix=n)["metadata"]["labels"][TOPO_BLOCK] for n in nodes} == {"block-a"}


def test_tas_workload_trimmed_by_partial_admission():
    """scheduler_tas_test.go TestScheduleForTAS: "TAS workload gets scheduled as trimmed by partial admission" --
    5 pods, minCount 1, one host with room for one: admitted with count 1 on x1."""
    _, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50", memory="50Gi").obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("one", 5, min_count=1, cpu="1")
                        .topology_request("one", required=HOST).obj()])
    psa = _assignment(result)["podSetAssignments"][0]
    assert psa["count"] == 1 and psa["resourceUsage"] == {"cpu": "1"}
    assert _domains(psa) == ((HOST,), [(("x1",), 1)])


def test_workload_with_zero_value_request_gets_scheduled():
    """scheduler_tas_test.go TestScheduleForTAS: "workload with zero value request gets scheduled"."""
    _, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50", memory="50Gi").obj()],
                       [make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="0", memory="10Mi").obj()])
    psa = _assignment(result)["podSetAssignments"][0]
    assert psa["resourceUsage"] == {"cpu": "0", "memory": "10Mi"}
    assert _domains(psa) == ((HOST,), [(("x1",), 1)])


def _with_affinity(wl: dict, key: str, value: str) -> dict:
    wl["spec"]["podSets"][0]["template"]["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}}
    return wl


def test_does_not_admit_workload_when_node_does_not_match_required_affinity():
    """scheduler_tas_test.go TestScheduleForTAS: "does not admit workload when node does not match required
    affinity" -- the host is excluded by affinity and the Workload stays inadmissible."""
    wl = _with_affinity(make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                        .topology_request("one", preferred=HOST).obj(), "unused-key", "value")
    sched, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj()], [wl])
    assert not result.admitted
    [pending] = result.pending
    assert pending.message.endswith("Total nodes: 1; excluded: affinity: 1")
    assert sched.pending("default/foo") == ("tas-main", "inadmissible")


def test_admits_workload_when_node_matches_required_affinity():
    """scheduler_tas_test.go TestScheduleForTAS: "admits workload when node matches required affinity"."""
    node = (make_topology_node("x1").label("tas-node", "true").label(HOST, "x1")
            .label("expected-label", "expected-value").allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"}).ready())
    wl = _with_affinity(make_wl("default", "foo").queue("tas-main").podset("one", 1, cpu="1")
                        .topology_request("one", preferred=HOST).obj(), "expected-label", "expected-value")
    _, result = _cycle([_tas_flavor().obj(), make_cq("tas-main").flavor("tas-default", cpu="50").obj()], [wl],
                       nodes=[node])
    assert _domains(_assignment(result)["podSetAssignments"][0]) == ((HOST,), [(("x1",), 1)])


def _zero_capacity_nodes():
    """scheduler_tas_test.go `nodesWithZeroCapacityInstance`: x1 with 0 CPU, x2 and x3 with 1, all in rack r1."""
    return [make_topology_node(n).label("tas-node", "true").label(HOST, n).label("cloud.provider.com/rack", "r1")
            .allocatable({"cpu": cpu, "pods": "10"}).ready() for n, cpu in (("x1", "0"), ("x2", "1"), ("x3", "1"))]


def test_admits_workload_when_nodes_are_partially_empty():
    """scheduler_tas_test.go TestScheduleForTAS: "admits workload when nodes are partially empty; unconstrained",
    "...; preferred" and "...; required" -- each lands on x2 and x3."""
    rack = "cloud.provider.com/rack"
    for request in ({"unconstrained": True}, {"preferred": rack}, {"required": rack}):
        _, result = _cycle([make_topology("tas-two-level", rack, HOST).obj(),
                            _tas_flavor(topology="tas-two-level").obj(),
                            make_cq("tas-main").flavor("tas-default", cpu="50", memory="50Gi").obj()],
                           [make_wl("default", "foo").queue("tas-main").podset("one", 2, cpu="1")
                            .topology_request("one", **request).obj()], nodes=_zero_capacity_nodes())
        psa = _assignment(result)["podSetAssignments"][0]
        assert psa["resourceUsage"] == {"cpu": "2"}, request
        assert _domains(psa) == ((HOST,), [(("x2",), 1), (("x3",), 1)]), request
