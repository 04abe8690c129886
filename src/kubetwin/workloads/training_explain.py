"""training.json and `kubetwin explain job`: where a training job's step time goes, and which change helps most.

Why a file of its own: the step breakdown lives in the run's TrainingModel (workloads/training_hook.py) and is gone
when the process ends; `write_run` saves, per training Job or JobSet, the spec, the placement (nodes, network tier,
placement group, zones), the storage paths, the breakdown, the ranked what-ifs and the steady-state DCGM gauges, so
`kubetwin explain job NAME --run DIR` reads the folder alone, like `get` and `describe` do.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.k8s.names import GKE_ACCELERATOR, GKE_NODEPOOL, GKE_TPU_ACCELERATOR, INSTANCE_TYPE, ZONE
from kubetwin.sim.historyfile import history_path, open_history
from kubetwin.workloads import dcgm
from kubetwin.workloads.storage import ReadPath
from kubetwin.workloads.training import PLACEMENT_GROUP, Placement, StepTime, job_seconds
from kubetwin.workloads.training_spec import TrainingSpec

FILE = "training.json"
JOB_RESOURCES = {"job": "Job", "jobs": "Job", "jobset": "JobSet", "jobsets": "JobSet"}


def _labels(node: dict) -> dict:
    return (node.get("metadata") or {}).get("labels") or {}


def _network(placement: Placement) -> tuple[str, str]:
    """(tier, placement kind) as workloads/network.py sees the job's nodes."""
    from kubetwin.workloads import network

    nodes = placement.nodes()
    topo = network.topology(nodes, placement.ranks_on(nodes))
    return topo.tier or network.node_net(nodes[0]).tier, topo.placement


def _path(path: str | None, rp: ReadPath | None) -> dict | None:
    if rp is None:
        return {"path": path, "kind": "local", "detail": "no volume: local disk, no stall", "bytes_per_second": None} \
            if path else None
    return {"path": path, "kind": rp.kind, "detail": rp.detail, "bytes_per_second": rp.bytes_per_second}


def _device(placement: Placement) -> dict:
    """{"device": ...}: what one rank's process computes on, when it is not a whole GPU (a MIG instance, an MPS or
    time-slicing share, a TPU chip; devices/container.py); nothing for a whole GPU."""
    d = placement.device
    if d is None or d.mode == "":
        return {}
    return {"device": {"kind": d.kind, "accelerator": d.accelerator, "partition": d.partition,
                       "memory_mib": round(d.reported_mib, 1), "compute": round(d.compute, 4), "clients": d.clients}}


def job_record(ns: str, name: str, kind: str, spec: TrainingSpec, placement: Placement, st: StepTime) -> dict:
    """One training.json entry (plain JSON types)."""
    nodes = placement.nodes()
    tier, where = _network(placement)
    ranks = placement.ranks_on(nodes)
    node_rows = [{"name": (n.get("metadata") or {}).get("name", ""), "ranks": r,
                  "machine_type": _labels(n).get(INSTANCE_TYPE, ""),
                  "pool": _labels(n).get(GKE_NODEPOOL, ""),
                  "zone": _labels(n).get(ZONE, ""),
                  "placement_group": _labels(n).get(PLACEMENT_GROUP)} for n, r in zip(nodes, ranks, strict=True)]
    accel = _labels(nodes[0]).get(GKE_ACCELERATOR) or _labels(nodes[0]).get(
        GKE_TPU_ACCELERATOR, "") if nodes else ""
    ex = st.explain()
    return {
        "namespace": ns, "name": name, "kind": kind, "spec": asdict(spec),
        "placement": {"world": placement.world, "accelerator": accel, "peak_tflops": placement.peak_tflops,
                      "mfu": spec.mfu or placement.default_mfu, "tier": tier, "placement": where,
                      "zones": sorted({r["zone"] for r in node_rows}),
                      "placement_groups": sorted({r["placement_group"] or "" for r in node_rows}),
                      "nodes": node_rows, **_device(placement),
                      **({"gpudirect_missing": list(placement.gpudirect)} if placement.gpudirect else {})},
        "storage": {"data": _path(spec.data_path, placement.read), "loading": spec.loading,
                    "checkpoint_write": _path(spec.checkpoint_path, placement.checkpoint_write),
                    "checkpoint_read": _path(spec.checkpoint_path, placement.checkpoint_read)},
        "breakdown": {"step_seconds": ex["step_seconds"], "parts": ex["parts"], "fractions": ex["fractions"],
                      "comm_by_kind": ex["comm_by_kind"], "comm_raw": dict(st.comm_raw), "bubble": st.bubble,
                      "compute": st.compute, "read": st.read, "checkpoint_write": st.checkpoint_write,
                      "checkpoint_every": st.checkpoint_every, "checkpoints": st.checkpoints,
                      "prestage": st.prestage, "restart": st.restart, "steps": st.steps, "dp": st.dp,
                      "microbatches": st.microbatches, "work_seconds": st.work, "job_seconds": job_seconds(st)},
        "advice": [{"change": a.change, "job_seconds": a.job_seconds, "saving": a.saving} for a in st.advice],
        **({"tpu_metrics": dcgm.tpu_record(spec, placement, st)} if dcgm.is_tpu(placement)
           else {"dcgm": dcgm.record(spec, placement, st)}),
    }


