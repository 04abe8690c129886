"""A model server's cold start, as the kubelet startup hook: pull the server image (Pending, ContainerCreating), then
start the process, load the weights from wherever the pod reads them and warm the engine up (Running, not Ready
until the readiness probe passes). The phases follow vLLM's own start-up log lines ("Loading weights took ...",
"Memory profiling takes ...", "Graph capturing finished in ...", "init engine ... took ..."); their durations
other than the weight load are twin assumptions, overridable per pod with `kubetwin.io/ready-after`."""

from __future__ import annotations

from kubetwin.controllers.kubelet import Startup, StartupHook
from kubetwin.devices.gpuruntime import GpuRuntime
from kubetwin.k8s.names import GKE_ACCELERATOR
from kubetwin.k8s.units import parse_duration
from kubetwin.serving.modelserver import recognize as modelserver
from kubetwin.serving.modelserver.modelspec import lookup_server_model
from kubetwin.serving.modelserver.sizing import StartupFailure
from kubetwin.serving.modelserver.sizing import start as start_server
from kubetwin.serving.modelserver.triton_args import pod_configmaps, probe_refused
from kubetwin.store.store import Obj, Store
from kubetwin.workloads.storage import read_path

READY_AFTER = "kubetwin.io/ready-after"
PROCESS_START_S = 15.0  # Python imports, CUDA context, tokenizer (twin assumption)
ENGINE_INIT_S = 45.0  # memory profiling, torch.compile, CUDA graph capture (twin assumption; 0 with --enforce-eager
#                       would be faster but the flag is not modelled)
IMAGE_PULL_MBPS = 150.0  # node pulling from a registry in the same region, decompression included (twin assumption)
NEVER_READY_S = 1e9  # a readiness probe the server answers 404: beyond any run's horizon
DEFAULT_IMAGE_GB = 10.0  # when the image is not in modelserver's table (twin assumption)


def _image_bytes(image: str) -> int:
    """The image's compressed size: its repository (tag and digest dropped) looked up in modelserver's table."""
    repo = image.split("@")[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo.rsplit(":", 1)[0]
    gb = next((v for name, v in modelserver.IMAGE_SIZES_GB.items() if repo == name or repo.endswith("/" + name)),
              DEFAULT_IMAGE_GB)
    return int(gb * 1e9)


def cold_start_hook(store: Store, gpus: GpuRuntime | None = None) -> StartupHook:
    """The kubelet's startup hook for model-server pods; with `gpus` (the kubelet's GpuRuntime) a server on a
    shared GPU checks and then holds its memory there. A server that cannot start on its device (serving.sizing)
    exits with vLLM's message after the stage that fails, and again at every restart (CrashLoopBackOff)."""

    def hook(pod: Obj, node: Obj | None) -> Startup | None:
        try:
            found = modelserver.find_model_server(pod["spec"], configmaps=pod_configmaps(store, pod))
        except modelserver.ModelServerError:
            return None
        if found is None:
            return None
        idx, args = found
        container = (pod["spec"].get("containers") or [])[idx]
        image = container.get("image", "")
        size = _image_bytes(image)
        pulls = [(image, size / (IMAGE_PULL_MBPS * 1e6), size)]
        spec = lookup_server_model(args.model, args.served_model_name)
        failure = None
        accel = (((node or {}).get("metadata") or {}).get("labels") or {}).get(GKE_ACCELERATOR)
        if spec is not None and accel:
            try:
                start_server(args, spec, pod, node, gpus, store)
            except StartupFailure as err:
                failure = err
            except ValueError:
                pass  # a GPU the twin cannot size: the data plane says so when the pod turns Ready
        refused = probe_refused(container) if args.triton is not None else None
        if refused is not None:  # Triton answers the probe 404 for good: Running, never Ready
            return Startup(pulls, NEVER_READY_S, f"Readiness probe failed: HTTP probe failed with statuscode: 404 "
                           f"(Triton serves no {refused})")
        ann = pod["metadata"].get("annotations") or {}
        if READY_AFTER in ann:
            return Startup(pulls, parse_duration(ann[READY_AFTER]), f"{READY_AFTER} annotation",
                           fail=str(failure) if failure else "")
        weights = spec.weight_bytes if spec is not None else 0
        path = read_path(store, pod, container, args.model)
        load = path.seconds(weights)
        if failure is not None:
            after = PROCESS_START_S + (load if failure.stage != "init" else 0.0)
            return Startup(pulls, after, f"the server exits after {after:.0f}s: {failure}", fail=str(failure))
        reason = (f"process start {PROCESS_START_S:.0f}s + weights {weights / 1e9:.1f} GB from {path.detail} "
                  f"{load:.0f}s + engine init {ENGINE_INIT_S:.0f}s")
        return Startup(pulls, PROCESS_START_S + load + ENGINE_INIT_S, reason)

    return hook
