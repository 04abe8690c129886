"""The scheduler cache as numpy columns, so Filter and Score run over all nodes at once.

NodeInfo (nodeinfo.py) stays the per-node record that preemption and metrics read; NodeTable mirrors
its numbers as one row per node and one column per resource. The scalar plugins in plugins.py are the
reference: tests/test_nodetable.py checks that both give the same verdicts and scores.
"""

from __future__ import annotations

import numpy as np

from kubetwin.k8s.names import ZONE
from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.nodeinfo import DEFAULT_MEMORY, DEFAULT_MILLI_CPU, NodeInfo

NO_PODS = np.iinfo(np.int64).max


class StaticVerdicts:
    """Node-only filter results for one pod shape: a code, a reason and the node-only raw scores per row (one row of
    `scores` per Score plugin of the profile, in its order)."""

    def __init__(self) -> None:
        self.gen = -1
        self.code = np.zeros(0, np.int8)
        self.reason = np.zeros(0, np.int32)  # index into NodeTable.reasons
        self.scores = np.zeros((0, 0), np.int64)  # [node-only Score plugin, row] raw scores
        self.ok = np.zeros(0, bool)  # code == SUCCESS
        self.scored = False  # any node with a non-zero node-only raw score


class ScoreCache:
    """For one request shape: NodeResourcesFit's verdict and the weighted NodeResourcesFit +
    BalancedAllocation score per row, refreshed only for the rows that changed since (the table's log)."""

    def __init__(self) -> None:
        self.pos = -1  # position in NodeTable.changes up to which this cache is current
        self.fit = np.zeros(0, bool)
        self.total = np.zeros(0, np.int64)


