"""Mutation fuzzer for the validate contract: every input `kubetwin validate` accepts, `kubetwin run` runs (or
rejects with a clean KubetwinError); neither ever raises anything else, and each input takes bounded memory/time.

Mutations over examples/*.yaml, drawn from one seed: dropped fields, wrong types, huge and negative numbers,
unicode, deep nesting, alias bombs, duplicate keys, non-UTF-8 bytes, YAML tags, truncation, twin annotations with bad
values. Each batch runs in a subprocess capped by RLIMIT_AS, so an input that blows up memory is a finding, not a
dead machine.

    python benchmarks/fuzz_validate.py --n 5000 --seed 7           # findings, one line each, and the timing
    python benchmarks/fuzz_validate.py --n 200 --seed 7 --show 3   # also print the first 3 failing inputs
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
WEIRD_VALUES: list[Any] = [None, True, 3.5, -1, 0, -(2**63), 2**64, 10**30, 1e308, -1e-9, "", "x", "1e30", "-5",
                           "500m", "NaN", "9" * 400, "dé名\u202e", "a" * 300, [], {}, [1, "a"], {"a": {"b": None}},
                           "1e+30", "0s", "-1s", "Bad_Name", "${HOME}", "\x00"]
TAGS = ["!!python/object/apply:os.system ['true']", "!!binary aGVsbG8=", "!!set {a, b}", "!!timestamp 2001-12-14",
        "!!float .nan", "!!float .inf", "!!int 0x10", "!!str 3", "!custom x", "!!omap [{a: 1}]", "!!null ''"]
ANNOTATIONS = ["kubetwin.io/duration", "kubetwin.io/create-at", "kubetwin.io/delete-at", "kubetwin.io/fail-after",
               "kubetwin.io/checkpoint-interval", "kubetwin.io/gpu-util", "kubetwin.io/gpu-memory",
               "kubetwin.io/ready-after", "kubetwin.io/request-ttl", "kubetwin.io/slo-ttft",
               "alibabacloud.com/gpu-milli", "training.kubetwin.io/steps", "kubetwin.io/router"]
BAD_ANNOTATION_VALUES = ["banana", "-5", "0", "0s", "1e88", "9" * 30, "1h30", "", "150%", "-1Gi", "NaN", "2.5"]
# Examples cheap enough to run after each mutation the validator accepts (all run in well under a second).
RUNNABLE = ("autoscaling-gpu-quota.yaml", "jobset-exclusive-placement.yaml", "kueue-cohort-borrowing.yaml",
            "kueue-wait-for-pods-ready.yaml", "spot-vs-on-demand.yaml", "tpu-v5e-slice.yaml",
            "training-llama-8b-a3.yaml", "serving-llama3-epp.yaml", "dws-flex-start.yaml")


def _paths(node: Any, max_depth: int = 60) -> Iterator[tuple]:
    """Every field path of a document, in document order, down to max_depth (iterative: nested values may be deep)."""
    stack: list[tuple[Any, tuple]] = [(node, ())]
    while stack:
        value, prefix = stack.pop()
        yield prefix
        if len(prefix) >= max_depth:
            continue
        if isinstance(value, dict):
            stack.extend(((v, (*prefix, k)) for k, v in reversed(list(value.items()))))
        elif isinstance(value, list):
            stack.extend(((v, (*prefix, i)) for i, v in reversed(list(enumerate(value)))))


def _parent(doc: Any, path: tuple) -> Any:
    for p in path[:-1]:
        doc = doc[p]
    return doc


def _structural(rng: random.Random, docs: list, op: str) -> None:
    doc = rng.choice(docs)
    paths = [p for p in _paths(doc) if p]
    if not paths:
        return
    path = rng.choice(paths)
    parent, key = _parent(doc, path), path[-1]
    if op == "drop":
        del parent[key]
    elif op == "type":
        parent[key] = rng.choice(WEIRD_VALUES)
    elif op == "number":
        parent[key] = rng.choice([-1, -(2**31) - 1, 2**31, -(2**63), 2**63, 10**30, 1e30, -0.5, 2.5, "-1", "1e30"])
    elif op == "unicode":
        parent[key] = rng.choice(["dé", "名前", "\u202eevil", "e\u0301", "ß" * 70, "\U0001F600"])
    elif op == "nest":
        value: Any = "x"
        for _ in range(rng.choice([5, 40, 90, 150, 900])):
            value = [value] if rng.random() < 0.5 else {"k": value}
        parent[key] = value
    elif op == "annotation":
        meta = doc.setdefault("metadata", {}) if isinstance(doc, dict) else None
        holders = [meta] if isinstance(meta, dict) else []
        tmpl = (doc.get("spec") or {}).get("template") if isinstance(doc.get("spec"), dict) else None
        if isinstance(tmpl, dict):
            holders.append(tmpl.setdefault("metadata", {}) or {})
        if holders:
            holder = rng.choice(holders)
            if isinstance(holder, dict):
                anns = holder.setdefault("annotations", {})
                if isinstance(anns, dict):
                    anns[rng.choice(ANNOTATIONS)] = rng.choice(BAD_ANNOTATION_VALUES)


def _textual(rng: random.Random, text: str, op: str) -> bytes:
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines)) if lines else 0
    if op == "bomb":
        levels, fanout = rng.choice([(9, 9), (6, 10), (4, 10), (3, 4)])
        bomb = ['  kubetwin.io/laughs-0: &l0 "lol"\n'] + [
            f"  kubetwin.io/laughs-{k}: &l{k} [{','.join([f'*l{k - 1}'] * fanout)}]\n" for k in range(1, levels)]
        return (text.replace("metadata:\n", "metadata:\n  annotations:\n" + "".join("  " + b for b in bomb), 1)
                if "metadata:\n" in text else text).encode()
    if op == "duplicate" and lines:
        return "".join(lines[: i + 1] + [lines[i]] + lines[i + 1:]).encode()
    if op == "bytes":
        raw = text.encode()
        at = rng.randrange(len(raw) + 1)
        return raw[:at] + rng.choice([b"\xff\xfe", b"\xc3", b"\x00", b"\xed\xa0\x80"]) + raw[at:]
    if op == "tag" and lines:
        line = lines[i]
        if ": " in line and not line.rstrip().endswith(":"):
            head = line.split(": ", 1)[0]
            lines[i] = f"{head}: {rng.choice(TAGS)}\n"
        return "".join(lines).encode()
    if op == "truncate":
        return text[: rng.randrange(len(text) + 1)].encode()
    if op == "deep-text":
        depth = rng.choice([200, 5000, 200000])
        return (text + "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: {a: "
                + "[" * depth + "]" * depth + "}\n").encode()
    return text.encode()


STRUCTURAL = ("drop", "type", "number", "unicode", "nest", "annotation")
TEXTUAL = ("bomb", "duplicate", "bytes", "tag", "truncate", "deep-text")


def mutations(seed: int, n: int, examples: list[Path] | None = None) -> Iterator[tuple[str, str, bytes]]:
    """(example name, mutation, mutated file bytes), n of them, deterministic in seed."""
    rng = random.Random(seed)
    files = examples or sorted(EXAMPLES.glob("*.yaml"))
    texts = {f.name: f.read_text() for f in files}
    for _ in range(n):
        name = rng.choice(sorted(texts))
        text = texts[name]
        op = rng.choice(STRUCTURAL + TEXTUAL)
        if op in STRUCTURAL:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
            for _ in range(rng.choice([1, 1, 2, 3])):
                _structural(rng, docs, op)
            try:
                out = yaml.safe_dump_all(docs, sort_keys=False, allow_unicode=True).encode()
            except (yaml.YAMLError, RecursionError):
                continue
        else:
            out = _textual(rng, text, op)
        yield name, op, out


def _check(items: list[tuple[str, str, bytes]], run_budget: int, out_dir: Path) -> list[dict]:
    """In this process: validate each input, run the accepted ones of the runnable examples (up to run_budget)."""
    import traceback

    from kubetwin.api.errors import KubetwinError
    from kubetwin.api.loader import load_paths
    from kubetwin.runner import run
    from kubetwin.validation.validate import validate

    results = []
    runs = 0
    for k, (name, op, data) in enumerate(items):
        f = out_dir / f"case{k}.yaml"
        f.write_bytes(data)
        (out_dir / "current").write_text(str(k))  # which case a killed or timed-out batch was on
        rec: dict = {"case": k, "example": name, "op": op, "stage": "validate", "outcome": "ok"}
        t0 = time.perf_counter()
        try:
            try:
                manifests = load_paths([f])
                errors = [d for d in validate(manifests) if d.severity == "error"]
            except KubetwinError:
                errors = ["load"]
            rec["outcome"] = "rejected" if errors else "accepted"
            if not errors and name in RUNNABLE and runs < run_budget:
                runs += 1
                rec["stage"] = "run"
                try:
                    run([f], duration="10m")
                    rec["outcome"] = "ran"
                except KubetwinError as exc:
                    rec["outcome"] = "run-rejected"  # validate accepted what run rejects: a finding
                    rec["error"] = str(exc)[:500]
        except BaseException as exc:  # noqa: BLE001 - the fuzzer reports anything that escapes
            rec["outcome"] = "crash"
            rec["error"] = "".join(traceback.format_exception(exc))[-3000:]
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        results.append(rec)
        f.unlink()
    return results


def check_batch(items: list[tuple[str, str, bytes]], run_budget: int, mem_gib: float = 3.0,
                timeout: float = 600) -> list[dict]:
    """_check in a subprocess capped at mem_gib of address space; a killed or timed-out batch is a finding."""
    with tempfile.TemporaryDirectory() as tmp:
        batch = Path(tmp) / "batch.json"
        batch.write_text(json.dumps([[n, op, data.decode("latin-1")] for n, op, data in items]))
        code = (f"import json, sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import fuzz_validate as fz; "
                f"from pathlib import Path; items = [(n, op, d.encode('latin-1')) for n, op, d in "
                f"json.load(open({str(batch)!r}))]; print(json.dumps(fz._check(items, {run_budget}, "
                f"Path({tmp!r}))))")
        limit = int(mem_gib * (1 << 30))

        def cap() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        try:
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                                  preexec_fn=cap)
        except subprocess.TimeoutExpired:
            k = _current(Path(tmp))
            return [{"outcome": "timeout", "case": k, "example": items[k][0], "op": items[k][1],
                     "error": f"batch of {len(items)} passed {timeout}s on case {k}"}]
        if proc.returncode != 0:
            k = _current(Path(tmp))
            return [{"outcome": "killed", "case": k, "example": items[k][0], "op": items[k][1],
                     "error": proc.stderr[-3000:]}]
        return json.loads(proc.stdout.strip().splitlines()[-1])


def _current(tmp: Path) -> int:
    try:
        return int((tmp / "current").read_text())
    except (OSError, ValueError):
        return 0


def findings(results: list[dict]) -> list[dict]:
    return [r for r in results if r["outcome"] in ("crash", "run-rejected", "timeout", "killed")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=200, help="at most this many accepted inputs are run")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per batch")
    parser.add_argument("--show", type=int, default=0, help="print the first N failing inputs")
    args = parser.parse_args()
    items = list(mutations(args.seed, args.n))
    t0 = time.perf_counter()
    results: list[dict] = []
    per_batch = max(1, args.runs * args.batch // max(1, len(items)))
    for i in range(0, len(items), args.batch):
        part = check_batch(items[i:i + args.batch], per_batch, timeout=args.timeout)
        for r in part:
            if "case" in r:
                r["case"] += i
        results += part
    bad = findings(results)
    counts: dict[str, int] = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    slowest = max((r.get("seconds", 0) for r in results), default=0)
    print(f"{len(items)} mutations (seed {args.seed}) in {time.perf_counter() - t0:.1f}s: {counts}; "
          f"slowest input {slowest:.2f}s")
    for r in bad:
        last = (r.get("error") or "").strip().splitlines()[-1:] or [""]
        print(f"  {r['outcome']}: case {r.get('case')} {r.get('example')} {r.get('op')}: {last[0][:200]}")
    for r in bad[: args.show]:
        if "case" in r:
            print(f"--- case {r['case']} ---\n{items[r['case']][2].decode('utf-8', 'replace')[:4000]}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
