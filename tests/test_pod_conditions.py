"""A pod's status.conditions as the kubelet writes them (kubernetes pkg/kubelet/status/generate.go, the status
manager's mergePodStatus and updateLastTransitionTime in pkg/kubelet/status/status_manager.go):

* the kubelet owns PodReadyToStartContainers, Initialized, Ready, ContainersReady and PodScheduled and lists them in
  that order after the conditions it does not own (`kubectl describe pod` prints them so);
* a container that is not ready is named in Go's slice format, "containers with unready status: [a b]";
* a Failed pod's Ready and ContainersReady say PodFailed, a Succeeded pod's say PodCompleted; a finished pod's
  sandbox is gone (PodReadyToStartContainers False);
* a condition whose status does not change keeps its lastTransitionTime.
"""

from __future__ import annotations

from conftest import condition
from k8s_builders import make_pod, make_scenario, static_node
from serving_builders import a100_pool, inference_pool, trace, vllm

from kubetwin.runner import run

KUBELET_ORDER = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]


def two_containers(name: str, **annotations: str) -> dict:
    pod = make_pod(name).obj()
    pod["spec"]["containers"] = [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]
    pod["metadata"]["annotations"].update(annotations)
    return pod


def test_a_running_pod_lists_its_conditions_in_the_kubelets_order() -> None:
    r = run(objects=[make_scenario("10m").obj(), static_node("n1").obj(), make_pod("p").duration("1h").obj()])
    pod = r.last("Pod", "p")
    assert [c["type"] for c in pod["status"]["conditions"]] == KUBELET_ORDER
    assert all(c["status"] == "True" for c in pod["status"]["conditions"])


def test_unready_containers_are_named_as_go_prints_a_slice() -> None:
    # restartPolicy Always (a bare pod's default): both containers exit 1 after 2m and back off
    r = run(objects=[make_scenario("125s").obj(), static_node("n1").obj(),
                     two_containers("p", **{"kubetwin.io/fail-after": "2m"})])
    pod = r.last("Pod", "p")
    for ctype in ("Ready", "ContainersReady"):
        assert condition(pod, ctype) == {"type": ctype, "status": "False", "reason": "ContainersNotReady",
                                    "message": "containers with unready status: [a b]",
                                    "lastTransitionTime": "2026-01-01T00:02:00Z"}
    assert [c["type"] for c in pod["status"]["conditions"]] == KUBELET_ORDER


def test_a_failed_pod_says_podfailed_and_a_succeeded_one_podcompleted() -> None:
    failed = two_containers("failed", **{"kubetwin.io/fail-after": "1m"})
    failed["spec"]["restartPolicy"] = "Never"
    done = make_pod("done").duration("1m").obj()
    done["spec"]["restartPolicy"] = "Never"
    r = run(objects=[make_scenario("10m").obj(), static_node("n1").obj(), failed, done])
    f, d = r.last("Pod", "failed"), r.last("Pod", "done")
    assert f["status"]["phase"] == "Failed" and d["status"]["phase"] == "Succeeded"
    for ctype in ("Ready", "ContainersReady"):
        assert {k: condition(f, ctype).get(k) for k in ("status", "reason")} == {"status": "False",
                                                                                  "reason": "PodFailed"}
        assert {k: condition(d, ctype).get(k) for k in ("status", "reason")} == {"status": "False",
                                                                          "reason": "PodCompleted"}
        assert "message" not in condition(f, ctype) and "message" not in condition(d, ctype)
    for pod in (f, d):  # the sandbox is torn down once every container has exited
        assert condition(pod, "PodReadyToStartContainers")["status"] == "False"
        assert condition(pod, "PodScheduled")["lastTransitionTime"] == "2026-01-01T00:00:00Z"
        assert [c["type"] for c in pod["status"]["conditions"]] == KUBELET_ORDER
    assert condition(d, "Initialized") == {"type": "Initialized", "status": "True", "reason": "PodCompleted",
                                      "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert condition(f, "Initialized") == {"type": "Initialized", "status": "True",
                                      "lastTransitionTime": "2026-01-01T00:00:00Z"}


def test_a_server_that_never_turns_ready_keeps_the_time_it_became_unready_through_its_crashes() -> None:
    # Llama-3-8B cannot load on a 1g.10gb MIG slice: the server exits at start-up, again at every restart.
    server = vllm("srv", 1).args(["--model", "meta-llama/Meta-Llama-3-8B-Instruct", "--max-model-len", "4096"]).obj()
    r = run(objects=[make_scenario("15m").obj(), a100_pool().gpu_partition("1g.10gb").obj(), server,
                     inference_pool().obj(),
                     trace().rate(1).start("8m").obj()])
    name = next(n for _, _, _, o in r.history if o["kind"] == "Pod" for n in [o["metadata"]["name"]])
    running = [o for _, etype, o in r.versions("Pod", name)
               if etype != "DELETED" and o["status"].get("phase") == "Running"]
    assert max(o["status"]["containerStatuses"][0]["restartCount"] for o in running) >= 2
    first = condition(running[0], "Ready")
    assert first["status"] == "False"
    for o in running:  # never True: the time it turned False stays
        assert condition(o, "Ready")["status"] == "False"
        assert condition(o, "Ready")["lastTransitionTime"] == first["lastTransitionTime"]
        assert condition(o, "ContainersReady")["lastTransitionTime"] == first["lastTransitionTime"]
