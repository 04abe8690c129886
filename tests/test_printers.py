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