def records(model: Any, store: Any) -> dict[str, dict]:
    """training.json's content from the run's TrainingModel: "namespace/name" -> job_record; and a gang without a
    training spec (a multi-host TPU JobSet, a torchrun Job) whose rendezvous timed out or that lost a rank gets a
    record of its gang alone, so `explain job` says what happened to it."""
    out = {}
    for (ns, name), (spec, placement) in sorted(model.inputs.items()):
        kind = "JobSet" if store.get("JobSet", ns, name) is not None else "Job"
        out[f"{ns}/{name}"] = job_record(ns, name, kind, spec, placement, model.breakdowns[(ns, name)])
        gang = model.gang.record((ns, name)) if model.gang is not None else None
        if gang is not None:
            out[f"{ns}/{name}"]["gang"] = gang
        if (ns, name) in model.failures:  # its ranks die at start on their device: no step ever ran
            out[f"{ns}/{name}"]["start_failure"] = model.failures[(ns, name)]
    for (ns, name) in sorted(model.gang.gangs if model.gang is not None else ()):
        gang = model.gang.record((ns, name))
        if (ns, name) in model.inputs or not (any(e["event"] != "started" for e in gang["log"])
                                              or gang.get("waiting_at_end")):
            continue  # a gang that only started as it should adds nothing a run without this record lacks
        kind = "JobSet" if store.get("JobSet", ns, name) is not None else "Job"
        out[f"{ns}/{name}"] = {"namespace": ns, "name": name, "kind": kind, "gang": gang}
    return out


def _device_words(dev: dict) -> str:
    """A rank's device in words: "a MIG 1g.10gb instance of nvidia-a100-80gb", "a TPU chip of ..."."""
    what = {"mig": f"a MIG {dev['partition']} instance", "mps": f"an MPS share (1 of {dev['clients']} clients)",
            "time-slicing": f"a time-sliced GPU (shared by up to {dev['clients']})", "tpu": "a TPU chip"}
    return f"{what.get(dev['kind'], dev['kind'])} of {dev['accelerator']}"


def never_trained(rec: dict) -> str | None:
    """Why a gang never trained (its rendezvous never completed), with when, or None when it trained or is no
    gang: `explain job` and the run's headline print this instead of a step and job time it never ran."""
    g = rec.get("gang") or {}
    log, end = g.get("log") or [], g.get("waiting_at_end")
    if rec.get("start_failure") and (not (log or end) or any(e["event"] == "started" for e in log)):
        # the ranks' processes die at start (out of memory, an invisible device); a gang's ranks get there only
        # once its rendezvous completed (jax.distributed.initialize / torchrun's rendezvous come first)
        return f"every rank failed at start with {rec['start_failure'].split('. ')[0]}"
    if (not log and not end) or any(e["event"] == "started" for e in log):
        return None
    timeouts = [e for e in log if e["event"] == "rendezvous timeout"]
    if end:  # still in the rendezvous when the run ended (its timeout had not come yet)
        since = min(r["since"] for r in end["ranks"])
        missing = ", ".join(f"rank {m['rank']}" + (f" ({m['phase']})" if m["phase"] else "") for m in end["missing"])
        return (f"{len(end['ranks'])} of {g['world']} ranks still waiting in the rendezvous at the end of the run "
                f"(since {_at(since)}) for {missing or 'no rank'}"
                + (f", after {len(timeouts)} rendezvous timeout{'s' if len(timeouts) > 1 else ''}" if timeouts else ""))
    if not timeouts:
        return "its rendezvous never completed"
    last = timeouts[-1]
    waited = f"{len(timeouts)} rendezvous timeouts, the last" if len(timeouts) > 1 else "rendezvous timed out"
    missing = ", ".join(f"rank {m['rank']}" + (f" ({m['phase']})" if m["phase"] else "") for m in last["missing"])
    return f"{waited} at {_at(last['t'])} after {_dur(last['waited'])} waiting for {missing or 'no rank'}"


