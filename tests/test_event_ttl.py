"""The API server deletes an Event an hour after its last write (kube-apiserver --event-ttl 1h, GKE's default):
`get events --at` lists the last hour's, a recurring event lives on while it recurs, and a run's report and
RunResult.events still know every event that happened."""

from __future__ import annotations

from k8s_builders import make_pod, make_pool, make_scenario

from kubetwin.report.rundir import state_at
from kubetwin.runner import run
from kubetwin.store.eventttl import EVENT_TTL


def _events_at(out, at: float) -> list[dict]:
    objs, _, _ = state_at(out, at, {"Event"})
    return list(objs.values())


def test_an_event_goes_an_hour_after_its_last_write(tmp_path) -> None:
    objs = [make_scenario("3h").obj(), make_pool("cpu", "e2-standard-8", 1).obj(),
            make_pod("early").cpu("1").duration("10m").obj(),
            make_pod("late").cpu("1").duration("10m").create_at("2h").obj()]
    res = run(objects=objs, out=tmp_path / "r")
    history = [(t, etype, o) for t, _, etype, o in res.history if o["kind"] == "Event"]
    for t, etype, o in history:
        if etype == "DELETED":
            last = max(t2 for t2, e2, o2 in history if o2["metadata"]["name"] == o["metadata"]["name"]
                       and e2 != "DELETED")
            assert t - last == EVENT_TTL
    about = {o["involvedObject"]["name"] for o in _events_at(tmp_path / "r", 1800)}
    assert "early" in about
    about = {o["involvedObject"]["name"] for o in _events_at(tmp_path / "r", 2 * 3600 + 1200)}
    assert "early" not in about and "late" in about
    # what happened stays known: RunResult lists every event recorded, the report's sources are the versions
    assert {e.event["involvedObject"]["name"] for e in res.recorded_events()} >= {"early", "late"}
    assert any(etype == "DELETED" for _, etype, _ in history)


def test_a_recurring_event_lives_while_it_recurs(tmp_path) -> None:
    """FailedScheduling of a pod that never fits is written again at each retry: its lease is renewed each time."""
    objs = [make_scenario("3h").obj(), make_pool("cpu", "e2-standard-8", 1).obj(),
            make_pod("huge").cpu("64").obj()]
    res = run(objects=objs, out=tmp_path / "r")
    reasons = {(o["involvedObject"]["name"], o["reason"]) for o in _events_at(tmp_path / "r", 3 * 3600)}
    assert ("huge", "FailedScheduling") in reasons
    failed = [(t, etype, o) for t, _, etype, o in res.history
              if o["kind"] == "Event" and o["reason"] == "FailedScheduling"]
    recurring = failed[-1][2]["metadata"]["name"]
    versions = [(etype, o["count"]) for _, etype, o in failed if o["metadata"]["name"] == recurring]
    assert versions[-1][1] > 12 and all(etype != "DELETED" for etype, _ in versions)  # one Event, never expired
