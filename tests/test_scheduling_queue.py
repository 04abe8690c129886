"""kube-scheduler's scheduling queue, as the upstream tests pin it (kubernetes pkg/scheduler/backend/queue/
scheduling_queue_test.go; pkg/scheduler/internal/queue before 1.32), ported to scheduler/queue.py.

activeQ is a heap ordered by the PrioritySort plugin's Less (pkg/scheduler/framework/plugins/queuesort): higher
`spec.priority` first, then the older QueuedPodInfo.Timestamp. The Timestamp is set when the pod is first added
(newQueuedPodInfo) and refreshed when it is re-added after a failed attempt (AddUnschedulableIfNotPresent:
"Refresh the timestamp since the pod is re-added"); moving it from unschedulablePods or backoffQ to activeQ keeps it.
Backoff is 1 s doubling per attempt up to 10 s, counted from that Timestamp (getBackoffTime); unschedulable pods are
flushed after 5 minutes (DefaultPodMaxInUnschedulablePodsDuration).

In each test the scheduler is "busy": nothing pops until the test does, so the queue's order is what is checked.
"""

from __future__ import annotations

import pytest
from conftest import final_objects
from k8s_builders import make_pod, make_scenario, static_node

from kubetwin.runner import run
from kubetwin.scheduler.queue import INITIAL_BACKOFF, MAX_BACKOFF, POD_MAX_IN_UNSCHEDULABLE, SchedulingQueue
from kubetwin.sim.env import Environment

FIT = "NodeResourcesFit"


def queue() -> tuple[Environment, SchedulingQueue]:
    env = Environment()
    return env, SchedulingQueue(env, lambda: None)


def advance(env: Environment, to: float) -> None:
    env.run(to)


def drain(q: SchedulingQueue) -> list[str]:
    out = []
    while (key := q.pop()) is not None:
        out.append(key)
    return out


def fail(q: SchedulingQueue, key: str) -> None:
    """Pop-and-fail as the scheduler does: the cycle that popped it rejects it on NodeResourcesFit."""
    q.failed(key, frozenset({FIT}), None, None, q.cycle)


def always(plugin: str, shape: object) -> bool:
    return True


def test_pop_orders_by_priority_then_timestamp() -> None:
    """TestPriorityQueue_Add / TestPodTimestamp "add two pod to activeQ and sort them by the timestamp"."""
    env, q = queue()
    q.add("ns/mid-0", 10)
    advance(env, 1)
    q.add("ns/low", 0)
    q.add("ns/high", 100)
    advance(env, 2)
    q.add("ns/mid-2", 10)
    assert drain(q) == ["ns/high", "ns/mid-0", "ns/mid-2", "ns/low"]


def test_move_to_active_keeps_the_older_timestamp_first() -> None:
    """TestPodTimestamp "add two pod to unschedulablePods then move them to activeQ and sort them by the timestamp":
    a pod that failed at t=0 and is moved back at t=150 goes ahead of one added at t=100 with the same priority."""
    env, q = queue()
    q.add("ns/old", 0)
    assert q.pop() == "ns/old"
    fail(q, "ns/old")  # Timestamp 0
    advance(env, 100)
    q.add("ns/new", 0)  # Timestamp 100, waiting in activeQ
    advance(env, 150)
    q.move(always)  # MoveAllToActiveOrBackoffQueue: old's 1 s backoff is over, straight to activeQ
    assert drain(q) == ["ns/old", "ns/new"]


def test_backoff_completion_keeps_the_older_timestamp_first() -> None:
    """TestPodTimestamp "add one pod to BackoffQ and move it to activeQ": the pod coming out of backoff at t=8 was
    queued (failed) at t=0, so it goes ahead of the pod added at t=5."""
    env, q = queue()
    q.add("ns/backedoff", 0)
    for attempt in range(3):  # three failed attempts (backoffs 1, 2, 4 s): the fourth backs off 8 s
        assert q.pop() == "ns/backedoff"
        fail(q, "ns/backedoff")
        q.move(always)  # a cluster event in the same cycle: to backoffQ (moveRequestCycle)
        advance(env, env.now + 2 ** attempt)
    assert q.pop() == "ns/backedoff"
    start = env.now
    fail(q, "ns/backedoff")
    q.move(always)  # into backoffQ until start + 8
    advance(env, start + 5)
    q.add("ns/fresh", 0)
    advance(env, start + 8)
    assert drain(q) == ["ns/backedoff", "ns/fresh"]


