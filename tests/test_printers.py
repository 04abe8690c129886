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

    from kubetwin.cli.printers import describe

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
