"""Build measured/inference-sim-training.yaml from a git mirror of inference-sim/training.

The runs: vLLM (the inference-sim fork of the V1 engine, journey tracing on) on NVIDIA H100 80GB HBM3 SXM, driven by
inference-perf's shared_prefix workload at constant rates (github.com/inference-sim/training, default_args/*:
exp-config.yaml = the server's flags, profile.yaml = the client's workload, results/stage_N_lifecycle_metrics.json =
inference-perf's per-stage latency summary). Only numbers are copied (see README.md for the licence note).

    git clone https://github.com/inference-sim/training /tmp/training   # or any mirror of it
    python benchmarks/e2e/extract_inference_sim.py /tmp/training > benchmarks/e2e/measured/inference-sim-training.yaml
"""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

SOURCE = "https://github.com/inference-sim/training"
# The fixed split rule, chosen before anything was fitted: the `general` workload (4 models x 2 rates) is fitted,
# every other workload (codegen, roleplay, reasoning) is held out.
FIT_WORKLOADS = ("general",)
# One rule for "the server was saturated", applied alike to the measurement and to the twin (bench_e2e.py):
# more than 1 % of the stage's requests failed or never finished, or the median TTFT exceeds 1 s (a queue that
# grows for the whole stage; every unsaturated run here answers in < 0.3 s at p90).
SATURATED_TTFT_P50_S = 1.0
SATURATED_FAILED_FRACTION = 0.01


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def _dist(d: dict, scale: float = 1.0) -> dict:
    return {k: round(d[src] * scale, 6) for k, src in (("mean", "mean"), ("p50", "median"), ("p90", "p90"),
                                                        ("p99", "p99"))}


def main(repo: str) -> None:
    commit = _git(repo, "rev-parse", "HEAD").strip()
    names = sorted({p.split("/")[1] for p in _git(repo, "ls-tree", "-r", "HEAD", "--name-only").split()
                    if p.startswith("default_args/")})
    runs = []
    for name in names:
        base = f"default_args/{name}"
        ec = yaml.safe_load(_git(repo, "show", f"HEAD:{base}/exp-config.yaml"))
        prof = json.loads(_git(repo, "show", f"HEAD:{base}/profile.yaml"))
        workload = name.rsplit("-", 1)[1]
        sp = prof["data"]["shared_prefix"]
        stages = prof["load"]["stages"]
        for i, st in enumerate(stages):
            m = json.loads(_git(repo, "show", f"HEAD:{base}/results/stage_{i}_lifecycle_metrics.json"))
            ok, lat = m["successes"], m["successes"]["latency"]
            failed = m["failures"]["count"]
            total = ok["count"] + failed
            ttft, e2e = lat["time_to_first_token"], lat["request_latency"]
            out_len = sp["output_len"]
            saturated = failed / total > SATURATED_FAILED_FRACTION or ttft["median"] > SATURATED_TTFT_P50_S
            runs.append({
                "id": f"{name}-stage{i}",
                "split": "fit" if workload in FIT_WORKLOADS else "holdout",
                "source": {"url": SOURCE, "commit": commit, "path": f"{base}/results/stage_{i}_lifecycle_metrics.json",
                           "licence": "no LICENSE file; numbers only (see README.md)"},
                "model": ec["model"],
                "gpu": "nvidia-h100-80gb",
                "tensor_parallel_size": ec["tensor_parallelism"],
                "vllm": {
                    "version": "inference-sim/vllm fork, V1 engine (upstream version not recorded)",
                    "max_num_seqs": ec["max_num_seqs"],
                    "max_num_batched_tokens": ec["max_num_batched_tokens"],
                    "max_model_len": ec["max_model_len"],
                    "enable_prefix_caching": True,   # V1 default, not overridden in exp-config.yaml
                    "enable_chunked_prefill": True,  # V1 default
                },
                "workload": {
                    "name": workload,
                    "client": "inference-perf, completions API, streaming, ignore_eos",
                    "arrival": "constant",
                    "rate": float(st["rate"]),
                    "duration_s": float(st["duration"]),
                    "stage": i,
                    "stages": [{"rate": float(s["rate"]), "duration_s": float(s["duration"])} for s in stages],
                    "shared_prefix": {"num_groups": sp["num_unique_system_prompts"],
                                      "prompts_per_group": sp["num_users_per_system_prompt"],
                                      "system_prompt_len": sp["system_prompt_len"],
                                      "question_len": sp["question_len"],
                                      "multi_turn_chat": bool(sp.get("enable_multi_turn_chat", False))},
                    "prompt_tokens_mean": round(ok["prompt_len"]["mean"], 2),
                    "output_tokens": out_len,
                },
                "measured": {
                    "requests": total,
                    "failed": failed,
                    "achieved_rps": round(ok["throughput"]["requests_per_sec"], 4),
                    "saturated": saturated,
                    "ttft_s": _dist(ttft),
                    "e2e_s": _dist(e2e),
                    # (E2E - TTFT) / (output - 1) of the means: inference-perf's own TPOT/ITL count output tokens by
                    # re-tokenizing streamed chunks (its output_len has a mean below the fixed output_len), so the
                    # per-token time is derived from the fixed output length instead.
                    "tpot_s_mean": round((e2e["mean"] - ttft["mean"]) / (out_len - 1), 7),
                },
            })
    sys.stdout.write("# Generated by benchmarks/e2e/extract_inference_sim.py; see benchmarks/e2e/README.md.\n")
    sys.stdout.write(yaml.safe_dump({"runs": runs}, sort_keys=False, width=120))


if __name__ == "__main__":
    main(sys.argv[1])
