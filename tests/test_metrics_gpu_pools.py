"""report.metrics' GPU allocation per node pool, kept as pods and nodes change (issue 32): a node deleted with a pod
bound on it, added back, an allocatable change and a pod ending must leave the same GPU-seconds a recount of every
node at every change gives."""

from __future__ import annotations

from kubetwin.report.metrics import Metrics
from kubetwin.sim.env import Environment
from kubetwin.store.store import Store

GPU = "nvidia.com/gpu"


def _node(name: str, pool: str, gpus: int) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "cloud.google.com/gke-nodepool": pool}}, "status": {"allocatable": {GPU: str(gpus)}}}


def _pod(name: str, node: str, gpus: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x", "resources": {
                "limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}}]}, "status": {"phase": "Running"}}


def test_gpu_hours_per_pool_follow_nodes_and_pods_as_they_come_and_go() -> None:
    env = Environment()
    store = Store(env)
    metrics = Metrics(store, env, interval=3600.0)
    steps = [
        (0, lambda: [store.create(_node("a-0", "a", 8)), store.create(_node("a-1", "a", 8)),
                     store.create(_node("b-0", "b", 4)), store.create(_pod("p", "a-1", 4)),
                     store.create(_pod("q", "b-0", 2))]),
        (100, lambda: store.delete("Node", "", "a-1")),  # p's node goes: its 4 GPUs stop counting with it
        (200, lambda: store.create(_node("a-1", "a", 8))),  # back, empty
        (250, lambda: store.update({**store.get("Node", "", "b-0"), "status": {"allocatable": {GPU: "8"}}})),
        (300, lambda: store.update({**store.get("Pod", "default", "q"), "status": {"phase": "Succeeded"}})),
    ]
    for t, step in steps:
        env.at(t, step)
    env.run(400)
    gpu = metrics.finish(400)[0]["gpu_allocation"]
    # pool a: requested 4 GPUs for 100 s; allocatable 16 for 100 s, 8 for 100 s, 16 for 200 s
    assert gpu["a"]["gpu_hours_requested"] == round(4 * 100 / 3600, 3)
    assert gpu["a"]["gpu_hours_allocatable"] == round((16 * 100 + 8 * 100 + 16 * 200) / 3600, 3)
    # pool b: 2 GPUs requested for 300 s; 4 allocatable for 250 s, then 8 for 150 s
    assert gpu["b"]["gpu_hours_requested"] == round(2 * 300 / 3600, 3)
    assert gpu["b"]["gpu_hours_allocatable"] == round((4 * 250 + 8 * 150) / 3600, 3)
