"""Where the gateway's endpoints come from: a static host:port list, a file of host:port lines re-read on every scrape
(the live replica supervisor writes it), or the twin's own manifests (InferencePool + Deployments + InferenceModel /
InferenceObjective), read with the twin's loader and its pool-selector and objective rules (serving.dataplane.pools)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from kubetwin.api.loader import load_paths
from kubetwin.k8s.labels import matches
from kubetwin.live.gateway.config import GatewayConfig, split_hostport
from kubetwin.serving.dataplane.pools import objective_priority, pool_selector

PORT_NOTICE = ("notice: endpoints from manifests assume replica i of a Deployment listens on {host}:{port}+i "
               "(the InferencePool's target port plus the replica's index); use endpointsFile for anything else")


def parse_endpoint_lines(text: str) -> list[str]:
    """host:port per line; blank lines and '#' comments skipped; order kept, duplicates dropped."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        h, p = split_hostport(line)
        ep = f"{h}:{p}"
        if ep not in out:
            out.append(ep)
    return out


def _pool_port(spec: dict) -> int:
    """InferencePool v1 `targetPorts[0].number`, v1alpha2 `targetPortNumber`."""
    ports = spec.get("targetPorts") or []
    if ports and isinstance(ports[0], dict) and "number" in ports[0]:
        return int(ports[0]["number"])
    if "targetPortNumber" in spec:
        return int(spec["targetPortNumber"])
    raise ValueError("InferencePool has neither spec.targetPorts[0].number nor spec.targetPortNumber")


@dataclass
class FromManifests:
    endpoints: list[str]
    objectives: dict[str, int] = field(default_factory=dict)
    pool: str = ""


def from_manifests(paths: list[str], pool_name: str | None, namespace: str, host: str) -> FromManifests:
    """The pool's endpoints as the replicas of the Deployments its selector matches (see PORT_NOTICE) and the
    priorities of the InferenceModels / InferenceObjectives in the pool's namespace."""
    objs = [m.obj for m in load_paths(list(paths))]
    pools = [o for o in objs if o.get("kind") == "InferencePool"
             and (o["metadata"].get("namespace") or "default") == namespace]
    if pool_name and pool_name != "pool":
        pools = [o for o in pools if o["metadata"]["name"] == pool_name]
    if not pools:
        raise ValueError(f"no InferencePool {pool_name or ''} in namespace {namespace} in {', '.join(paths)}")
    pool = pools[0]
    sel = pool_selector(pool)
    port = _pool_port(pool.get("spec") or {})
    eps: list[str] = []
    offset = 0
    for d in sorted((o for o in objs if o.get("kind") == "Deployment"
                     and (o["metadata"].get("namespace") or "default") == namespace),
                    key=lambda o: o["metadata"]["name"]):
        labels = ((d.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
        if sel and matches({"matchLabels": sel}, labels):
            n = int((d.get("spec") or {}).get("replicas", 1) or 0)
            eps.extend(f"{host}:{port + offset + i}" for i in range(n))
            offset += n
    objectives: dict[str, int] = {}
    for o in objs:
        if o.get("kind") in ("InferenceModel", "InferenceObjective") and (
                o["metadata"].get("namespace") or "default") == namespace:
            model, prio = objective_priority(o)
            objectives[model] = prio
    print(PORT_NOTICE.format(host=host, port=port), file=sys.stderr)
    return FromManifests(eps, objectives, pool["metadata"]["name"])


class EndpointSource:
    """The current endpoint list; `refresh()` re-reads the endpoints file when its mtime changed (cheap to call on
    every scrape)."""

    def __init__(self, cfg: GatewayConfig) -> None:
        self.static: list[str] = []
        for ep in cfg.endpoints:
            h, p = split_hostport(ep)
            self.static.append(f"{h}:{p}")
        self.objectives: dict[str, int] = {}
        self.pool_name = cfg.poolName
        if cfg.manifests:
            got = from_manifests(cfg.manifests, cfg.poolName, cfg.namespace, cfg.replicaHost)
            self.static.extend(e for e in got.endpoints if e not in self.static)
            self.objectives = got.objectives
            if cfg.poolName == "pool":
                self.pool_name = got.pool
        self.file = cfg.endpointsFile
        self._mtime: int | None = None
        self._from_file: list[str] = []
        self.current: list[str] = list(self.static)
        self.refresh()

    def refresh(self) -> bool:
        """Re-read the file if it changed; True when the endpoint list changed. A missing file means none."""
        if not self.file:
            return False
        try:
            mtime = os.stat(self.file).st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime == self._mtime:
            return False
        self._mtime = mtime
        try:
            text = open(self.file, encoding="utf-8").read() if mtime is not None else ""
            self._from_file = parse_endpoint_lines(text)
        except (OSError, ValueError) as exc:  # a half-written file: keep the last good list
            print(f"gateway: cannot read endpointsFile {self.file}: {exc}", file=sys.stderr)
            return False
        new = self.static + [e for e in self._from_file if e not in self.static]
        changed = new != self.current
        self.current = new
        return changed
