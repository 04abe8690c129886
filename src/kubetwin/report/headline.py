"""The run's headline numbers, one row per fact, from summary.json and training.json alone: the console summary
of `kubetwin run` and report.html's header print the same rows (one place decides what a run's headline is)."""

from __future__ import annotations

from typing import Any

from kubetwin.k8s.units import short_duration

Rows = list[tuple[str, str]]


def _s(seconds: float | None) -> str:
    """A wait in whole seconds, written as a duration (84600 s is 23h30m, 7201 s 2h0m1s)."""
    if seconds is None:
        return "-"
    whole = round(seconds)
    return short_duration(whole) if whole else "0s"


def cluster_rows(s: dict[str, Any]) -> Rows:
    """Pods, waiting, GPU allocation and fragmentation, cost (per pool, Spot), work lost, GPU sharing."""
    pods = s["pods"]
    rows = [(f"pods {k}", str(v)) for k, v in pods["by_phase"].items()]
    # summary.json's pending_seconds: creation to binding (the pod stays phase Pending while its images pull)
    waits = pods["pending_seconds"]
    rows.append(("wait to schedule p50 / p99", f"{_s(waits['p50'])} / {_s(waits['p99'])}"))
    jobs = s.get("jobs")
    if jobs:  # Jobs and JobSets: how many finished, and how long they took (creation to Complete)
        rows.append(("jobs completed / failed / unfinished", f"{jobs['completed']} / {jobs['failed']} / "
                     f"{jobs['unfinished']}"))
        if jobs["completed"]:
            jct = jobs["completion_seconds"]
            rows.append(("job completion p50 / max", f"{_s(jct['p50'])} / {_s(jct['max'])}"))
    rows += [(f"GPU allocation {k}", f"{v['mean_pct']:.1f}%") for k, v in s["gpu_allocation"].items()
             if v.get("gpu_hours_allocatable", 1)]  # a pool without GPUs has no GPU allocation to speak of
    if (s.get("gpu_fragmentation") or {}).get("fragmented_gpu_pct_mean") is not None:
        rows.append(("fragmented GPUs (mean)", f"{s['gpu_fragmentation']['fragmented_gpu_pct_mean']:.1f}%"))
    cost = s["cost"]
    rows += [(f"cost {pool}", f"${usd:,.2f}") for pool, usd in cost["by_pool"].items()]
    rows.append(("cost total", f"${cost['total_usd']:,.2f}"))
    if cost.get("spot_usd"):  # Spot VMs: what they cost, how often they went, what work was lost
        rows.append(("cost on-demand / Spot", f"${cost['on_demand_usd']:,.2f} / ${cost['spot_usd']:,.2f}"))
    if "by_capacity_type" in cost:  # a scenario with Compute Engine reservations: what ran on which capacity
        t = cost["by_capacity_type"]
        rows.append(("cost reserved / idle reserved / Spot / flex-start / on-demand",
                     " / ".join(f"${t[k]:,.2f}" for k in ("reserved", "idle-reserved", "spot", "flex-start",
                                                         "on-demand"))))
    rows += [(f"Spot preemptions {p}", str(n)) for p, n in ((s.get("spot") or {}).get("preemptions") or {}).items()]
    lost = [f"{s[k]:,.2f} {unit}" for k, unit in (("wasted_gpu_hours", "GPU-h"), ("wasted_tpu_chip_hours",
                                                                                    "TPU chip-h")) if s.get(k)]
    if lost:  # only the accelerators that lost work
        rows.append(("work lost (redone)", ", ".join(lost)))
    for pool, g in (s.get("gpu_sharing") or {}).items():
        if g["gpu_oom_failures"] or (g["slowdown_max"] or 1) > 1:
            if g["slowdown_mean"]:
                rows.append((f"GPU sharing {pool}",
                             f"slowdown x{g['slowdown_mean']:.2f}, {g['gpu_oom_failures']} OOM"))
            else:  # no GPU of the pool was shared: its pods' out-of-memory failures alone, not a slowdown of x0
                rows.append((f"GPU out of memory {pool}", f"{g['gpu_oom_failures']} pods failed"))
    return rows


def autoscaler_rows(s: dict[str, Any]) -> Rows:
    """Cluster autoscaler: scale-ups, scale-downs and the cloud's refusals (stockouts, quota)."""
    ca = s.get("cluster_autoscaler")
    if not ca:
        return []
    ups, downs, refused = (ca.get(k) or [] for k in ("scale_ups", "scale_downs", "refusals"))
    for_requests = sum(1 for u in ups if u.get("provisioning_request"))
    rows = [("cluster autoscaler", f"{len(ups)} scale-ups" + (f" ({for_requests} for ProvisioningRequests)"
                                                               if for_requests else "")
             + f", {len(downs)} scale-downs, {len(refused)} refused by the cloud")]
    # GKE's noScaleUp visibility reasons (autoscaler/nap.py): message id and parameters, as GKE logs them
    why: dict[str, int] = {}
    for w in (ca.get("autoprovisioning") or {}).get("no_scale_up") or []:
        key = f"{w['messageId']} [{', '.join(w['parameters'])}]"
        why[key] = why.get(key, 0) + 1
    if why:
        rows.append(("cluster autoscaler noScaleUp", "; ".join(k + (f" x{n}" if n > 1 else "")
                                                              for k, n in sorted(why.items()))))
    recycled = sum(1 for u in ups if u.get("recycling"))
    if recycled:  # flex-start node recycling (autoscaler/cluster_autoscaler.py recycle)
        rows.append(("cluster autoscaler recycling", f"{recycled} node{'s' if recycled != 1 else ''} replaced before "
                     f"{'its' if recycled == 1 else 'their'} max run duration"))
    ended = (s.get("max_run_duration") or {}).get("vms_deleted_by_pool") or {}
    if ended:  # Compute Engine deleted VMs at their max run duration: their pods ended with them
        rows.append(("max run duration reached", ", ".join(f"{n} VM{'s' if n != 1 else ''} of {pool}"
                                                           for pool, n in sorted(ended.items()))))
    return rows


