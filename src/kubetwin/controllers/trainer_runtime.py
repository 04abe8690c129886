"""Kubeflow Trainer v2: the JobSet a TrainJob becomes under its TrainingRuntime or ClusterTrainingRuntime.

Pure functions over plain dicts, shared by the Trainer controller (controllers/trainer.py), Kueue's TrainJob
integration (kueue/controller/jobframework.py, which reads the same JobSet's pod sets, as upstream's
getChildJobSet does) and validation. Followed (kubeflow/trainer @8c0f5059):
- pkg/runtime/core/trainingruntime.go newRuntimeInfo: the template's labels and annotations (and the runtime
  patches' metadata) are the JobSet's; the runtime patches are strategic-merged into the JobSet spec
  (mergeRuntimePatches: replicated jobs keep the template's order); each replicated Job's pod count is its
  parallelism, the trainer's mlPolicy.numNodes; trainer.resourcesPerNode is merged into the `node` container;
- plugins/torch/torch.go EnforceMLPolicy: trainer.numNodes, numProcPerNode ("auto" unless set: the CPU count,
  rounded up, when the node has no GPU), the PET_* variables, port 29500, envInjection targets;
- plugins/jax/jax.go and plugins/plainml/plainml.go: numNodes, the JAX_* variables, the TrainJob's env;
- plugins/coscheduling: the pods' scheduling.x-k8s.io/pod-group label;
- plugins/jobset/jobset.go syncParallelCount and Build, builder.go Initializer/Trainer: parallelism and
  completions, replicas 1 for the ancestors, STORAGE_URI, image/command/args/env, suspend, the owner reference.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from kubetwin.api.patch import MERGE_KEYS, strategic_merge
from kubetwin.k8s.conditions import conditions_of, find_condition, is_condition_true, set_condition
from kubetwin.k8s.ownerrefs import owner_ref
from kubetwin.k8s.units import UnitError, parse_quantity

GROUP = "trainer.kubeflow.org"
API_VERSION = f"{GROUP}/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"  # constants.LabelTrainJobAncestor
DATASET_INITIALIZER, MODEL_INITIALIZER, TRAINER, NODE = "dataset-initializer", "model-initializer", "trainer", "node"
TRAINER_PORT = 29500  # constants.ContainerTrainerPort
STORAGE_URI = "STORAGE_URI"  # plugins/jobset/constants InitializerEnvStorageUri
INITIALIZER_VOLUME = "initializer"  # plugins/jobset/constants VolumeNameInitializer
COMPLETION_INDEX_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # scheduler-plugins PodGroupLabel (the coscheduling plugin)
TORCH_ENVS = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
TORCHTUNE_ENTRYPOINT = ["tune", "run"]  # constants.TorchTuneEntrypoint
POLICIES = ("torch", "mpi", "jax", "xgboost", "flux")


class RuntimeNotFound(LookupError):
    """The TrainJob's runtimeRef names no runtime in the store."""


def runtime_kind(trainjob: dict) -> str:
    """runtimeRef.kind, with the CRD's default (ClusterTrainingRuntime)."""
    return str(((trainjob.get("spec") or {}).get("runtimeRef") or {}).get("kind") or "ClusterTrainingRuntime")


def runtime_key(trainjob: dict) -> tuple[str, str, str]:
    """(kind, namespace, name) of the runtime a TrainJob names (a ClusterTrainingRuntime has no namespace)."""
    kind = runtime_kind(trainjob)
    name = str(((trainjob.get("spec") or {}).get("runtimeRef") or {}).get("name") or "")
    ns = (trainjob.get("metadata") or {}).get("namespace") or "default" if kind == "TrainingRuntime" else ""
    return kind, ns, name


def ml_policy_source(runtime_spec: dict) -> str | None:
    """Which mlPolicy source the runtime sets (torch, mpi, jax, xgboost, flux), None for none (plainml)."""
    ml = runtime_spec.get("mlPolicy") or {}
    return next((p for p in POLICIES if ml.get(p) is not None), None)


def _merge_policy(field: str, doc: list, patch: list) -> str | None:
    """JobSetSpec's replicatedJobs merge on name (the strategic patch upstream reads from the Go structs); the
    pod spec's lists as the built-in kinds'."""
    return "name" if field == "replicatedJobs" else MERGE_KEYS.get(field)


def _upsert_env(env: list[dict], *new: dict) -> None:
    """apply.UpsertEnvVars: a variable of the same name is replaced where it stands, others are appended."""
    for var in new:
        for i, old in enumerate(env):
            if old.get("name") == var.get("name"):
                env[i] = copy.deepcopy(var)
                break
        else:
            env.append(copy.deepcopy(var))