class NodeTable:
    """Rows in node-creation order (deleted rows stay, dead); `order` is the nodeTree scan order."""

    def __init__(self) -> None:
        self.row: dict[str, int] = {}
        self.infos: list[NodeInfo | None] = []
        self.alive = np.zeros(0, bool)
        self.row_gen = np.zeros(0, np.int64)  # generation at which a row's node last changed
        self.gen = 0
        self.changes: list[int] = []  # rows whose node or pods changed, in order (ScoreCache refresh)
        self.log_base = 0  # absolute position of changes[0]
        self.zone_ids: dict[str, int] = {}
        self.zone = np.zeros(0, np.int64)
        self.alloc: dict[str, np.ndarray] = {}
        self.used: dict[str, np.ndarray] = {}
        self.free: dict[str, np.ndarray] = {}  # alloc - used, what NodeResourcesFit compares against
        self.nonzero_cpu = np.zeros(0, np.int64)
        self.nonzero_mem = np.zeros(0, np.int64)
        self.order = np.zeros(0, np.int64)
        self._order2 = np.zeros(0, np.int64)
        self._order_dirty = False
        self.reasons: list[str] = [""]
        self._reason_id: dict[str, int] = {"": 0}
        self.reason_plugin: dict[str, str] = {}  # reason -> the filter plugin that gives it
        self.min_prio = np.zeros(0, np.int64)  # lowest priority among a node's pods (preemption candidates)

    # -- rows -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.order)

    def _grow(self, need: int) -> None:
        cap = len(self.alive)
        if need <= cap:
            return
        new = max(need, 2 * cap, 64)

        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros(new, a.dtype)
            out[:cap] = a
            return out

        self.alive, self.row_gen, self.zone = grow(self.alive), grow(self.row_gen), grow(self.zone)
        self.nonzero_cpu, self.nonzero_mem = grow(self.nonzero_cpu), grow(self.nonzero_mem)
        self.min_prio = grow(self.min_prio)
        self.min_prio[cap:] = NO_PODS
        for cols in (self.alloc, self.used, self.free):
            for k in cols:
                cols[k] = grow(cols[k])

    def column(self, name: str) -> None:
        """Make sure a resource has columns (zero for every node until one reports it)."""
        if name not in self.alloc:
            self.alloc[name] = np.zeros(len(self.alive), np.int64)
            self.used[name] = np.zeros(len(self.alive), np.int64)
            self.free[name] = np.zeros(len(self.alive), np.int64)

    def upsert(self, ni: NodeInfo) -> None:
        """A node was added or changed: (re)load its row from the NodeInfo."""
        self.gen += 1
        i = self.row.get(ni.name)
        if i is None:
            i = len(self.infos)
            self.row[ni.name] = i
            self.infos.append(ni)
            self._grow(i + 1)
            self.alive[i] = True
            self._order_dirty = True
        self.infos[i] = ni
        zone = (ni.node["metadata"].get("labels") or {}).get(ZONE, "")
        zid = self.zone_ids.setdefault(zone, len(self.zone_ids))
        if self.zone[i] != zid:
            self._order_dirty = True
        self.zone[i] = zid
        self.row_gen[i] = self.gen
        self._changed(i)
        for k in set(ni.allocatable) | set(ni.requested):
            self.column(k)
        for k, col in self.alloc.items():  # Python ints in, no numpy scalars read back
            alloc, used = ni.allocatable.get(k, 0), ni.requested.get(k, 0)
            col[i] = alloc
            self.used[k][i] = used
            self.free[k][i] = alloc - used
        self.nonzero_cpu[i] = ni.nonzero_requested["cpu"]
        self.nonzero_mem[i] = ni.nonzero_requested["memory"]
        self.refresh_min_prio(ni.name)

    def refresh_min_prio(self, name: str) -> None:
        i = self.row.get(name)
        ni = self.infos[i] if i is not None else None
        if ni is not None:
            self.min_prio[i] = min((int(p["spec"].get("priority") or 0) for p in ni.pods.values()), default=NO_PODS)

    def remove(self, name: str) -> None:
        i = self.row.pop(name, None)
        if i is None:
            return
        self.gen += 1
        self.alive[i] = False
        self.infos[i] = None
        self.row_gen[i] = self.gen
        self._order_dirty = True
        self._changed(i)

    def _changed(self, i: int) -> None:
        if len(self.changes) >= 65536:  # caches older than the log recompute in full
            self.log_base += len(self.changes)
            self.changes = []
        self.changes.append(i)

    def add_requests(self, name: str, req: dict[str, int], sign: int, prio: int | None = None) -> None:
        """A pod was bound to (sign=1) or left (sign=-1) the node."""
        i = self.row.get(name)
        if i is None:
            return
        for k, v in req.items():
            self.column(k)
            self.used[k][i] += sign * v
            self.free[k][i] -= sign * v
        self.column("pods")
        self.used["pods"][i] += sign
        self.free["pods"][i] -= sign
        self._changed(i)
        self.nonzero_cpu[i] += sign * (req.get("cpu") or DEFAULT_MILLI_CPU)
        self.nonzero_mem[i] += sign * (req.get("memory") or DEFAULT_MEMORY)
        if sign > 0 and prio is not None:
            self.min_prio[i] = min(int(self.min_prio[i]), prio)
        else:
            self.refresh_min_prio(name)

    def scan_order(self) -> np.ndarray:
        """Live rows in nodeTree order: zones round-robin, creation order within a zone."""
        if self._order_dirty:
            live = (self.alive[:len(self.infos)]).nonzero()[0]
            zones = self.zone[live]
            rank = np.zeros(len(live), np.int64)
            for z in np.unique(zones):
                sel = zones == z
                rank[sel] = np.arange(int(sel.sum()))
            self.order = live[np.lexsort((zones, rank))]
            self._order2 = np.concatenate((self.order, self.order))
            self._order_dirty = False
        return self.order

    def first_feasible(self, mask: np.ndarray, start: int, want: int) -> tuple[np.ndarray, int]:
        """Scan from position `start` of the nodeTree order; stop at the want-th feasible row.

        Returns the feasible rows in scan order and how many nodes were processed (the next start).
        The scan reads the order in growing windows, so a pod that finds its nodes early reads few."""
        n = len(self.order)
        if not want or want >= n:
            idx = self._order2[start:start + n]  # the order rotated to begin at `start` (a view)
            return idx[mask[idx].nonzero()[0]], n
        found: list[np.ndarray] = []
        have, lo, step = 0, 0, max(2 * want, 256)
        while lo < n:
            hi = min(n, lo + step)
            idx = self._order2[start + lo:start + hi]
            pos = mask[idx].nonzero()[0]
            if have + len(pos) >= want:
                pos = pos[:want - have]
                found.append(idx[pos])
                rows = found[0] if len(found) == 1 else np.concatenate(found)
                return rows, lo + int(pos[-1]) + 1
            found.append(idx[pos])
            have += len(pos)
            lo, step = hi, 2 * step
        return (found[0] if len(found) == 1 else np.concatenate(found)), n

    def reason_id(self, reason: str) -> int:
        rid = self._reason_id.get(reason)
        if rid is None:
            rid = self._reason_id[reason] = len(self.reasons)
            self.reasons.append(reason)
        return rid

    # -- Filter ---------------------------------------------------------------------------------
    def static(self, pi: P.PodInfo, cached: StaticVerdicts, profile: P.Profile = P.DEFAULT) -> StaticVerdicts:
        """Bring a shape's node-only verdicts up to date, recomputing only the rows that changed."""
        if cached.gen == self.gen:
            return cached
        size = len(self.alive)
        if len(cached.code) < size:
            for attr in ("code", "reason"):
                old = getattr(cached, attr)
                new = np.zeros(size, old.dtype)
                new[:len(old)] = old
                setattr(cached, attr, new)
        if cached.scores.shape != (len(profile.scores), size):
            grown = np.zeros((len(profile.scores), size), np.int64)
            grown[:cached.scores.shape[0], :cached.scores.shape[1]] = cached.scores
            cached.scores = grown
        rows = (self.row_gen[:len(self.infos)] > cached.gen).nonzero()[0]
        scores = list(enumerate(profile.scores))
        for i in rows.tolist():
            ni = self.infos[i]
            if ni is None:
                cached.code[i], cached.reason[i] = P.UNRESOLVABLE, 0
                continue
            cached.code[i], cached.reason[i] = P.SUCCESS, 0
            for plugin in profile.filters:
                code, reasons = plugin.check(pi, ni)
                if code != P.SUCCESS:
                    cached.code[i], cached.reason[i] = code, self.reason_id(reasons[0])
                    self.reason_plugin.setdefault(reasons[0], plugin.name)
                    break
            else:
                for k, score in scores:
                    cached.scores[k, i] = score.score(pi, ni)
        cached.gen = self.gen
        cached.ok = cached.code == P.SUCCESS
        cached.scored = bool(cached.scores.any())
        return cached

    def insufficient(self, requests: dict[str, int], rows: np.ndarray) -> list[tuple[str, np.ndarray]]:
        """NodeResourcesFit per reason: for each reason, which of `rows` lack room (kube's fitsRequest)."""
        out = []
        pods_alloc = self.alloc.get("pods")
        pods_used = self.used.get("pods")
        if pods_alloc is None or pods_used is None:
            out.append(("Too many pods", np.ones(len(rows), bool)))
        else:
            out.append(("Too many pods", pods_used[rows] + 1 > pods_alloc[rows]))
        for name, want in requests.items():
            if not want:
                continue
            if name not in self.alloc:
                out.append((f"Insufficient {name}", np.ones(len(rows), bool)))
            else:
                out.append((f"Insufficient {name}", self.used[name][rows] + want > self.alloc[name][rows]))
        return out

    def fits(self, requests: dict[str, int]) -> np.ndarray:
        """NodeResourcesFit over every row (dead rows included; callers mask them)."""
        free = self.free
        if "pods" not in free:
            return np.zeros(len(self.alive), bool)
        ok = free["pods"] >= 1
        for name, want in requests.items():
            if want:
                col = free.get(name)
                if col is None:
                    return np.zeros(len(self.alive), bool)
                ok &= col >= want
        return ok

    # -- Score ----------------------------------------------------------------------------------
    def refresh(self, pi: P.PodInfo, cache: ScoreCache, strategy: str, weights: tuple[int, int]) -> ScoreCache:
        """Bring a request shape's fit verdicts and base scores up to date with the nodes."""
        end = self.log_base + len(self.changes)
        if cache.pos == end:
            return cache
        size = len(self.alive)
        if len(cache.total) < size:
            cache.pos = -1
        wf, wb = weights
        if cache.pos < self.log_base or end - cache.pos > 64:  # far behind: all rows, vectorized
            rows = np.arange(len(self.infos))
            cache.fit = np.zeros(size, bool)
            cache.total = np.zeros(size, np.int64)
            cache.fit[:] = self.fits(pi.requests) & self.alive
            cache.total[rows] = (self.resources_fit_score(pi.requests, rows, strategy) * wf
                                 + self.balanced_allocation_score(pi.requests, rows) * wb)
        else:  # a few rows: the scalar plugins beat numpy's per-call overhead
            fit, total = cache.fit, cache.total
            for i in set(self.changes[cache.pos - self.log_base:]):
                ni = self.infos[i]
                if ni is None:
                    fit[i], total[i] = False, 0
                    continue
                fit[i] = P.fits_request(pi.requests, ni)
                total[i] = (P.resources_fit_score(pi, ni, strategy) * wf + P.balanced_allocation_score(pi, ni) * wb)
        cache.pos = end
        return cache

    def resources_fit_score(self, requests: dict[str, int], rows: np.ndarray, strategy: str) -> np.ndarray:
        """NodeResourcesFit score over cpu and memory (weight 1 each), as plugins.resources_fit_score."""
        total = np.zeros(len(rows), np.int64)
        for name, nonzero, default in (("cpu", self.nonzero_cpu, DEFAULT_MILLI_CPU),
                                       ("memory", self.nonzero_mem, DEFAULT_MEMORY)):
            alloc = self.alloc[name][rows] if name in self.alloc else np.zeros(len(rows), np.int64)
            req = nonzero[rows] + (requests.get(name) or default)
            safe = np.where(alloc == 0, 1, alloc)
            if strategy == "MostAllocated":
                s = np.minimum(req, alloc) * P.MAX_NODE_SCORE // safe
            else:
                s = np.where(req > alloc, 0, (alloc - req) * P.MAX_NODE_SCORE // safe)
            total += np.where(alloc == 0, 0, s)
        return total // 2

    def balanced_allocation_score(self, requests: dict[str, int], rows: np.ndarray) -> np.ndarray:
        """NodeResourcesBalancedAllocation, as plugins.balanced_allocation_score."""
        if "cpu" not in self.alloc or "memory" not in self.alloc:
            return np.full(len(rows), P.MAX_NODE_SCORE, np.int64)
        fr = []
        for name in ("cpu", "memory"):
            alloc = self.alloc[name][rows]
            used = self.used[name][rows] + requests.get(name, 0)
            fr.append((alloc, np.minimum(1.0, used / np.where(alloc == 0, 1, alloc))))
        (ca, cf), (ma, mf) = fr
        score = ((1 - np.abs(cf - mf) / 2) * P.MAX_NODE_SCORE).astype(np.int64)
        return np.where((ca == 0) | (ma == 0), P.MAX_NODE_SCORE, score)