def test_re_add_after_failure_refreshes_the_timestamp() -> None:
    """AddUnschedulableIfNotPresent refreshes the Timestamp: a pod first queued at t=0 that failed at t=50 queues
    behind a pod added at t=20 once both are back in activeQ."""
    env, q = queue()
    q.add("ns/first", 0)
    advance(env, 20)
    q.add("ns/second", 0)
    advance(env, 50)
    assert q.pop() == "ns/first"
    fail(q, "ns/first")  # Timestamp 50
    q.move(always)  # same cycle: backoff from 50 to 51
    advance(env, 60)
    assert drain(q) == ["ns/second", "ns/first"]


def test_priority_beats_timestamp_after_flush() -> None:
    """TestHighPriorityFlushUnschedulablePodsLeftover: pods flushed from unschedulablePods after 5 minutes pop by
    priority first, whatever order they failed in."""
    env, q = queue()
    q.add("ns/mid", 50)
    q.add("ns/high", 100)
    for key in ("ns/high", "ns/mid"):
        assert q.pop() == key
    fail(q, "ns/mid")
    fail(q, "ns/high")
    advance(env, POD_MAX_IN_UNSCHEDULABLE)
    assert drain(q) == ["ns/high", "ns/mid"]


def test_unschedulable_pods_flushed_after_five_minutes_not_before() -> None:
    """TestPriorityQueue_initPodMaxInUnschedulablePodsDuration with the default 5 min (flushUnschedulablePodsLeftover:
    a pod that has stayed in unschedulablePods longer than podMaxInUnschedulablePodsDuration is moved)."""
    env, q = queue()
    q.add("ns/p", 0)
    q.pop()
    fail(q, "ns/p")
    advance(env, POD_MAX_IN_UNSCHEDULABLE - 1)
    assert q.pop() is None
    advance(env, POD_MAX_IN_UNSCHEDULABLE)
    assert q.pop() == "ns/p"


def test_backoff_doubles_from_one_second_to_ten() -> None:
    """TestBackOffFlow: the backoff after attempt n is 1 s * 2^(n-1), capped at 10 s (DefaultPodInitialBackoffDuration,
    DefaultPodMaxBackoffDuration), counted from the failed attempt's Timestamp."""
    env, q = queue()
    q.add("ns/p", 0)
    assert q.pop() == "ns/p"
    waits = []
    for _ in range(7):
        t0 = env.now
        fail(q, "ns/p")
        q.move(always)  # an event during the cycle sends it to backoffQ (moveRequestCycle)
        while (popped := q.pop()) is None:
            advance(env, env.now + 0.25)
        assert popped == "ns/p"
        waits.append(env.now - t0)
    assert waits == [INITIAL_BACKOFF, 2.0, 4.0, 8.0, MAX_BACKOFF, MAX_BACKOFF, MAX_BACKOFF]


def test_move_all_sends_pods_in_backoff_to_backoff_and_the_rest_to_active() -> None:
    """TestPriorityQueue_MoveAllToActiveOrBackoffQueue: a pod whose backoff has not run out goes to backoffQ and
    reaches activeQ only when it ends; one whose backoff is over goes straight to activeQ."""
    env, q = queue()
    q.add("ns/a", 0)
    q.add("ns/b", 0)
    assert q.pop() == "ns/a"
    fail(q, "ns/a")  # t=0: backoff until 1
    advance(env, 0.5)
    assert q.pop() == "ns/b"
    fail(q, "ns/b")  # t=0.5: backoff until 1.5
    advance(env, 1.2)
    q.move(always)
    assert q.pop() == "ns/a" and q.pop() is None
    advance(env, 1.5)
    assert q.pop() == "ns/b"


def test_ties_pop_in_the_order_pods_were_added() -> None:
    """Same priority and the same Timestamp (the twin's clock gives every pod created at one instant the same
    time): the pod added first pops first, so runs are deterministic and a burst keeps its creation order."""
    env, q = queue()
    for name in ("c", "a", "b"):
        q.add(f"ns/{name}", 0)
    assert drain(q) == ["ns/c", "ns/a", "ns/b"]


def test_a_pod_deleted_and_created_again_is_a_new_queued_pod() -> None:
    """Delete then Add of the same name: the new pod gets a new Timestamp; the old heap entry does not keep its
    place (the queue's Delete removes the pod from activeQ)."""
    env, q = queue()
    q.add("ns/a", 0)
    advance(env, 1)
    q.add("ns/b", 0)
    advance(env, 2)
    q.forget("ns/a")
    advance(env, 3)
    q.add("ns/a", 0)
    assert drain(q) == ["ns/b", "ns/a"]


