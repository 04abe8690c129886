"""The LocalQueue reconciler's Active condition, as Kueue writes it (kubernetes-sigs/kueue
pkg/controller/core/localqueue_controller.go Reconcile / UpdateStatusIfChanged): True "Ready" while its ClusterQueue
exists and is active, False "ClusterQueueDoesNotExist" while it does not exist, False "ClusterQueueIsInactive" while
it is inactive (any of the cache's reasons); flipped when the ClusterQueue is created later or deleted, whatever
order the controllers were created in (Store.reverse_dispatch).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import condition
from k8s_builders import make_job, make_pool, make_scenario
from kueue_builders import make_cq, make_flavor, make_lq
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.runner import run as kt_run
from kubetwin.store.store import Store

READY = ("True", "Ready", "Can submit new workloads to localQueue")
MISSING = ("False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
INACTIVE = ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")


def _objects(*queue_objs: dict) -> list[dict]:
    return [make_scenario("30m").obj(), make_pool("cpu", "e2-standard-16", 1).obj(), *queue_objs,
            make_lq("main").cluster_queue("cq").obj(), make_job("train").queue("main").obj()]


def _active(result, at: float | None = None) -> tuple[str, str, str]:
    c = condition(result.last("LocalQueue", "main", namespace="default", at=at), "Active")
    return c.get("status"), c.get("reason"), c.get("message")


def _timeline(result) -> list[tuple[float, tuple]]:
    """(time, Active as status/reason/message) each time it changed."""
    rows: list[tuple[float, tuple]] = []
    for t, _, o in result.versions("LocalQueue", "main", namespace="default"):
        c = condition(o, "Active")
        state = (c.get("status"), c.get("reason"), c.get("message"))
        if c and (not rows or rows[-1][1] != state):
            rows.append((t, state))
    return rows


def test_cluster_queue_exists_and_is_active() -> None:
    result = kt_run(objects=_objects(make_flavor("default").obj(), make_cq("cq").flavor("default", cpu="8").obj()))
    assert _timeline(result) == [(0.0, READY)]
    c = condition(result.last("LocalQueue", "main", namespace="default"), "Active")
    assert c["observedGeneration"] == 1 and c["lastTransitionTime"] == result.last("LocalQueue", "main")[
        "metadata"]["creationTimestamp"]


def test_cluster_queue_missing_then_created_at_10m() -> None:
    cq = make_cq("cq").flavor("default", cpu="8").obj()
    cq["metadata"]["annotations"] = {"kubetwin.io/create-at": "10m"}
    result = kt_run(objects=_objects(make_flavor("default").obj(), cq))
    assert _timeline(result) == [(0.0, MISSING), (600.0, READY)]
    assert result.first_time("Workload", lambda o: condition(o, "Admitted").get("status") == "True",
                             prefix="job-train-") == 600.0


@pytest.mark.parametrize("shape", ["missing flavor", "missing admission check", "stopPolicy Hold"])
def test_cluster_queue_inactive(shape: str) -> None:
    cq = make_cq("cq").flavor("default", cpu="8").obj()
    flavors = [make_flavor("default").obj()]
    if shape == "missing flavor":
        flavors = []
    elif shape == "missing admission check":
        cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "nowhere"}]}
    else:
        cq["spec"]["stopPolicy"] = "Hold"
    result = kt_run(objects=_objects(*flavors, cq))
    assert _timeline(result) == [(0.0, INACTIVE)]


def test_inactive_cluster_queue_becomes_active_when_its_flavor_appears() -> None:
    flavor = make_flavor("default").obj()
    flavor["metadata"]["annotations"] = {"kubetwin.io/create-at": "5m"}
    result = kt_run(objects=_objects(flavor, make_cq("cq").flavor("default", cpu="8").obj()))
    assert _timeline(result) == [(0.0, INACTIVE), (300.0, READY)]


def test_cluster_queue_deleted_at_10m() -> None:
    cq = make_cq("cq").flavor("default", cpu="8").obj()
    cq["metadata"]["annotations"] = {"kubetwin.io/delete-at": "10m"}
    result = kt_run(objects=_objects(make_flavor("default").obj(), cq))
    assert _timeline(result) == [(0.0, READY), (600.0, MISSING)]
    active = condition(result.last("LocalQueue", "main", namespace="default"), "Active")
    assert active["lastTransitionTime"].endswith("00:10:00Z")


def test_controller_creation_order_does_not_change_the_conditions(monkeypatch) -> None:
    def shapes() -> list[dict]:
        created = make_cq("cq").flavor("default", cpu="8").obj()
        created["metadata"]["annotations"] = {"kubetwin.io/create-at": "10m", "kubetwin.io/delete-at": "20m"}
        return _objects(make_flavor("default").obj(), created)
    forward = _timeline(kt_run(objects=shapes()))
    monkeypatch.setattr(Store, "reverse_dispatch", True)
    assert _timeline(kt_run(objects=shapes())) == forward == [(0.0, MISSING), (600.0, READY), (1200.0, MISSING)]


def test_get_and_describe_localqueue_show_kueues_columns_and_the_condition(tmp_path: Path) -> None:
    out = tmp_path / "run"
    kt_run(objects=_objects(make_flavor("default").obj(), make_cq("cq").flavor("default", cpu="8").obj()), out=out)
    res = CliRunner().invoke(app, ["get", "localqueue", "--run", str(out)])
    assert res.exit_code == 0, res.output
    # the CRD's additionalPrinterColumns after NAME, and no AGE (the API server adds Age only to a CRD without
    # columns), as `kubectl get localqueue` prints: NAME CLUSTERQUEUE PENDING WORKLOADS ADMITTED WORKLOADS
    header = res.stdout.splitlines()[0].split()
    assert header == ["NAME", "CLUSTERQUEUE", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"]
    res = CliRunner().invoke(app, ["describe", "localqueue", "main", "--run", str(out)])
    assert res.exit_code == 0, res.output
    assert "  Conditions:\n" in res.stdout
    for line in ("Message:", "Can submit new workloads to localQueue", "Reason:", "Ready", "Type:", "Active"):
        assert line in res.stdout


@pytest.mark.parametrize("policy", ["Hold", "HoldAndDrain"])
def test_local_queue_stop_policy_is_a_notice_naming_what_the_run_does(policy: str) -> None:
    """The twin does not read a LocalQueue's spec.stopPolicy (Kueue: Active False "Stopped" "LocalQueue is stopped",
    no new admissions, HoldAndDrain also evicts): validate says so; None or no stopPolicy says nothing."""
    import yaml

    from kubetwin.api.loader import load_text
    from kubetwin.validation.validate import validate

    def notices(lq: dict) -> list:
        docs = [make_flavor("default").obj(), make_cq("cq").flavor("default", cpu="8").obj(), lq]
        return [d for d in validate(load_text(yaml.safe_dump_all(docs), "s.yaml"))
                if d.severity == "notice" and "stopPolicy" in d.field]
    stopped = make_lq("main").cluster_queue("cq").obj()
    stopped["spec"]["stopPolicy"] = policy
    (d,) = notices(stopped)
    assert d.field == "spec.stopPolicy" and d.obj == "LocalQueue/default/main"
    assert d.message.startswith(f"LocalQueue stopPolicy {policy} is not modelled: Kueue would mark this LocalQueue "
                                "Active False (Stopped, \"LocalQueue is stopped\")")
    assert d.message.endswith("the run queues and admits its Workloads as with stopPolicy None")
    stopped["spec"]["stopPolicy"] = "None"
    assert notices(stopped) == [] and notices(make_lq("main").cluster_queue("cq").obj()) == []


def test_local_queue_stop_policy_notice_is_repeated_in_the_run_summary() -> None:
    lq = make_lq("main").cluster_queue("cq").obj()
    lq["spec"]["stopPolicy"] = "Hold"
    objs = [make_scenario("30m").obj(), make_pool("cpu", "e2-standard-16", 1).obj(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="8").obj(), lq, make_job("train").queue("main").obj()]
    result = kt_run(objects=objs)
    assert any("LocalQueue stopPolicy Hold is not modelled" in n for n in result.summary["notices"])
    assert _active(result) == READY  # what the run does: the queue admits as with None