def _error(where: str, message: str, hint: str) -> KubetwinError:
    return KubetwinError([Diagnostic(where, 0, "-", "", message, hint)])


def load(run_dir: Path, resource: str, name: str, namespace: str) -> dict:
    """The job's record; KubetwinError for a bad resource, a folder that is no run, or a job it does not hold."""
    kind = JOB_RESOURCES.get(resource.lower())
    if kind is None:
        raise _error(resource, f'cannot explain "{resource}"', "use: kubetwin explain job NAME --run DIR "
                     "(a Job or JobSet name)")
    if history_path(run_dir) is None or not (run_dir / "run.json").is_file():
        raise _error(str(run_dir), "not a kubetwin run folder (no history.jsonl)", "pass the --out folder of a "
                     "`kubetwin run`")
    path = run_dir / FILE
    jobs = json.loads(path.read_text()) if path.is_file() else {}
    rec = jobs.get(f"{namespace}/{name}")
    if rec is not None:
        return rec
    if _exists(run_dir, namespace, name):
        raise _error(f"{namespace}/{name}", "not a training job: no training.kubetwin.io/* annotations (its pods "
                     "ran for kubetwin.io/duration; a gang without them is explained only when its rendezvous "
                     "timed out or it lost a rank), or none of its pods started",
                     "add the training annotations (docs/training-studies.md) to have the twin compute its run time")
    known = ", ".join(sorted(jobs)) or "none in this run"
    raise _error(f"{namespace}/{name}", f'{kind} "{name}" not found in namespace "{namespace}"',
                 f"training jobs in this run: {known}; pick another with -n NAMESPACE")


def _exists(run_dir: Path, namespace: str, name: str) -> bool:
    """Whether a Job or JobSet of that name was ever created in the run (a cheap scan of history.jsonl)."""
    needle = f'"name":"{name}"'.encode()
    path = history_path(run_dir)
    if path is None:
        return False
    with open_history(path) as source:
        for line in source.lines():
            if needle in line and b'"type":"ADDED"' in line:
                obj = json.loads(line)["object"]
                if obj["kind"] in ("Job", "JobSet") and obj["metadata"]["name"] == name and \
                        (obj["metadata"].get("namespace") or "") == namespace:
                    return True
    return False


def _rate(rp: dict | None) -> str:
    if rp is None:
        return "none"
    bps = rp.get("bytes_per_second")
    return f"{rp['detail']}" + (f", {bps / 1e9:.2f} GB/s" if bps else "")


def _dur(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.2f} h"


def _at(t: float) -> str:
    return f"t={_dur(t)}"


def _missing(missing: list[dict]) -> str:
    return ", ".join(f"rank {m['rank']}" + (f" ({m['pod']}): {m['phase']}" if m["pod"] else "")
                     + (f" ({m['why']})" if m["why"] else "") for m in missing) or "no rank"