def _upsert_port(ports: list[dict], port: int) -> None:
    if not any(p.get("containerPort") == port for p in ports):
        ports.append({"containerPort": port})


def _ancestor(rj: dict) -> str | None:
    return (((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}).get(ANCESTOR)


def _pod_spec(rj: dict) -> dict:
    job = rj.setdefault("template", {}).setdefault("spec", {})
    return job.setdefault("template", {}).setdefault("spec", {})


def _container(rj: dict, name: str) -> dict | None:
    return next((c for c in _pod_spec(rj).get("containers") or [] if c.get("name") == name), None)


def _quantity(value: Any) -> float:
    try:
        return float(parse_quantity(str(value)))
    except UnitError:
        return 0.0


def gpus_per_node(resources: dict | None) -> int:
    """runtime.GetNumGPUPerNode: the first resource whose name contains "gpu" (requests, else limits), rounded
    up as resource.Quantity.Value() rounds."""
    def num(rl: dict | None) -> int:
        for name, q in (rl or {}).items():
            if "gpu" in str(name).lower():
                return math.ceil(_quantity(q))
        return 0
    res = resources or {}
    return num(res.get("requests")) or num(res.get("limits"))


def cpus_per_node(resources: dict | None) -> int:
    """torch.go getNumCPUPerNode: the CPU request rounded up, else the limit, else 0."""
    res = resources or {}
    req = (res.get("requests") or {}).get("cpu")
    if req is None or _quantity(req) == 0:
        lim = (res.get("limits") or {}).get("cpu")
        return math.ceil(_quantity(lim)) if lim is not None else 0
    return math.ceil(_quantity(req))


def _runtime_resources(spec: dict) -> dict | None:
    """runtime.ExtractResourcePerNodeFromRuntime: the `node` container's resources of the job named `node` or
    labelled as the trainer."""
    for rj in spec.get("replicatedJobs") or []:
        if rj.get("name") == NODE or _ancestor(rj) == TRAINER:
            for c in ((((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")
                      or {}).get("containers") or []:
                if c.get("name") == NODE and c.get("resources") is not None:
                    return {"limits": dict((c["resources"] or {}).get("limits") or {}),
                            "requests": dict((c["resources"] or {}).get("requests") or {})}
    return None


def num_proc_per_node(trainjob: dict, resources: dict | None) -> str:
    """PET_NPROC_PER_NODE as torch.go sets it: the TrainJob's numProcPerNode, else "auto" on a GPU node, else the
    node's CPU count (at least 1)."""
    trainer = (trainjob.get("spec") or {}).get("trainer") or {}
    if trainer.get("numProcPerNode") is not None:
        return str(trainer["numProcPerNode"])
    if gpus_per_node(resources) == 0:
        return str(max(1, cpus_per_node(resources)))
    return "auto"


def torch_envs(trainjob: dict, num_nodes: int, nproc: str) -> tuple[list[dict], list[dict]]:
    """(the PET_* variables every trainer node gets, the master's address and port) -- torch.go petEnvs and
    masterEnvVars: the master is the first pod of the trainer's first Job, `<trainjob>-node-0-0.<trainjob>`."""
    name = trainjob["metadata"]["name"]
    pet = [{"name": "PET_NNODES", "value": str(num_nodes)},
           {"name": "PET_NPROC_PER_NODE", "value": nproc},
           {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}}}]
    master = [{"name": "PET_MASTER_ADDR", "value": f"{name}-{NODE}-0-0.{name}"},
              {"name": "PET_MASTER_PORT", "value": str(TRAINER_PORT)}]
    return pet, master


def propagated_metadata(trainjob: dict, runtime_spec: dict) -> tuple[dict, dict]:
    """The JobSet's labels and annotations: the runtime template's, then each runtime patch's template metadata
    (newRuntimeInfo's propagationLabels / propagationAnnotations). The TrainJob's own are not copied."""
    tmeta = (runtime_spec.get("template") or {}).get("metadata") or {}
    labels, annotations = dict(tmeta.get("labels") or {}), dict(tmeta.get("annotations") or {})
    for patch in (trainjob.get("spec") or {}).get("runtimePatches") or []:
        pmeta = (((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {}).get("metadata") or {}
        labels.update(pmeta.get("labels") or {})
        annotations.update(pmeta.get("annotations") or {})
    return labels, annotations


def merged_spec(trainjob: dict, runtime_spec: dict) -> dict:
    """The runtime's JobSet spec with the TrainJob's runtime patches merged in (mergeRuntimePatches)."""
    spec = copy.deepcopy((runtime_spec.get("template") or {}).get("spec") or {})
    order = {rj.get("name"): i for i, rj in enumerate(spec.get("replicatedJobs") or [])}
    for patch in (trainjob.get("spec") or {}).get("runtimePatches") or []:
        pspec = (((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec")
        if pspec:
            spec = strategic_merge(spec, pspec, _merge_policy)
    if spec.get("replicatedJobs"):
        spec["replicatedJobs"] = sorted(spec["replicatedJobs"], key=lambda rj: order.get(rj.get("name"), 0))
    return spec


def build_jobset(trainjob: dict, runtime: dict) -> dict:
    """The JobSet the Trainer applies for `trainjob` under `runtime` (a TrainingRuntime or ClusterTrainingRuntime
    object): labels, annotations, spec, suspend and the owner reference."""
    rspec = runtime.get("spec") or {}
    tspec = trainjob.get("spec") or {}
    trainer = tspec.get("trainer") or {}
    ml = rspec.get("mlPolicy")
    source = ml_policy_source(rspec)
    labels, annotations = propagated_metadata(trainjob, rspec)
    spec = merged_spec(trainjob, rspec)
    rjs = spec.get("replicatedJobs") or []
    counts: dict[str, int] = {}
    for rj in rjs:  # newRuntimeInfo: each pod set's count, resourcesPerNode into the trainer's node container
        count = int(((rj.get("template") or {}).get("spec") or {}).get("parallelism") or 1)
        if _ancestor(rj) == TRAINER and ml is not None:
            count = int(ml.get("numNodes") or 1)
        counts[rj["name"]] = count
        launcher_as_node = source == "mpi" and ((ml or {}).get("mpi") or {}).get("runLauncherAsNode") \
            and rj.get("name") == NODE
        if trainer.get("resourcesPerNode") is not None and (
                (_ancestor(rj) == TRAINER and ml is not None) or launcher_as_node):
            c = _container(rj, NODE)
            if c is not None:
                c["resources"] = strategic_merge(c.get("resources") or {}, trainer["resourcesPerNode"])
    trainer_rj = next((rj for rj in rjs if _ancestor(rj) == TRAINER), None)
    # EnforceMLPolicy (torch, jax, mpi and plainml alike): the TrainJob's numNodes wins over the runtime's
    if trainer_rj is not None and trainer.get("numNodes") is not None and source in (None, "torch", "jax", "mpi"):
        counts[trainer_rj["name"]] = int(trainer["numNodes"])
    node_container = _container(trainer_rj, NODE) if trainer_rj is not None and tspec.get("trainer") else None
    if node_container is not None:
        _upsert_env(node_container.setdefault("env", []), *(trainer.get("env") or []))
    num_nodes = counts.get(trainer_rj["name"], 1) if trainer_rj is not None else 1
    if source == "torch":
        resources = trainer["resourcesPerNode"] if trainer.get("resourcesPerNode") is not None else \
            _runtime_resources((rspec.get("template") or {}).get("spec") or {})
        pet, master = torch_envs(trainjob, num_nodes, num_proc_per_node(trainjob, resources))
        if node_container is not None:
            _upsert_env(node_container["env"], *pet)
            if trainer.get("command") != TORCHTUNE_ENTRYPOINT:
                _upsert_env(node_container["env"], *master)
            _upsert_port(node_container.setdefault("ports", []), TRAINER_PORT)
        for target in (((ml or {}).get("torch") or {}).get("envInjection") or {}).get("targets") or []:
            rj = next((r for r in rjs if r.get("name") == target.get("jobName")), None)
            for cname in target.get("containerNames") or []:
                pod = _pod_spec(rj) if rj is not None else {}
                c = next((x for x in (pod.get("initContainers") or []) + (pod.get("containers") or [])
                          if x.get("name") == cname), None)
                if c is not None:
                    _upsert_env(c.setdefault("env", []), *pet, *master)
    elif source == "jax" and node_container is not None:
        name = trainjob["metadata"]["name"]
        _upsert_env(node_container["env"], {"name": "JAX_NUM_PROCESSES", "value": str(num_nodes)},
                    {"name": "JAX_PROCESS_ID", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}}},
                    {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{name}-{NODE}-0-0.{name}:{TRAINER_PORT}"})
        _upsert_port(node_container.setdefault("ports", []), TRAINER_PORT)
    pod_labels: dict[str, str] = {}
    if ((rspec.get("podGroupPolicy") or {}).get("coscheduling")) is not None:
        pod_labels[POD_GROUP_LABEL] = trainjob["metadata"]["name"]
    for rj in rjs:  # syncParallelCount
        jspec = rj.setdefault("template", {}).setdefault("spec", {})
        jspec["parallelism"] = jspec["completions"] = counts[rj["name"]]
    _initializers(rjs, tspec.get("initializer") or {})
    for rj in rjs:  # builder.go Trainer
        if _ancestor(rj) != TRAINER:
            continue
        rj["replicas"] = 1
        c = _container(rj, NODE)
        if c is not None and tspec.get("trainer") is not None:
            for key in ("image", "command", "args"):
                if trainer.get(key) is not None:
                    c[key] = copy.deepcopy(trainer[key])
            _upsert_env(c.setdefault("env", []), *(trainer.get("env") or []))
    if pod_labels:
        for rj in rjs:
            tmpl = rj["template"]["spec"].setdefault("template", {})
            tmeta = tmpl.setdefault("metadata", {})
            tmeta["labels"] = {**(tmeta.get("labels") or {}), **pod_labels}
    if "suspend" in tspec:
        spec["suspend"] = tspec["suspend"]
    meta: dict = {"name": trainjob["metadata"]["name"],
                  "namespace": trainjob["metadata"].get("namespace") or "default"}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if trainjob["metadata"].get("uid"):
        meta["ownerReferences"] = [owner_ref({**trainjob, "apiVersion": API_VERSION, "kind": "TrainJob"})]
    return {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": meta, "spec": spec}


def _initializers(rjs: list[dict], initializer: dict) -> None:
    """builder.go Initializer: the initializer Jobs run once; their containers get STORAGE_URI, the TrainJob's
    env and its secret as envFrom."""
    for rj in rjs:
        step = _ancestor(rj)
        if step not in (DATASET_INITIALIZER, MODEL_INITIALIZER):
            continue
        rj["replicas"] = 1
        cfg = initializer.get("dataset" if step == DATASET_INITIALIZER else "model")
        c = _container(rj, step)
        if c is None or cfg is None:
            continue
        env = c.setdefault("env", [])
        if cfg.get("storageUri") is not None:
            _upsert_env(env, {"name": STORAGE_URI, "value": cfg["storageUri"]})
        _upsert_env(env, *(cfg.get("env") or []))
        if cfg.get("secretRef") is not None:
            c.setdefault("envFrom", []).append({"secretRef": {"name": cfg["secretRef"].get("name", "")}})


def trainjob_status(trainjob: dict, jobset: dict | None, now: str) -> dict:
    """The TrainJob's status from its JobSet (plugins/jobset Status: Completed -> Complete, Failed -> Failed,
    replicatedJobsStatus -> jobsStatus) and its Suspended condition (trainjob_controller.go
    setSuspendedCondition: True while suspended, False "Resumed" once it runs again)."""
    status = copy.deepcopy(trainjob.get("status") or {})
    conds = list(status.get("conditions") or [])
    if jobset is not None:
        jconds = (jobset.get("status") or {}).get("conditions") or []
        for jtype, ttype in (("Completed", "Complete"), ("Failed", "Failed")):
            c = find_condition(jconds, jtype)
            if c is not None and c.get("status") == "True":
                conds, _ = set_condition(conds, {**c, "type": ttype})
        jobs = [{"name": st.get("name"), "ready": int(st.get("ready") or 0),
                 "succeeded": int(st.get("succeeded") or 0), "failed": int(st.get("failed") or 0),
                 "active": int(st.get("active") or 0), "suspended": int(st.get("suspended") or 0)}
                for st in (jobset.get("status") or {}).get("replicatedJobsStatus") or []]
        if jobs:
            status["jobsStatus"] = jobs
    if (trainjob.get("spec") or {}).get("suspend"):
        conds, _ = set_condition(conds, {"type": "Suspended", "status": "True", "reason": "Suspended",
                                         "message": "TrainJob is suspended", "lastTransitionTime": now})
    elif is_condition_true(conds, "Suspended"):
        conds, _ = set_condition(conds, {"type": "Suspended", "status": "False", "reason": "Resumed",
                                         "message": "TrainJob is resumed", "lastTransitionTime": now})
    if conds:
        status["conditions"] = conds
    return status


def finished(trainjob: dict) -> bool:
    """trainjob.IsTrainJobFinished: Complete or Failed is True."""
    conds = conditions_of(trainjob)
    return is_condition_true(conds, "Complete") or is_condition_true(conds, "Failed")
