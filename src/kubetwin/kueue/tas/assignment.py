"""A pod set's TopologyAssignment (pkg/util/tas/tas_assignment.go): the internal form, levels and per domain its
values and pod count, and the v1beta2 API form the Workload's status carries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Assignment:
    """TopologyAssignment: ``levels`` and, per domain, its values at those levels and its pod count."""

    levels: tuple[str, ...]
    domains: list[tuple[tuple[str, ...], int]]

    def to_api(self) -> dict:
        """The Workload's admission.podSetAssignments[].topologyAssignment in v1beta2's compressed form: one slice
        of ``domainCount`` domains, per level a universal value or individual roots around a common prefix and
        suffix, pod counts universal or individual (pkg/util/tas/tas_assignment.go singleCompactTopologyAssignment-
        Encoding; Kueue's hostname-prefix runs, which split a slice where hostnames change prefix, are not
        modelled -- the same bytes whenever the hostnames share one prefix)."""
        if not self.domains:
            return {"levels": list(self.levels), "slices": []}
        per_level = [_compact_values([d[0][i] for d in self.domains]) for i in range(len(self.levels))]
        counts = [c for _, c in self.domains]
        pod_counts = {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}
        return {"levels": list(self.levels),
                "slices": [{"domainCount": len(self.domains), "valuesPerLevel": per_level, "podCounts": pod_counts}]}

    def domain_counts(self) -> list[tuple[tuple[str, ...], int]]:
        return list(self.domains)


def _compact_values(values: list[str]) -> dict:
    """One level's values: ``universal`` when all equal, else ``individual`` roots with the longest common prefix
    and suffix taken off, never overlapping (fillSingleCompactSliceValues)."""
    prefix = suffix = values[0]
    for v in values[1:]:
        i = 0
        while i < min(len(prefix), len(v)) and prefix[i] == v[i]:
            i += 1
        prefix = prefix[:i]
        j = 0
        while j < min(len(suffix), len(v)) and suffix[len(suffix) - 1 - j] == v[len(v) - 1 - j]:
            j += 1
        suffix = suffix[len(suffix) - j:]
    max_len, min_len = max(map(len, values)), min(map(len, values))
    if len(prefix) == max_len:
        return {"universal": prefix}
    if len(prefix) + len(suffix) > min_len:
        prefix = prefix[:min_len - len(suffix)]
    ind: dict = {}
    if prefix:
        ind["prefix"] = prefix
    if suffix:
        ind["suffix"] = suffix
    ind["roots"] = [v[len(prefix):len(v) - len(suffix)] for v in values]
    return {"individual": ind}


def assignment_from_api(obj: dict) -> Assignment:
    """A topologyAssignment as written by ``to_api`` (or v1beta1's ``domains[{values, count}]``) read back."""
    levels = tuple(obj.get("levels") or ())
    if "domains" in obj:
        return Assignment(levels, [(tuple(d["values"]), int(d["count"])) for d in obj["domains"]])
    domains: list[tuple[tuple[str, ...], int]] = []
    for sl in obj.get("slices") or []:
        n = int(sl["domainCount"])
        cols = []
        for lv in sl.get("valuesPerLevel") or []:
            if "universal" in lv:
                cols.append([lv["universal"]] * n)
            else:
                ind = lv["individual"]
                prefix, suffix = ind.get("prefix", ""), ind.get("suffix", "")
                cols.append([f"{prefix}{r}{suffix}" for r in ind["roots"]])
        pc = sl.get("podCounts") or {}
        counts = [int(pc["universal"])] * n if "universal" in pc else [int(c) for c in pc["individual"]]
        domains.extend((tuple(col[i] for col in cols), counts[i]) for i in range(n))
    return Assignment(levels, domains)