def kueue_rows(s: dict[str, Any]) -> Rows:
    """Workloads that waited on a missing LocalQueue; per ClusterQueue: admitted / evicted / finished, still pending
    at the end, the longest admission wait, and the preemptions it issued by reason."""
    rows = []
    missing = s.get("kueue_missing_local_queues") or {}
    if missing:  # kueue/controller/core.py: QuotaReserved False, "LocalQueue <name> doesn't exist"
        n = sum(missing.values())
        rows.append(("Kueue missing LocalQueue", f"{n} Workload{'s' if n != 1 else ''} waited on a LocalQueue that "
                     f"does not exist ({', '.join(missing)})"))
    for cq, k in sorted((s.get("kueue") or {}).items()):
        pending = k.get("pending_at_end") or {}
        rows.append((f"Kueue {cq}", f"{k.get('admitted', 0)} admitted, {k.get('evicted', 0)} evicted, "
                     f"{k.get('finished', 0)} finished, {pending.get('active', 0) + pending.get('inadmissible', 0)} "
                     "pending"))
        wait = (k.get("admission_wait_s") or {}).get("max")
        if wait:
            rows.append((f"Kueue {cq} wait p99 / max", f"{_s(k['admission_wait_s'].get('p99'))} / {_s(wait)}"))
        issued = k.get("preemptions_issued") or {}
        if issued:
            rows.append((f"Kueue {cq} preempted", ", ".join(f"{n} {r}" for r, n in sorted(issued.items()))))
    return rows


def training_rows(training: dict[str, Any]) -> Rows:
    """Per training job: step time, MFU and job time, and the change `kubetwin explain job` ranks first; for a gang
    that never trained, why (workloads/training_explain.py `never_trained`)."""
    from kubetwin.workloads.training_explain import never_trained

    rows = []
    for key, j in sorted(training.items()):
        why = never_trained(j)
        if why is not None:  # a gang whose rendezvous never completed: no step ran, so no step or job time
            rows.append((f"training {key}", f"never trained: {why}"))
            continue
        b = j.get("breakdown") or {}
        if not b.get("step_seconds"):
            continue
        mfu = (j.get("placement") or {}).get("mfu")
        rows.append((f"training {key}", f"step {b['step_seconds']:.2f}s, job {b['job_seconds'] / 3600:.2f} h"
                     + (f", MFU {100 * mfu:.0f}%" if mfu else "")))
        best = next(iter(j.get("advice") or []), None)
        if best and round(100 * (best.get("saving") or 0)) >= 1:  # a change that saves under 0.5 % is no "-0%" row
            rows.append((f"training {key} best change", f"{best['change']}: -{100 * best['saving']:.0f}% job time"))
    return rows


def serving_rows(s: dict[str, Any]) -> Rows:
    """Requests, TTFT/TPOT percentiles, SLO attainment, prefix-cache hit rate, GPU-hours and price per token."""
    o = s.get("serving", {}).get("overall")
    if not o:
        return []

    def sec(d: dict, k: str) -> str:  # latencies under a second in ms, as vLLM's and Grafana's dashboards show them
        v = d.get(k)
        if v is None:
            return "-"
        return f"{v:.2f} s" if v >= 1 else f"{v * 1000:.1f} ms" if v < 0.01 else f"{v * 1000:.0f} ms"

    rows = [("requests (completed / 429 / 404 / 503)", f"{o['requests']} ({o['completed']} / {o['rejected_429']} / "
             f"{o.get('not_found_404', 0)} / {o['failed_503']})")]
    other = o.get("failed_other", 0) - o.get("not_found_404", 0)  # 400 too long, 504, ...: said when there are any
    if other > 0:
        rows.append(("requests failed otherwise", str(other)))
    return rows + [
            ("TTFT p50 / p90 / p99", " / ".join(sec(o["ttft_seconds"], k) for k in ("p50", "p90", "p99"))),
            ("TPOT p50 / p90 / p99", " / ".join(sec(o["tpot_seconds"], k) for k in ("p50", "p90", "p99"))),
            ("SLO attainment", "-" if o["slo_attainment"] is None else f"{100 * o['slo_attainment']:.1f} %"),
            ("prefix-cache hit rate", "-" if o.get("prefix_cache_hit_rate") is None
             else f"{100 * o['prefix_cache_hit_rate']:.1f} %"),
            ("serving GPU-hours", f"{o['gpu_hours']:.2f}"),
            ("USD per million output tokens", "-" if o["usd_per_million_output_tokens"] is None
             else f"${o['usd_per_million_output_tokens']:.2f}")]


def headline_rows(summary: dict[str, Any], training: dict[str, Any] | None = None) -> Rows:
    """Every row the run produced, cluster first, then each subsystem that ran (none for what did not)."""
    return (cluster_rows(summary) + autoscaler_rows(summary) + kueue_rows(summary) + training_rows(training or {})
            + serving_rows(summary))
