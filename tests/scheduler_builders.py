"""A made-up node-only Filter for scheduler tests: it builds a node selector from a pod label (a team's pods go to
its team's nodes), so a test can check that the per-pod-shape cache keys on the pod fields a Filter reads."""

from __future__ import annotations

from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.nodeinfo import NodeInfo

TEAM = "example.com/team"


def same_team(pi: P.PodInfo, ni: NodeInfo) -> tuple[int, list[str]]:
    want = (pi.pod["metadata"].get("labels") or {}).get(TEAM)
    if want is not None and (ni.node["metadata"].get("labels") or {}).get(TEAM) != want:
        return P.UNRESOLVABLE, ["node(s) belong to another team"]
    return P.SUCCESS, []


SAME_TEAM = P.NodeFilter("SameTeam", same_team, (("metadata", "labels"),))
