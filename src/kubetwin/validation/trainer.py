"""Kubeflow Trainer v2: what the Trainer's validating webhooks refuse (kubeflow/trainer @8c0f5059, in their words)
and what the run does not model, said as notices.

- validator.trainjob.trainer.kubeflow.org (pkg/webhooks/trainjob_webhook.go): the runtime must exist
  ((cluster)trainingruntime.go ValidateObjects), then the plugins' Validate: torch.go (no reserved PET_* env,
  envInjection targets that exist), jobset.go (initializer Jobs, containers and volume mounts the TrainJob's
  initializer needs; runtime patches naming Jobs and containers the runtime has; no env patches for the
  initializer and node containers; a patch manager that is a domain-prefixed path).
- validator.(cluster)trainingruntime.trainer.kubeflow.org (trainingruntime_webhook.go validateReplicatedJobs): an
  ancestor Job has replicas 1 and the ancestor's container.
These need the runtime the TrainJob names, so they run across the scenario's objects (validate.validate).
"""

from __future__ import annotations

import json
import re

from kubetwin.api import fields
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.controllers import trainer_runtime as R

GROUP = R.GROUP
TRAINJOB_WEBHOOK = "validator.trainjob.trainer.kubeflow.org"
RUNTIME_WEBHOOK = {"TrainingRuntime": "validator.trainingruntime.trainer.kubeflow.org",
                   "ClusterTrainingRuntime": "validator.clustertrainingruntime.trainer.kubeflow.org"}
_ANCESTOR_CONTAINER = {R.TRAINER: R.NODE, R.MODEL_INITIALIZER: R.MODEL_INITIALIZER,
                       R.DATASET_INITIALIZER: R.DATASET_INITIALIZER}
# k8s.io/apimachinery validation.IsDomainPrefixedPath: a DNS-1123 subdomain, "/", a path
_DOMAIN_PATH = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
                          r"/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


def _value(v: object) -> str:
    """field.Invalid's value (a struct printed as JSON here; Go prints its %#v)."""
    return f'"{v}"' if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"))


def _denied(m: Manifest, webhook: str, path: str, value: object, msg: str, line_path: str | None = None,
            go_path: str | None = None) -> Diagnostic:
    return Diagnostic(m.file, m.line_of(line_path or path), m.ref, path, f'admission webhook "{webhook}" denied '
                      f"the request: {go_path or path}: Invalid value: {_value(value)}: {msg}", "")


