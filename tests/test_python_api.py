"""The notebook API as the README shows it: `kubetwin.run(...)` from a fresh interpreter, in either import order."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # whole runs or processes: make test-fast leaves them out

POD = ("{'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'p'}, 'spec': {'containers': "
       "[{'name': 'c', 'image': 'x'}]}}")


@pytest.mark.parametrize("first", ["import kubetwin", "import kubetwin.runner; import kubetwin",
                                   "from kubetwin.cli.main import main; import kubetwin"])
def test_kubetwin_run_is_the_function_in_any_import_order(first: str) -> None:
    code = (f"{first}\nr = kubetwin.run(objects=[{POD}], duration='1m')\n"
            "assert isinstance(r, kubetwin.RunResult), type(r)\nprint(sorted(r.summary['pods']['by_phase']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['Pending']"


def test_history_queries_read_a_pending_pod_as_kubectl_would() -> None:
    """result.versions / last / first_time / recorded_events, as the README shows them."""
    import kubetwin

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}
    r = kubetwin.run(objects=[pod], duration="1m")
    added = r.versions("Pod", "p")
    assert added[0].type == "ADDED" and added[0].time == 0.0 and added[0].object["metadata"]["name"] == "p"
    assert r.versions("Pod", prefix="q") == [] and r.versions("Pod", "p", namespace="other") == []
    last = r.last("Pod", "p")
    assert last["status"]["phase"] == "Pending" and "nodeName" not in last["spec"]
    assert r.first_time("Pod", lambda o: o["status"].get("phase") == "Running", "p") is None
    with pytest.raises(LookupError, match="no Pod q"):
        r.last("Pod", "q")
    failed = r.recorded_events("FailedScheduling", involved="p")
    assert len(failed) == 1 and failed[0].first_seen == 0.0  # one Event object, its count grows
    assert failed[0].message == "no nodes available to schedule pods"  # kube-scheduler's ErrNoNodesAvailable
