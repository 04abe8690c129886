"""A pod set's topology request, read from its pod template's annotations as Kueue's jobframework reads them
(pkg/controller/jobframework/tas.go, apis/kueue/v1beta2/topology_types.go), and the Workload's
``podSets[].topologyRequest`` written the same way."""

from __future__ import annotations

from dataclasses import dataclass

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
ANNOTATIONS = (REQUIRED, PREFERRED, UNCONSTRAINED, SLICE_REQUIRED, SLICE_SIZE, GROUP_NAME)
# The scheduling gate Kueue puts on the pods of a TAS pod set (apis/kueue/v1beta2/topology_types.go).
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
HOSTNAME = "kubernetes.io/hostname"
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}  # Go's strconv.ParseBool


@dataclass(frozen=True)
class TopologyRequest:
    """PodSetTopologyRequest: at most one of required / preferred / unconstrained, plus an optional slice layer."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    slice_required: str | None = None
    slice_size: int | None = None
    group_name: str | None = None
    # what the integration says about its pods' ranks (jobs/job: the completion index; jobs/jobset: that and the
    # Job index over `replicas` Jobs), read by the ungater
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None

    def to_api(self) -> dict:
        """The Workload's podSets[].topologyRequest (v1beta2 field names)."""
        out: dict = {}
        if self.required is not None:
            out["required"] = self.required
        if self.preferred is not None:
            out["preferred"] = self.preferred
        if self.unconstrained is not None:
            out["unconstrained"] = self.unconstrained
        if self.slice_required is not None:
            out["podSetSliceRequiredTopology"] = self.slice_required
        if self.slice_size is not None:
            out["podSetSliceSize"] = self.slice_size
        if self.group_name is not None:
            out["podSetGroupName"] = self.group_name
        if self.pod_index_label is not None:
            out["podIndexLabel"] = self.pod_index_label
        if self.sub_group_index_label is not None:
            out["subGroupIndexLabel"] = self.sub_group_index_label
        if self.sub_group_count is not None:
            out["subGroupCount"] = self.sub_group_count
        return out


def is_tas(annotations: dict | None) -> bool:
    """utiltas.IsTAS: a pod whose template asked for a topology (or was given the unconstrained annotation as an
    implied TAS pod); the TAS caches count such pods through their workload's assignment, not as non-TAS usage."""
    ann = annotations or {}
    return any(k in ann for k in (REQUIRED, PREFERRED, SLICE_REQUIRED, UNCONSTRAINED))


def from_api(obj: dict | None) -> TopologyRequest | None:
    """A Workload's podSets[].topologyRequest back into a TopologyRequest (None when absent)."""
    if not obj:
        return None
    size, groups = obj.get("podSetSliceSize"), obj.get("subGroupCount")
    return TopologyRequest(obj.get("required"), obj.get("preferred"), obj.get("unconstrained"),
                           obj.get("podSetSliceRequiredTopology"), int(size) if size is not None else None,
                           obj.get("podSetGroupName"), obj.get("podIndexLabel"), obj.get("subGroupIndexLabel"),
                           int(groups) if groups is not None else None)


def from_annotations(annotations: dict | None, pod_index_label: str | None = None,
                     sub_group: tuple[str, int] | None = None) -> TopologyRequest | None:
    """The request a pod template's annotations make, with the integration's rank labels, None when it makes none
    (jobframework/tas.go podSetTopologyRequestBuilder.Build: an unconstrained annotation as parsed; a slice layer
    only with both annotations; the group name only beside required or preferred). Upstream builds a request
    with only the rank labels for every Job and JobSet; the twin writes one only when a TAS annotation is there,
    so Workloads that ask for no topology look as they did (twin choice: every run without TAS unchanged)."""
    ann = annotations or {}
    required, preferred = ann.get(REQUIRED), ann.get(PREFERRED)
    unconstrained = None
    if required is None and preferred is None and UNCONSTRAINED in ann:
        unconstrained = str(ann[UNCONSTRAINED]) in _TRUE
    slice_required = slice_size = None
    if SLICE_REQUIRED in ann and SLICE_SIZE in ann:
        try:
            slice_required, slice_size = ann[SLICE_REQUIRED], int(ann[SLICE_SIZE])
        except ValueError:
            slice_required = None
    if required is None and preferred is None and unconstrained is None and slice_required is None:
        return None
    group = ann.get(GROUP_NAME) if (required is not None or preferred is not None) else None
    return TopologyRequest(required, preferred, unconstrained, slice_required, slice_size, group, pod_index_label,
                           sub_group[0] if sub_group else None, sub_group[1] if sub_group else None)


def validation_errors(annotations: dict | None, path: str) -> list[tuple[str, str]]:
    """(field path, message) for what Kueue's job webhook refuses in a pod template's topology annotations, in its
    words (jobframework/tas_validation.go ValidateTASPodSetRequest)."""
    ann = annotations or {}
    out: list[tuple[str, str]] = []
    apath = f"{path}.annotations"
    if sum(k in ann for k in (REQUIRED, PREFERRED, UNCONSTRAINED)) > 1:
        out.append((apath, f'Invalid value: must not contain more than one topology annotation: ["{REQUIRED}", '
                    f'"{PREFERRED}", "{UNCONSTRAINED}"]'))
    if GROUP_NAME in ann:
        if SLICE_SIZE in ann:
            out.append((f"{apath}[{GROUP_NAME}]", f"Forbidden: may not be set when '{SLICE_SIZE}' is specified"))
        if SLICE_REQUIRED in ann:
            out.append((f"{apath}[{GROUP_NAME}]", f"Forbidden: may not be set when '{SLICE_REQUIRED}' is "
                        "specified"))
        if PREFERRED not in ann and REQUIRED not in ann:
            out.append((f"{apath}[{GROUP_NAME}]", f"Forbidden: may not be set when neither '{PREFERRED}' nor "
                        f"'{REQUIRED}' is specified"))
        if str(ann[GROUP_NAME]).isdigit():
            out.append((f"{apath}[{GROUP_NAME}]", f'Invalid value: "{ann[GROUP_NAME]}": must not be a number'))
    if SLICE_REQUIRED in ann and SLICE_SIZE not in ann:
        out.append((f"{apath}[{SLICE_SIZE}]", f"Required value: must be set when '{SLICE_REQUIRED}' is specified"))
    if SLICE_SIZE in ann and SLICE_REQUIRED not in ann:
        out.append((f"{apath}[{SLICE_SIZE}]", f"Forbidden: may not be set when '{SLICE_REQUIRED}' is not "
                    "specified"))
    if UNCONSTRAINED in ann and str(ann[UNCONSTRAINED]) not in _TRUE | {"0", "f", "F", "FALSE", "false", "False"}:
        out.append((f"{apath}[{UNCONSTRAINED}]", f'Invalid value: "{ann[UNCONSTRAINED]}": must be a boolean value'))
    if SLICE_SIZE in ann:
        value = str(ann[SLICE_SIZE])
        try:
            size = int(value)
        except ValueError:
            out.append((f"{apath}[{SLICE_SIZE}]", f'Invalid value: "{value}": must be a numeric value'))
        else:
            if size < 1:
                out.append((f"{apath}[{SLICE_SIZE}]", f'Invalid value: "{value}": must be greater than or equal to 1'))
    return out
