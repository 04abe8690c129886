"""api.podspec.SameInputs: values derived once per input identity, so a template's pods share them."""

from kubetwin.api.podspec import SameInputs
from kubetwin.controllers.admission import extended_resource_toleration
from kubetwin.controllers.nodelifecycle import default_toleration_seconds


def test_same_objects_reuse_the_value_and_equal_copies_do_not() -> None:
    calls: list[tuple] = []

    def fn(a: list, b: object) -> list:
        calls.append((a, b))
        return [*a, b]

    memo = SameInputs(fn)
    given = [1, 2]
    first = memo(given, None)
    assert memo(given, None) is first
    assert len(calls) == 1
    again = memo([1, 2], None)  # equal, but another list: computed anew (a list's content is not the key)
    assert again == first and again is not first
    assert len(calls) == 2


def test_pods_of_one_template_share_their_admitted_tolerations() -> None:
    containers = [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]

    def pod(name: str) -> dict:
        return {"kind": "Pod", "metadata": {"name": name}, "spec": {"containers": containers}}

    a = default_toleration_seconds(extended_resource_toleration(pod("a")))
    b = default_toleration_seconds(extended_resource_toleration(pod("b")))
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"]
    assert [t["key"] for t in a["spec"]["tolerations"]] == [
        "nvidia.com/gpu", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