@pytest.mark.parametrize(("b_priority", "winner"), [(0, "waiting"), (1000, "newcomer")])
def test_in_a_run_the_pod_that_waited_longer_takes_the_freed_room(b_priority: int, winner: str) -> None:
    """The room a finished pod frees at 60 s: the pod that has waited since 1 s (its failed attempt's Timestamp) and
    one created at 60 s both enter activeQ at that instant. PrioritySort gives it to the one that waited, unless the
    newcomer has the higher priority. Before, the newcomer's pod event ran first and it took the room."""
    filler = make_pod("filler").cpu("3").duration("60s").obj()
    waiting = make_pod("waiting").cpu("3").duration("1h").obj()
    waiting["metadata"]["annotations"] = {"kubetwin.io/create-at": "1s"}
    newcomer = make_pod("newcomer").cpu("3").duration("1h").obj()
    newcomer["metadata"]["annotations"] = {"kubetwin.io/create-at": "60s"}
    klass = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "newcomer"},
             "value": b_priority}
    newcomer["spec"]["priorityClassName"] = "newcomer"
    r = run(objects=[make_scenario("5m").obj(), klass, static_node("n").obj(), filler, waiting, newcomer])
    bound = {n: o["spec"].get("nodeName") for n, o in final_objects(r, "Pod").items()}
    assert bound == {"filler": "n", "waiting": "n" if winner == "waiting" else None,
                     "newcomer": "n" if winner == "newcomer" else None}


class ScanQueue(SchedulingQueue):
    """The move as a pass over every unschedulable pod in the order they entered (the twin's move before the
    buckets): the reference the bucketed move must match pod for pod."""

    def move(self, hint, plugins=None) -> None:  # type: ignore[no-untyped-def]
        self.move_request_cycle = self.cycle
        verdicts: dict = {}
        for key, qpi in list(self.unschedulable.items()):
            if "*" not in qpi.plugins:
                cand = qpi.plugins if plugins is None else qpi.plugins & plugins
                if not cand:
                    continue
                vk = (qpi.group, cand)
                if vk not in verdicts:
                    verdicts[vk] = any(hint(p, qpi.shape) for p in sorted(cand))
                if not verdicts[vk]:
                    continue
            self._leave_unschedulable(key)
            self._to_backoff(qpi)


@pytest.mark.parametrize("seed", range(6))
def test_bucketed_moves_requeue_the_same_pods_in_the_same_order_as_a_scan(seed: int) -> None:
    """Random adds, failures (by one or two of three plugins, or none: any event), events with random per-group
    verdicts, deletions and pops over simulated minutes: the bucketed queue pops the same pods at the same times
    and keeps the same unschedulable pods as the per-pod scan."""
    import random

    rng = random.Random(seed)
    plugins = ["A", "B", "C"]
    queues = []
    for cls in (SchedulingQueue, ScanQueue):
        env = Environment()
        queues.append((env, cls(env, lambda: None)))
    logs: list[list] = [[], []]
    live: list[str] = []
    for step in range(400):
        t = step * rng.choice((0.0, 0.0, 0.5, 3.0))
        op = rng.random()
        n = rng.randrange(60)
        key, priority = f"ns/p{n}", 10 * (n % 3)
        verdict = {(g, p): rng.random() < 0.3 for g in range(4) for p in plugins}
        concern = frozenset(rng.sample(plugins, rng.randint(1, 3))) if rng.random() < 0.7 else None
        rejected = frozenset(rng.sample(plugins, rng.randint(0, 2)))
        group = rng.randrange(4)
        for (env, q), log in zip(queues, logs, strict=True):
            env.run(max(env.now, t))
            if op < 0.3 and key not in live:
                q.add(key, priority)
            elif op < 0.55:
                popped = q.pop()
                log.append(("pop", env.now, popped))
                if popped is not None:
                    q.failed(popped, rejected, group, group, q.cycle)
            elif op < 0.85:
                q.move(lambda p, g, verdict=verdict: verdict[(g, p)], concern)
            else:
                q.forget(key)
            log.append(("unschedulable", list(q.unschedulable)))
        if op < 0.3:
            live.append(key)
        elif op >= 0.85 and key in live:
            live.remove(key)
    assert logs[0] == logs[1]
    assert any(entry[0] == "pop" and entry[2] for entry in logs[0])