def render_gang(gang: dict) -> list[str]:
    """The gang section: how long the ranks waited in the rendezvous and for which rank, why that rank was not
    running, and the ranks lost mid-run with the survivors' stall."""
    out = ["", f"Gang: {gang['world']} ranks under {gang['launcher']} (rendezvous timeout "
               f"{_dur(gang['rendezvous_timeout'])}, collective timeout {_dur(gang['collective_timeout'])}):"]
    log, i = gang["log"], 0
    while i < len(log):
        e = log[i]
        if e["event"] == "rendezvous timeout":
            same = [e]
            while i + 1 < len(log) and log[i + 1]["event"] == e["event"] and log[i + 1]["missing"] == e["missing"] \
                    and abs(log[i + 1]["t"] - e["t"]) < 1:
                i += 1
                same.append(log[i])
            ranks = sorted(x["rank"] for x in same)
            who = (f"rank {ranks[0]} ({same[0]['pod']})" if len(same) == 1 else
                   "ranks " + ", ".join(str(r) for r in ranks))
            out.append(f"  {_at(e['t'])}: {who} waited {_dur(e['waited'])} for {_missing(e['missing'])}; "
                       f"failed: {e['message'].split('. ')[0]}")
        elif e["event"] == "started":
            out.append(f"  {_at(e['t'])}: all {e['ranks']} ranks joined the rendezvous"
                       + (f" after waiting {_dur(e['waited'])}" if e["waited"] >= 1 else "") + "; training started")
        elif e["event"] == "rank lost":
            out.append(f"  {_at(e['t'])}: rank {e['rank']} ({e['pod']}) lost ({e['why']}); {e['survivors']} ranks "
                       f"stalled in their collectives (GPUs held at 0 % util) until the {_dur(e['timeout'])} "
                       "timeout failed them")
        i += 1
    end = gang.get("waiting_at_end")
    if end:
        who = ", ".join(f"rank {r['rank']} ({r['pod']})" for r in end["ranks"])
        out.append(f"  at the end of the run: {who} still waiting for {_missing(end['missing'])}")
    if not any(e["event"] == "started" for e in log) and (log or end):
        out.append("  the job never trained: its rendezvous never completed")
    return out


def _render_untrained(rec: dict, why: str) -> str:
    """A gang that never trained: what it is, why it never trained, and its gang log; no step or job time (the
    breakdown the twin computed for its planned placement never ran)."""
    g = rec.get("gang") or {}
    head = f"{rec['kind']} {rec['namespace']}/{rec['name']}: "
    if rec.get("spec"):
        sp = rec["spec"]
        head += f"{sp['params'] / 1e9:g}B params, {sp['steps']} steps of {sp['global_batch']} x {sp['seq_len']} tokens"
    else:
        head += f"{g['world']} ranks (no training spec: each runs its kubetwin.io/duration once all have joined)"
    if why.startswith("every rank failed at start"):
        out = [head, "", f"Never trained: {why}.", "  no step time or job time: no step ran; each rank's process "
               "died at start with:", f"  {rec['start_failure']}"]
        dev = (rec.get("placement") or {}).get("device")
        if dev:
            out.append(f"  its device: {_device_words(dev)}: {dev['memory_mib'] / 1024:.2f} GiB")
    else:
        out = [head, "", f"Never trained: {why}.",
               "  no step time or job time: no step ran (the ranks that started held their accelerators, billed, "
               "while they waited)"]
    return "\n".join(out + (render_gang(g) if g else []))


