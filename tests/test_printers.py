"""kubectl's STATUS column for pods and the CRDs' printer columns over JSONPath."""

from __future__ import annotations

from kubetwin.cli.printers import jsonpath, pod_status


def test_pod_status_reads_like_kubectl():
    meta = {"name": "p"}
    assert pod_status({"metadata": meta, "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
                       "status": {"phase": "Pending"}}) == "SchedulingGated"
    assert pod_status({"metadata": meta, "spec": {}, "status": {"phase": "Failed", "reason": "Terminated"}}) \
        == "Terminated"
    assert pod_status({"metadata": meta, "spec": {}, "status": {"phase": "Failed"}}) == "Failed"
    assert pod_status({"metadata": meta, "spec": {}, "status": {"phase": "Succeeded"}}) == "Completed"


def test_printer_column_jsonpath():
    wl = {"spec": {"queueName": "main"}, "status": {"conditions": [
        {"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "False"}]}}
    assert jsonpath(wl, '.status.conditions[?(@.type=="Admitted")].status') == "False"
    assert jsonpath(wl, '.status.conditions[?(@.type=="Finished")].status') == ""
    assert jsonpath({"spec": {"cohort": "eng"}}, ".spec.cohortName || .spec.cohort") == "eng"
    assert jsonpath({"spec": {"suspend": True}}, ".spec.suspend") == "true"


def test_describe_pod_prints_tolerations_and_status_reason_as_kubectl_does() -> None:
    """kubectl describe: `key=value:effect`, `op=Exists`, `for 300s`; the pod's status Reason and Message lines."""
    from datetime import UTC, datetime

    from kubetwin.cli.describe import describe

    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "spot"},
           "spec": {"containers": [{"name": "c", "image": "x"}], "tolerations": [
               {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
               {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
               {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300},
               {"operator": "Exists"}]},
           "status": {"phase": "Failed", "reason": "Terminated",
                      "message": "Pod was terminated in response to imminent node shutdown."}}
    text = describe(pod, [], datetime(2026, 1, 1, tzinfo=UTC))
    assert "Reason:       Terminated" in text
    assert "Message:      Pod was terminated in response to imminent node shutdown." in text
    assert "Tolerations:     nvidia.com/gpu:NoSchedule op=Exists\n" in text
    assert "                 dedicated=ml:NoSchedule\n" in text
    assert "                 node.kubernetes.io/not-ready:NoExecute op=Exists for 300s\n" in text
    assert text.rstrip().endswith("op=Exists") or "\n                 op=Exists" in text


# --- `kubetwin get` of custom resources, as the API server's table for a CRD prints them ---------------------------
# With additionalPrinterColumns the table is NAME plus those columns (AGE only where the CRD lists it); columns with
# priority > 0 only under -o wide (apiextensions-apiserver tableconvertor; kueue.x-k8s.io_clusterqueues.yaml).

import pytest  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from kubetwin.cli.main import app  # noqa: E402

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def cohort_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cohort") / "run"
    res = CliRunner().invoke(app, ["run", str(EXAMPLES / "kueue-cohort-borrowing.yaml"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def get(run, *args: str) -> list[list[str]]:
    res = CliRunner().invoke(app, ["get", *args, "--run", str(run)])
    assert res.exit_code == 0, res.output
    import re

    return [re.split(r"\s{2,}", line.strip()) for line in res.output.strip().splitlines()]


def test_cluster_queues_print_the_crds_columns_and_priority_1_only_wide(cohort_run) -> None:
    rows = get(cohort_run, "clusterqueues")
    assert rows[0] == ["NAME", "COHORT", "PENDING WORKLOADS"]
    assert [r[:2] for r in rows[1:]] == [["prod", "gpu-org"], ["research", "gpu-org"]]
    wide = get(cohort_run, "cq", "-o", "wide")
    assert wide[0] == ["NAME", "COHORT", "STRATEGY", "PENDING WORKLOADS", "ADMITTED WORKLOADS"]
    # queueingStrategy is not in the manifest: the CRD's default (BestEffortFIFO) is stored, as the API server does
    assert [r[2] for r in wide[1:]] == ["BestEffortFIFO", "BestEffortFIFO"]


def test_local_queues_have_no_age_column_and_kueue_short_names_resolve(cohort_run) -> None:
    rows = get(cohort_run, "localqueues", "-A")
    assert rows[0] == ["NAMESPACE", "NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS"]
    assert get(cohort_run, "rf")[0] == ["NAME", "AGE"]  # ResourceFlavor has no printer columns
    for name in ("co", "wpc", "ac", "prc", "clusterqueues.kueue.x-k8s.io", "ClusterQueue"):
        res = CliRunner().invoke(app, ["get", name, "--run", str(cohort_run)])
        assert res.exit_code == 0, (name, res.output)
