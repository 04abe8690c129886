"""live.supervisor: the twin's KEDA and HPA controllers scale real processes on the wall clock. A fake gateway
/metrics and dummy replica processes (a few lines of http.server) stand in for the emulator; intervals are short."""

from __future__ import annotations

from conftest import need_live_extra

need_live_extra("starlette", "httpx")

import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from kubetwin.api.loader import load_paths
from kubetwin.live.scrape import parse_exposition
from kubetwin.live.supervisor import Options, ScrapedMetrics, Supervisor, SupervisorError
from kubetwin.prometheus.promql import Evaluator

ROOT = Path(__file__).resolve().parents[1]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"

# A replica: /health 200 once started, /metrics with a vLLM gauge; exits on SIGTERM like any process.
REPLICA = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = (b"ok" if self.path == "/health" else
                b'vllm:num_requests_running{model_name="%s"} 0.0\\n' % sys.argv[2].encode())
        self.send_response(200 if self.path in ("/health", "/metrics") else 404)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


class Gateway:
    """The gateway's /metrics: the flow-control queue size the scale-to-zero example's trigger reads."""

    def __init__(self) -> None:
        self.queue = 0.0
        gw = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = ("# TYPE inference_extension_flow_control_queue_size gauge\n"
                        f'inference_extension_flow_control_queue_size{{inference_pool="llama3-pool"}} {gw.queue}\n'
                        ).encode()
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    gw = Gateway()
    try:
        yield gw
    finally:
        gw.close()


def scale_to_zero(tmp: Path, cooldown: int = 2) -> Path:
    """examples/serving-scale-to-zero.yaml with second-scale intervals (its cooldown is 10 min)."""
    docs = list(yaml.safe_load_all((ROOT / "examples" / "serving-scale-to-zero.yaml").read_text()))
    for d in docs:
        if d and d["kind"] == "ScaledObject":
            d["spec"].update(pollingInterval=1, cooldownPeriod=cooldown)
    path = tmp / "scale-to-zero.yaml"
    path.write_text(yaml.safe_dump_all([d for d in docs if d], sort_keys=False))
    return path


