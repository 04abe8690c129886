"""SchedulingEquivalenceHashing: a NoFit head takes the heap's equivalent workloads to the inadmissible set."""

from __future__ import annotations

from kueue_builders import make_cq, make_flavor, make_lq, make_wl

from kubetwin.kueue import KueueScheduler


def _scheduler(equivalence: bool) -> KueueScheduler:
    sched = KueueScheduler()
    sched.set_namespace("default")
    sched.apply(make_flavor("default").obj())
    sched.apply(make_cq("cq").flavor("default", cpu="4").obj())
    sched.apply(make_lq("main").cluster_queue("cq").obj())
    sched.queues.queues["cq"].equivalence_hashing = equivalence
    for i, cpu in enumerate(("8", "8", "8", "1")):  # three that can never fit, one that fits
        sched.add_workload(make_wl("default", f"w{i}").queue("main").podset("main", 1, cpu=cpu).obj())
    return sched


def test_a_no_fit_head_moves_its_equivalents_to_inadmissible():
    sched = _scheduler(equivalence=True)
    first = sched.schedule(0.0)
    assert [p.key for p in first.pending] == ["default/w0"]
    q = sched.queues.queues["cq"]
    assert sorted(q.inadmissible) == ["default/w0", "default/w1", "default/w2"]
    assert list(q.items) == ["default/w3"]
    second = sched.schedule(0.0)  # the fitting workload is the next head at once
    assert [a.key for a in second.admitted] == ["default/w3"]


def test_without_hashing_each_equivalent_is_tried_in_its_own_cycle():
    sched = _scheduler(equivalence=False)
    tried = [p.key for _ in range(3) for p in sched.schedule(0.0).pending]
    assert tried == ["default/w0", "default/w1", "default/w2"]
    assert [a.key for a in sched.schedule(0.0).admitted] == ["default/w3"]


def test_an_arrival_of_a_bulk_moved_hash_waits_in_the_inadmissible_set():
    """cluster_queue.go PushOrUpdate: a BestEffortFIFO workload whose scheduling hash was bulk-moved goes straight
    to the inadmissible set (hashToBulkMoveReason), until queueInadmissibleWorkloads clears the hashes."""
    sched = _scheduler(equivalence=True)
    sched.schedule(0.0)  # w0 NoFit: w1, w2 go with it
    sched.add_workload(make_wl("default", "w4").queue("main").podset("main", 1, cpu="8").obj())
    sched.add_workload(make_wl("default", "w5").queue("main").podset("main", 1, cpu="2").obj())
    q = sched.queues.queues["cq"]
    assert "default/w4" in q.inadmissible and "default/w5" in q.items  # another hash is queued as usual
    assert sched.pending("default/w4") == ("cq", "inadmissible")
    sched.queue_inadmissible("cq")  # quota released: every hash is evaluated afresh
    assert "default/w4" in q.items
    sched.schedule(0.0)  # a NoFit head again bulk-moves, and the next arrival is parked again
    sched.add_workload(make_wl("default", "w6").queue("main").podset("main", 1, cpu="8").obj())
    assert "default/w6" in q.inadmissible


def test_without_hashing_an_arrival_is_always_queued():
    sched = _scheduler(equivalence=False)
    sched.schedule(0.0)
    sched.add_workload(make_wl("default", "w4").queue("main").podset("main", 1, cpu="8").obj())
    assert "default/w4" in sched.queues.queues["cq"].items
