"""PyTorchJob (kubeflow.org/v1): what the training operator's validating webhook refuses beyond the CRD's schema
(kubeflow/training-operator release-1.9 pkg/webhooks/pytorch/pytorchjob_webhook.go validatePyTorchJob and
pkg/common/util/webhooks.go ValidateRunPolicy, in their words; it reads the object as written, before the
controller's defaults), and what the run does not model."""

from __future__ import annotations

import re

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.validation.kinds.base import KindChecks

WEBHOOK = "validator.pytorchjob.training-operator.kubeflow.org"
ROLES = ("Master", "Worker")
MANAGERS = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")  # supportedJobControllers
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
               "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex "
               "used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def webhook(m: Manifest) -> list[Diagnostic]:
    """validatePyTorchJob: the name, runPolicy.managedBy, elasticPolicy, and each replica spec."""
    obj = m.obj
    spec = obj.get("spec") or {}
    name = str((obj.get("metadata") or {}).get("name") or "")
    out: list[tuple[str, str, str]] = []  # (field path for the line, Go's path, error)
    if len(name) > 63 or not _DNS1035.match(name):
        detail = "must be no more than 63 characters" if len(name) > 63 else DNS1035_MSG
        out.append(("metadata.name", "metadata.name", f'Invalid value: "{name}": should match: {detail}'))
    manager = (spec.get("runPolicy") or {}).get("managedBy")
    if manager is not None and manager not in MANAGERS:
        out.append(("spec.runPolicy.managedBy", "spec.runPolicy.managedBy", f'Unsupported value: "{manager}": '
                    "supported values: " + ", ".join(f'"{x}"' for x in MANAGERS)))
    specs = spec.get("pytorchReplicaSpecs")
    elastic = spec.get("elasticPolicy")
    if isinstance(elastic, dict):
        if not isinstance(specs, dict) or "Worker" not in specs:
            out.append(("spec.elasticPolicy", "spec.pytorchReplicaSpecs[Worker]",
                        "Required value: must be configured if elastic policy is used"))
        if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
            out.append(("spec.elasticPolicy.nProcPerNode", "spec.elasticPolicy.nProcPerNode",
                        "Forbidden: must not be used with spec.nprocPerNode"))
    if not isinstance(specs, dict):
        out.append(("spec", "spec.pytorchReplicaSpecs", "Required value: must be required"))
        specs = {}
    for rtype, rs in specs.items():
        role = f"spec.pytorchReplicaSpecs[{rtype}]"
        here = f"spec.pytorchReplicaSpecs.{rtype}"
        if rtype not in ROLES:
            out.append((here, role, f'Unsupported value: "{rtype}": supported values: "Master", "Worker"'))
        ctrs = ((((rs or {}).get("template") or {}).get("spec") or {}).get("containers")) or []
        cpath = f"{role}.template.spec.containers"
        if not ctrs:
            out.append((here, cpath, "Required value: must be specified"))
        for i, c in enumerate(ctrs):
            if not (c or {}).get("image"):
                out.append((f"{here}.template.spec.containers[{i}]", f"{cpath}[{i}].image",
                            "Required value: must be required"))
        if not any((c or {}).get("name") == "pytorch" for c in ctrs):
            out.append((here, cpath, "Required value: must have at least one container with name pytorch"))
        replicas = (rs or {}).get("replicas")
        if rtype == "Master" and replicas != 1:
            out.append((here, f"{role}.replicas", "Forbidden: must be 1"))
        elif rtype != "Master" and isinstance(replicas, int) and replicas < 1:
            out.append((here, f"{role}.replicas", "Forbidden: must be at least 1"))
    return [Diagnostic(m.file, m.line_of(at), m.ref, go, f'admission webhook "{WEBHOOK}" denied the request: '
                       f"{go}: {msg}", "") for at, go, msg in out]


def what_the_run_does(m: Manifest) -> list[Diagnostic]:
    """The parts of a PyTorchJob the run does not model, said rather than dropped."""
    spec = m.obj.get("spec") or {}
    notes = ["no headless Service is made per pod (the twin resolves no DNS): MASTER_ADDR and the workers' "
             "init-pytorch wait are set, and the init container succeeds at once"]
    if spec.get("elasticPolicy") is not None:
        notes.append("elasticPolicy is not modelled: the pods get no PET_RDZV_* variables or HPA, PET_NNODES is "
                     "left unset as upstream leaves it, and the job runs at its replica counts")
    if (spec.get("runPolicy") or {}).get("managedBy") == "kueue.x-k8s.io/multikueue":
        notes.append("managed by MultiKueue: the operator leaves it to a worker cluster, which the twin does not "
                     "run; it gets no pods")
    if (spec.get("runPolicy") or {}).get("schedulingPolicy") is not None:
        notes.append("runPolicy.schedulingPolicy is not modelled: no PodGroup is created; the default scheduler "
                     "places the pods one by one")
    return [Diagnostic(m.file, m.line, m.ref, "", f"PyTorchJob: {msg}", "", "notice") for msg in notes]


CHECKS = KindChecks("kubeflow.org", "PyTorchJob", checks=(webhook,), when_clean=what_the_run_does)