def until(sup: Supervisor, cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sup.step()
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s: {what}; replicas {sup.replicas_wanted()}")


def endpoints(path: Path) -> list[str]:
    return path.read_text().split()


def test_scale_from_zero_to_n_and_back_to_zero(gateway: Gateway, tmp_path: Path) -> None:
    script = tmp_path / "replica.py"
    script.write_text(REPLICA)
    log: list[str] = []
    eps = tmp_path / "endpoints.txt"
    opts = Options(command=f"{sys.executable} {script} {{port}} {{model}}", endpoints_file=eps,
                   metrics_urls=[gateway.url], tick=0.1, scrape_interval=0.3, hpa_sync_period=0.5,
                   hpa_downscale_stabilization=0.0, drain=0.2, stop_grace=5.0, log=log.append)
    sup = Supervisor(load_paths([scale_to_zero(tmp_path)]), opts)
    procs = []
    try:
        # no demand: KEDA is not active, nothing starts
        t = time.monotonic()
        while time.monotonic() - t < 1.5:
            sup.step()
            time.sleep(0.1)
        assert sup.replicas_wanted() == 0 and not sup.replicas and endpoints(eps) == []
        # activation: any demand above activationThreshold 0 wakes the pool, 0 -> 1 (minReplicaCount 0 -> 1)
        gateway.queue = 5
        until(sup, lambda: len(endpoints(eps)) == 1, 15, "one ready replica in the endpoints file")
        assert sup.replicas_wanted() == 1
        assert any("KEDAScaleTargetActivated" in x and "from 0 to 1, triggered by demand" in x for x in log)
        assert any("Ready Pod/vllm-llama3-1" in x for x in log)
        # AverageValue 64 per replica: 200 queued -> ceil(200 / 64) = 4 (maxReplicaCount 4)
        gateway.queue = 200
        until(sup, lambda: len(endpoints(eps)) == 4, 20, "four ready replicas")
        assert any("SuccessfulRescale" in x and "New size: 4; reason: external metric s0-prometheus" in x
                   for x in log)
        procs = [r.proc for r in sup.replicas]
        assert len(set(endpoints(eps))) == 4
        # demand gone: the HPA goes down to its minimum 1, then KEDA to 0 once cooldownPeriod has passed
        gateway.queue = 0
        until(sup, lambda: sup.replicas_wanted() == 1, 15, "HPA down to 1")
        until(sup, lambda: sup.replicas_wanted() == 0 and not sup.replicas, 15, "KEDA back to 0")
        assert endpoints(eps) == []
        assert any("KEDAScaleTargetDeactivated" in x and "from 1 to 0" in x for x in log)
        assert all(p.poll() is not None for p in procs)  # stopped, not orphaned
    finally:
        sup.close()
    assert all(p.poll() is not None for p in procs)


def test_processes_are_cleaned_up_when_the_supervisor_stops(gateway: Gateway, tmp_path: Path) -> None:
    script = tmp_path / "replica.py"
    script.write_text(REPLICA)
    eps = tmp_path / "endpoints.txt"
    gateway.queue = 100
    opts = Options(command=f"{sys.executable} {script} {{port}} {{model}}", endpoints_file=eps,
                   metrics_urls=[gateway.url], tick=0.1, scrape_interval=0.3, hpa_sync_period=0.5,
                   log=lambda _: None)
    sup = Supervisor(load_paths([scale_to_zero(tmp_path)]), opts)
    started = []
    t = time.monotonic()

    def stop() -> bool:
        started.extend(r.proc for r in sup.replicas if r.proc not in started)
        return len(endpoints(eps)) >= 2 or time.monotonic() - t > 20

    sup.run(duration=25, stop=stop)  # run() closes on the way out
    assert len(started) >= 2 and all(p.poll() is not None for p in started)
    assert endpoints(eps) == []


def test_a_replica_that_never_becomes_healthy_stays_out_of_the_endpoints_file(gateway: Gateway,
                                                                             tmp_path: Path) -> None:
    gateway.queue = 5
    eps = tmp_path / "endpoints.txt"
    # sleeps instead of serving: /health never answers
    opts = Options(command=f"{sys.executable} -c 'import time; time.sleep(60)' {{port}}", endpoints_file=eps,
                   metrics_urls=[gateway.url], tick=0.1, scrape_interval=0.3, log=lambda _: None)
    sup = Supervisor(load_paths([scale_to_zero(tmp_path)]), opts)
    try:
        until(sup, lambda: len(sup.replicas) == 1, 10, "a replica started")
        for _ in range(10):
            sup.step()
            time.sleep(0.1)
        assert endpoints(eps) == [] and not sup.replicas[0].ready
        proc = sup.replicas[0].proc
    finally:
        sup.close()
    assert proc.poll() is not None


def test_scraped_series_get_target_labels_and_go_stale() -> None:
    m = ScrapedMetrics()
    text = ('vllm:num_requests_waiting{model_name="m",namespace="x"} 3\n'
            "# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total 7\n")
    samples = parse_exposition(text)
    m.add_scrape("a", 1.0, samples, {"namespace": "default", "pod": "p-1", "instance": "127.0.0.1:1"})
    ev = Evaluator(m)
    (labels, value), = ev.query('vllm:num_requests_waiting{namespace="default",pod="p-1"}', 2.0)  # type: ignore[misc]
    assert value == 3 and labels["exported_namespace"] == "x"  # honor_labels: false
    assert ev.query("sum(up)", 2.0) == [({}, 1.0)]
    m.drop_target("a", 3.0)
    assert ev.query("vllm:num_requests_waiting", 4.0) == []  # a staleness marker ends the series at once
    m.add_scrape("b", 5.0, None, {"namespace": "default", "pod": "p-2", "instance": "127.0.0.1:2"})
    assert ev.query('up{pod="p-2"}', 5.0)[0][1] == 0.0  # type: ignore[index]


def test_a_scaler_without_a_deployment_target_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                                    "metadata": {"name": "s"}, "spec": {"scaleTargetRef": {"name": "nope"},
                                                                        "triggers": []}}))
    with pytest.raises(SupervisorError, match="not a Deployment"):
        Supervisor(load_paths([path]), Options(endpoints_file=tmp_path / "e", log=lambda _: None))


def test_the_cli_scales_up_and_stops_its_replicas_on_sigterm(gateway: Gateway, tmp_path: Path) -> None:
    import os
    import re
    import signal
    import subprocess

    script = tmp_path / "replica.py"
    script.write_text(REPLICA)
    eps = tmp_path / "endpoints.txt"
    gateway.queue = 3
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubetwin.cli.main", "supervise", str(scale_to_zero(tmp_path)),
         "--command", f"{sys.executable} {script} {{port}} {{model}}", "--endpoints-file", str(eps),
         "--metrics-url", gateway.url, "--scrape-interval", "0.3", "--tick", "0.1", "--duration", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (eps.exists() and eps.read_text().strip()):
            time.sleep(0.1)
        assert eps.read_text().strip(), "no ready replica within 30 s"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, out
    assert "KEDAScaleTargetActivated" in out and "from 0 to 1, triggered by demand" in out
    pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", out)]
    assert pids and eps.read_text() == ""
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
