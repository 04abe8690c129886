"""The snapshot a cycle starts from is kept up to date with the cache's changes (issue 32) instead of being refilled
from every workload holding quota: it must equal a snapshot built from scratch after any sequence of admissions,
preemptions, releases and cycles, over a cohort tree with borrowing and lending limits."""

from __future__ import annotations

import random

from kueue_builders import make_cohort, make_cq, make_flavor, make_lq, make_wl

from kubetwin.kueue import KueueScheduler
from kubetwin.kueue.snapshot import Snapshot


def _state(snap: Snapshot) -> dict:
    nodes = {name: cq.node for name, cq in snap.cluster_queues.items()} | dict(snap.cohorts)
    usage = {name: {fr: v for fr, v in sorted(node.usage.items()) if v} for name, node in sorted(nodes.items())}
    workloads = {name: sorted(cq.workloads) for name, cq in sorted(snap.cluster_queues.items())}
    return {"usage": usage, "workloads": workloads}


def _scheduler() -> KueueScheduler:
    sched = KueueScheduler()
    sched.apply(make_flavor("default").obj())
    sched.apply(make_cohort("root").obj())
    sched.apply(make_cohort("left").parent("root").flavor("default", cpu=("4", None, "2")).obj())
    sched.apply(make_cohort("right").parent("root").obj())
    quotas = {"a": ("6", "6", "3"), "b": ("4", None, None), "c": ("8", "2", "4"), "d": ("2", "10", None)}
    for name, quota in quotas.items():
        sched.set_namespace(name)
        cohort = "left" if name in "ab" else "right"
        sched.apply(make_cq(name).cohort(cohort).preemption(within="LowerPriority", reclaim="Any")
                    .flavor("default", cpu=quota).obj())
        sched.apply(make_lq("main", name).cluster_queue(name).obj())
    return sched


def test_the_snapshot_kept_up_to_date_equals_one_built_from_the_cache():
    rng = random.Random(3)
    sched = _scheduler()
    checked = admitted = preempted = 0
    for step in range(120):
        for i in range(rng.randrange(0, 4)):
            ns = rng.choice("abcd")
            sched.add_workload(make_wl(ns, f"w{step}-{i}").queue("main").priority(rng.choice((0, 10, 20)))
                               .created(float(step)).podset("main", 1, cpu=str(rng.randint(1, 7))).obj())
        result = sched.schedule(float(step))
        admitted += len(result.admitted)
        for p in result.pending:
            for v in p.preempting:
                sched.remove_workload(v.key)  # the eviction is observed: quota released
                preempted += 1
        for key in sorted(sched.admitted):
            if rng.random() < 0.2:
                sched.remove_workload(key)  # finished
        expected = Snapshot.build(sched.cluster_queues.values(), sched.cohorts.values(), sched.flavors.values(),
                                  sched.admitted.values())
        assert _state(sched.snapshot()) == _state(expected), step
        checked += 1
    assert checked == 120 and admitted > 50 and preempted > 0