def runtime_webhook(m: Manifest) -> list[Diagnostic]:
    """validateReplicatedJobs: an ancestor-labelled Job runs once and has the ancestor's container."""
    out = []
    base = "spec.template.spec.replicatedJobs"
    for i, rj in enumerate(fields.get_path(m.obj, base) or []):
        if not isinstance(rj, dict):
            continue
        ancestor = (((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}).get(R.ANCESTOR)
        if ancestor not in _ANCESTOR_CONTAINER:
            continue
        if rj.get("replicas", 1) != 1:
            out.append(_denied(m, RUNTIME_WEBHOOK[m.kind], f"{base}[{i}].replicas", rj.get("replicas"),
                               "always must be 1"))
        pod = ((((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {})
        names = [c.get("name") for c in pod.get("containers") or [] if isinstance(c, dict)]
        if _ANCESTOR_CONTAINER[ancestor] not in names:
            path = f"{base}[{i}].template.spec.template.spec.containers"
            out.append(_denied(m, RUNTIME_WEBHOOK[m.kind], path, pod.get("containers") or [],
                               f"must contain the required container for the ancestor: {ancestor}"))
    return out


def _containers(rspec: dict) -> dict[str, set[str]]:
    """Replicated Job name -> its init and regular container names."""
    out: dict[str, set[str]] = {}
    for rj in ((rspec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
        pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        out[rj.get("name")] = {c.get("name") for c in (pod.get("initContainers") or []) + (pod.get("containers")
                                                                                           or [])}
    return out


def _has_initializer_mount(rspec: dict, step: str) -> bool:
    for rj in ((rspec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
        if rj.get("name") != step:
            continue
        pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in pod.get("containers") or []:
            if c.get("name") == step and any(v.get("name") == R.INITIALIZER_VOLUME for v in c.get("volumeMounts")
                                             or []):
                return True
    return False


def trainjob_webhook(m: Manifest, runtime: dict | None) -> list[Diagnostic]:
    """The TrainJob's create-time refusals against the runtime it names (None: not among the objects)."""
    spec = m.obj.get("spec") or {}
    ref = spec.get("runtimeRef") or {}
    kind = R.runtime_kind(m.obj)
    full_ref = {"name": ref.get("name"), "apiGroup": ref.get("apiGroup") or GROUP, "kind": kind}
    if kind not in RUNTIME_WEBHOOK or full_ref["apiGroup"] != GROUP:  # ValidateCreate: no such runtime registry key
        at = "spec.runtimeRef.kind" if kind not in RUNTIME_WEBHOOK else "spec.runtimeRef.apiGroup"
        return [Diagnostic(m.file, m.line_of(at), m.ref, at, f'admission webhook "{TRAINJOB_WEBHOOK}" denied the '
                           f"request: unsupported runtime: {kind}.{full_ref['apiGroup']}", "")]
    if runtime is None:
        lower = kind[0].lower() + kind[1:]
        plural = "clustertrainingruntimes" if kind == "ClusterTrainingRuntime" else "trainingruntimes"
        return [_denied(m, TRAINJOB_WEBHOOK, "spec.runtimeRef", full_ref,
                        f'{plural}.{GROUP} "{ref.get("name")}" not found: specified {lower} must be created before '
                        "the TrainJob is created", "spec.runtimeRef.name",
                        "spec.RuntimeRef" if kind == "ClusterTrainingRuntime" else "spec.runtimeRef")]
    rspec = runtime.get("spec") or {}
    out: list[Diagnostic] = []
    source = R.ml_policy_source(rspec)
    names = _containers(rspec)
    if source == "torch":
        for target in (((rspec.get("mlPolicy") or {}).get("torch") or {}).get("envInjection") or {}).get(
                "targets") or []:
            for cname in target.get("containerNames") or []:
                if cname not in names.get(target.get("jobName"), set()):
                    out.append(_denied(m, TRAINJOB_WEBHOOK, "spec.runtimeRef", target,
                                       f'envInjection target podSet "{target.get("jobName")}" container "{cname}" '
                                       "not found in runtime template"))
        env = (spec.get("trainer") or {}).get("env") or []
        reserved = sorted({e.get("name") for e in env if e.get("name") in R.TORCH_ENVS})
        if reserved:
            out.append(_denied(m, TRAINJOB_WEBHOOK, "spec.trainer.env", env, "must not have reserved envs, "
                               f"invalid envs configured: [{' '.join(reserved)}]"))
    init = spec.get("initializer") or {}
    for key, step in (("dataset", R.DATASET_INITIALIZER), ("model", R.MODEL_INITIALIZER)):
        if init.get(key) is None:
            continue
        if step not in names:
            msg = f"must have {step} job when trainJob is configured with input {key}Config"
        elif step not in names[step]:
            msg = f"must have container with name - {step} in the {step} job"
        elif not _has_initializer_mount(rspec, step):
            msg = f"must have volumeMount with name - {R.INITIALIZER_VOLUME} in container {step} of the {step} job"
        else:
            continue
        out.append(_denied(m, TRAINJOB_WEBHOOK, "spec.runtimeRef", full_ref, msg, f"spec.initializer.{key}"))
    for i, patch in enumerate(spec.get("runtimePatches") or []):
        path = f"spec.runtimePatches[{i}]"
        manager = str(patch.get("manager") or "")
        if not _DOMAIN_PATH.match(manager):
            out.append(Diagnostic(m.file, m.line_of(f"{path}.manager"), m.ref, "spec.runtimePatches.manager",
                                  f'admission webhook "{TRAINJOB_WEBHOOK}" denied the request: '
                                  f'spec.runtimePatches.manager: Invalid value: "{manager}": must be a domain-'
                                  "prefixed path (such as \"acme.io/foo\")", ""))
        pspec = (((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {})
        for rj in pspec.get("replicatedJobs") or []:
            have = names.get(rj.get("name"))
            if have is None:
                msg = "must not have replicated job that doesn't exist in the runtime job template"
                out.append(_denied(m, TRAINJOB_WEBHOOK, "spec.runtimePatches", spec.get("runtimePatches"), msg,
                                   path))
                continue
            pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            for key, what in (("initContainers", "initContainer"), ("containers", "container")):
                for c in pod.get(key) or []:
                    if c.get("name") not in have:
                        msg = f"must not have {what} that doesn't exist in the runtime job {rj.get('name')}"
                    elif key == "containers" and c.get("env") and c.get("name") in _ANCESTOR_CONTAINER.values():
                        msg = (f"must not have envs for the {R.DATASET_INITIALIZER}, {R.MODEL_INITIALIZER}, "
                               f"{R.NODE} containers")
                    else:
                        continue
                    out.append(_denied(m, TRAINJOB_WEBHOOK, "spec.runtimePatches", spec.get("runtimePatches"),
                                       msg, path))
    return out


def what_the_run_does(m: Manifest, runtime: dict) -> list[Diagnostic]:
    """What of a TrainJob and its runtime the run does not model, said rather than dropped."""
    rspec = runtime.get("spec") or {}
    spec = m.obj.get("spec") or {}
    notes: list[str] = []
    source = R.ml_policy_source(rspec)
    if source in ("mpi", "xgboost", "flux"):
        notes.append(f"the {source} policy's launcher, hostfile, SSH keys and environment are not built: the JobSet "
                     "gets the runtime's replicated Jobs with numNodes, the TrainJob's image, command and env")
    if (spec.get("trainer") or {}).get("command") == R.TORCHTUNE_ENTRYPOINT:
        notes.append("torchtune's recipe and config arguments are not added to the command")
    gp = rspec.get("podGroupPolicy") or {}
    if gp.get("coscheduling") is not None or gp.get("volcano") is not None:
        notes.append("podGroupPolicy: no PodGroup is created and the default scheduler places the pods one by one "
                     "(the pods still carry the pod-group label); Kueue's admission gangs the quota")
    jspec = (rspec.get("template") or {}).get("spec") or {}
    if any(rj.get("dependsOn") for rj in jspec.get("replicatedJobs") or []):
        notes.append("the runtime's dependsOn is not modelled: every replicated Job starts at once (initializers "
                     "beside the trainer)")
    if spec.get("initializer"):
        notes.append("initializers download nothing: their pods run for their kubetwin.io/duration, if any")
    return [Diagnostic(m.file, m.line, m.ref, "", f"TrainJob: {msg}", "", "notice") for msg in notes]


def scenario(clean: list[Manifest]) -> list[Diagnostic]:
    """Each TrainJob against the runtime it names among the objects."""
    runtimes = {(m.kind, (m.obj.get("metadata") or {}).get("namespace") or "default"
                 if m.kind == "TrainingRuntime" else "", (m.obj.get("metadata") or {}).get("name")): m.obj
                for m in clean if m.kind in RUNTIME_WEBHOOK and str(m.obj.get("apiVersion", "")).startswith(GROUP)}
    out: list[Diagnostic] = []
    for m in clean:
        if m.kind != "TrainJob" or not str(m.obj.get("apiVersion", "")).startswith(GROUP):
            continue
        if ((m.obj.get("spec") or {}).get("managedBy") or "trainer.kubeflow.org/trainjob-controller") != \
                "trainer.kubeflow.org/trainjob-controller":
            out.append(Diagnostic(m.file, m.line_of("spec.managedBy"), m.ref, "spec.managedBy", "TrainJob: managed "
                                  "by MultiKueue: the Trainer leaves it to a worker cluster, which the twin does not "
                                  "run; it gets no JobSet", "", "notice"))
            continue
        kind, ns, name = R.runtime_key({**m.obj, "metadata": {**(m.obj.get("metadata") or {}),
                                                               "namespace": (m.obj.get("metadata") or {}).get(
                                                                   "namespace") or "default"}})
        runtime = runtimes.get((kind, ns, name))
        found = trainjob_webhook(m, runtime)
        out += found
        if runtime is not None and not found:
            out += what_the_run_does(m, runtime)
    return out
