"""Events as client-go's EventCorrelator writes them: dedup counts, aggregation, the spam filter."""

from __future__ import annotations

from k8s_builders import make_pool, make_scenario

from kubetwin.runner import run
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store


def _deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                         {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]}}}}


def test_replicaset_events_are_aggregated_and_spam_filtered() -> None:
    result = run(objects=[make_scenario("10m").obj(), make_pool("cpu", "e2-standard-32", 2).obj(), _deployment(40)])
    writes = [(e, o) for _, _, e, o in result.history if o["kind"] == "Event"
              and o["involvedObject"]["kind"] == "ReplicaSet" and o["reason"] == "SuccessfulCreate"]
    final = {o["metadata"]["name"]: o for _, o in writes}
    plain = [o for o in final.values() if not o["message"].startswith("(combined from similar events): ")]
    combined = [o for o in final.values() if o["message"].startswith("(combined from similar events): ")]
    # 9 distinct messages pass; from the 10th on they share one aggregate Event (defaultAggregateMaxEvents 10)
    assert len(plain) == 9 and len(combined) == 1
    # the spam filter's bucket holds 25 tokens per source and object: 25 writes, the rest dropped
    assert len(writes) == 25
    assert combined[0]["count"] == 25 - 9
    # kube-scheduler records through events.k8s.io: no spam filter, one Scheduled event per pod
    scheduled = {o["involvedObject"]["name"] for _, _, e, o in result.history
                 if o["kind"] == "Event" and o["reason"] == "Scheduled"}
    assert len(scheduled) == 40


def test_identical_events_bump_count_and_tokens_refill() -> None:
    env = Environment()
    store = Store(env)
    rec = EventRecorder(store)
    pod = store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                        "spec": {}})
    for _ in range(30):
        rec.event(pod, "Warning", "BackOff", "Back-off restarting failed container", "kubelet")
    events = store.list("Event")
    assert len(events) == 1
    assert events[0]["count"] == 25  # writes 26..30 were dropped by the spam filter
    env.run(301.0)  # one token back after 300 s (defaultSpamQPS 1/300)
    rec.event(pod, "Warning", "BackOff", "Back-off restarting failed container", "kubelet")
    rec.event(pod, "Warning", "BackOff", "Back-off restarting failed container", "kubelet")
    (event,) = store.list("Event")
    assert event["count"] == 31  # the count carries the dropped observations too