def render(rec: dict) -> str:
    """The explain text: placement, storage, the step table, the DCGM gauges, the gang's waits, the what-ifs; for
    a gang that never trained, why not instead of a step time it never ran."""
    why = never_trained(rec)
    if why is not None:
        return _render_untrained(rec, why)
    if "breakdown" not in rec:  # a gang record of its own that trained, then lost a rank
        return "\n".join([f"{rec['kind']} {rec['namespace']}/{rec['name']}: {rec['gang']['world']} ranks (no "
                          "training spec)", *render_gang(rec["gang"])])
    sp, pl, b, st = rec["spec"], rec["placement"], rec["breakdown"], rec["storage"]
    par = f"dp {b['dp']} x tp {sp['tp']} x pp {sp['pp']}" + (" (FSDP)" if sp["fsdp"] else "")
    out = [f"{rec['kind']} {rec['namespace']}/{rec['name']}: {sp['params'] / 1e9:g}B params, {b['steps']} steps of "
           f"{sp['global_batch']} x {sp['seq_len']} tokens, {par}, {b['microbatches']} micro-batches per step", "",
           "Placement:",
           f"  {pl['world']} x {pl['accelerator']} on {len(pl['nodes'])} nodes "
           f"({', '.join(sorted({n['machine_type'] for n in pl['nodes']}))}), peak {pl['peak_tflops']:g} TFLOPS, "
           f"MFU {pl['mfu']:.2f}",
           f"  network tier: {pl['tier']}; placement: {pl['placement']}; placement groups: "
           f"{', '.join(g or '(none)' for g in pl['placement_groups'])}; zones: {', '.join(pl['zones'])}"]
    out += [f"  without GPUDirect: {note}" for note in pl.get("gpudirect_missing") or []]
    dev = pl.get("device")
    if dev:
        out.append(f"  each rank computes on {_device_words(dev)}: "
                   f"{dev['memory_mib'] / 1024:.2f} GiB, {dev['compute']:.3g} of the chip's compute")
    out += [f"  {n['name']}  ranks {n['ranks']}  pool {n['pool']}  {n['zone']}" for n in pl["nodes"][:8]]
    if len(pl["nodes"]) > 8:
        out.append(f"  ... and {len(pl['nodes']) - 8} more nodes")
    data = st["data"]
    out += ["", "Storage:",
            f"  data: {data['path'] + ' -> ' + _rate(data) if data else 'none (no data-path: local, no stall)'}; "
            f"loading {st['loading']}; a step reads in {b['read']:.3f} s",
            f"  checkpoints: {_rate(st['checkpoint_write']) if st['checkpoint_write'] else 'default pd-balanced'}"
            + (f"; {b['checkpoints']} x {b['checkpoint_write']:.1f} s, every {b['checkpoint_every']} steps; restart "
               f"reads back in {b['restart']:.1f} s" if b["checkpoint_every"] else "; none written")]
    total = b["step_seconds"]
    rows = [("compute", b["compute"]), ("  pipeline bubble", b["bubble"])]
    rows += [(f"comm {k} (exposed)", v) for k, v in sorted(b["comm_by_kind"].items())]
    rows += [("data stall", b["parts"]["data"]), ("checkpoint (amortized)", b["parts"]["checkpoint"])]
    out += ["", f"Step time {total:.3f} s; job {_dur(b['work_seconds'])} of work"
            + (f" after a {_dur(b['prestage'])} prestage" if b["prestage"] else "") + ":",
            f"  {'part':<26}{'seconds':>10}{'%':>8}"]
    out += [f"  {k:<26}{v:>10.4f}{100 * v / total if total else 0:>8.1f}" for k, v in rows]
    if b["comm_raw"]:
        out.append("  (before overlap: " + ", ".join(f"{k} {v:.4f} s" for k, v in sorted(b["comm_raw"].items()))
                   + ")")
    if "dcgm" in rec:
        g = rec["dcgm"]
        out += ["", "GPU metrics (DCGM, each GPU while stepping):",
                f"  DCGM_FI_DEV_GPU_UTIL {g['gpu_util']:.0f} %   DCGM_FI_PROF_SM_ACTIVE {g['sm_active']:.2f}   "
                f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE {g['tensor_active']:.2f}",
                f"  DCGM_FI_DEV_FB_USED {g['fb_used_mib']:,.0f} MiB" + ("" if g["fits"] else
                                                                         " (capped: a rank does not fit; its pods "
                                                                         "fail at start with CUDA out of memory)")]
    else:
        t = rec["tpu_metrics"]
        out += ["", "TPU metrics (GKE, each chip while stepping):",
                f"  duty_cycle {t['duty_cycle']:.0f} %   tensorcore_utilization {t['tensorcore_utilization']:.0f} %",
                f"  memory_used {t['memory_used'] / 2**30:,.2f} GiB of memory_total {t['memory_total'] / 2**30:,.2f} "
                "GiB" + ("" if t["fits"] else " (capped: a rank does not fit; its pods fail at start with XLA's "
                                              "RESOURCE_EXHAUSTED, out of HBM)")]
    if rec.get("gang"):
        out += render_gang(rec["gang"])
    out += ["", "Which change would help most:"]
    out += [f"  {i}. {a['change']}: job {_dur(a['job_seconds'])} ({100 * a['saving']:.1f}% shorter)"
            for i, a in enumerate(rec["advice"], 1)] or ["  nothing the twin tries shortens this job"]
    return "\n".join(out)
