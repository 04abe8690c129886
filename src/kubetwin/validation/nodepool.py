"""NodePool (kubetwin.io/v1alpha1) checks past the pydantic model: the machine type and accelerators against the
catalog, TPU pools and multi-host slices, pools on the NVIDIA DRA driver, MIG partition sizes, and networking."""

from __future__ import annotations

from typing import Any

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.api.twin import DEFAULT_ZONE


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """machineType and accelerators must exist in the catalog and agree with each other."""
    from kubetwin import catalog

    spec = m.obj["spec"]
    try:
        mt = catalog.machine_type(spec["machineType"])
    except catalog.CatalogError as exc:
        return [Diagnostic(m.file, m.line_of("spec.machineType"), m.ref, "spec.machineType", str(exc),
                           "use a GKE machine type from the catalog (kubetwin.catalog.machine_types())")]
    zone_errors = _zones(m, spec, mt.name)
    if mt.tpu is not None:
        return zone_errors + _tpu_pool(m, spec, mt) + _network_pool(m, spec, mt.name)
    tpu_topology = (spec.get("placementPolicy") or {}).get("tpuTopology")
    if tpu_topology:
        return [Diagnostic(m.file, m.line_of("spec.placementPolicy.tpuTopology"), m.ref,
                           "spec.placementPolicy.tpuTopology", f"Invalid value: {tpu_topology!r}: machine type "
                           f"{mt.name} has no TPUs", "remove tpuTopology, or pick a TPU machine type ("
                           f"{', '.join(t.name for t in catalog.tpu_machine_types())})")]
    out = zone_errors + _dra_pool(m, spec, mt.gpu) + _network_pool(m, spec, mt.name) + unsourced_machine(
        m, mt, mt.name)
    for i, acc in enumerate(spec.get("accelerators") or []):
        if mt.gpu != acc["type"] or mt.gpu_count != acc["count"]:
            want = f"{mt.gpu_count} x {mt.gpu}" if mt.gpu else "no GPUs"
            out.append(Diagnostic(m.file, m.line_of(f"spec.accelerators[{i}]"), m.ref, f"spec.accelerators[{i}]",
                                  f"Invalid value: {acc['count']} x {acc['type']}: machine type {mt.name} comes "
                                  f"with {want}", f"set type: {mt.gpu}, count: {mt.gpu_count}" if mt.gpu
                                  else "remove accelerators or pick a GPU machine type (g2, a2, a3, a4)"))
        if acc.get("gpuPartitionSize"):
            out += _partition_size(m, i, acc)
        if acc.get("gpuSharingConfig"):
            from kubetwin.devices import sharing

            for prob in sharing.gke_sharing(acc["gpuSharingConfig"])[2]:
                field = f"spec.accelerators[{i}].gpuSharingConfig.{prob.field}"
                out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, prob.message, prob.hint))
    return out


def _zones(m: Manifest, spec: dict, machine: str) -> list[Diagnostic]:
    """Each zone must exist and offer the machine type (catalog/data/zones.yaml, with its sources): GKE refuses a
    node pool whose --node-locations lack the machine type, as Compute Engine has no such VM there."""
    from kubetwin import catalog

    given = spec.get("zones")
    zones = given or [DEFAULT_ZONE]
    offered = catalog.zones_offering(machine)
    out: list[Diagnostic] = []
    for i, zone in enumerate(zones):
        field = f"spec.zones[{i}]" if given else "spec.zones"
        line = m.line_of(field) if given else m.line_of("spec")
        if not catalog.zone_exists(zone):
            region = zone.rsplit("-", 1)[0]
            same = [z for z in catalog.zones() if z.rsplit("-", 1)[0] == region]
            usable = [z for z in (offered[0] if offered else same) if z in same]  # the region's zones that fit
            hint = (f"use one of {region}'s zones: {', '.join(usable)}" if usable else
                    f"use a zone that offers {machine}: {', '.join(offered[0])}" if offered else
                    "use a Compute Engine zone, e.g. us-central1-a (catalog.zones() lists them)")
            out.append(Diagnostic(m.file, line, m.ref, field, f'Invalid value: "{zone}": zone does not exist',
                                  hint))
        elif offered is not None and zone not in offered[0]:
            where = "" if given else f"spec.zones defaults to [{zone}]; "
            out.append(Diagnostic(m.file, line, m.ref, field,
                                  f'Invalid value: "{zone}": {where}zone {zone} does not offer machine type {machine} '
                                  f"(source: {offered[1]})",
                                  f"use a zone that offers {machine}: {', '.join(offered[0])}"))
    return out


def _network_pool(m: Manifest, spec: dict, machine: str) -> list[Diagnostic]:
    """gpuDirect must match the machine; Fast Socket needs gVNIC and GPUs, and does not stack with GPUDirect."""
    from kubetwin.workloads import network

    return [Diagnostic(m.file, m.line_of(f), m.ref, f, msg, hint, sev) for f, msg, hint, sev in
            network.pool_problems(machine, spec.get("gpuDirect"), bool(spec.get("fastSocket")),
                                  bool(spec.get("gvnic", True)))]


def _tpu_pool(m: Manifest, spec: dict, mt: Any) -> list[Diagnostic]:
    """A TPU node pool as GKE writes it: the machine type implies the chips, placementPolicy.tpuTopology must be
    one that machine type takes, and a multi-host slice's pool is exactly one slice (GKE creates it with
    --num-nodes = hosts in the slice, xpk core/nodepool.py; it is created, repaired and scaled whole, 0 <-> all)."""
    from kubetwin import catalog
    from kubetwin.devices import tpu

    out: list[Diagnostic] = []
    kind = catalog.tpu_type(mt.tpu)
    for i, acc in enumerate(spec.get("accelerators") or []):  # optional; if given it must agree
        if acc["type"] != kind.gke_accelerator or acc["count"] != mt.tpu_chips:
            field = f"spec.accelerators[{i}]"
            out.append(Diagnostic(m.file, m.line_of(field), m.ref, field,
                                  f"Invalid value: {acc['count']} x {acc['type']}: machine type {mt.name} comes with "
                                  f"{mt.tpu_chips} x {kind.gke_accelerator} (google.com/tpu)",
                                  "remove accelerators (a TPU machine type implies its chips) or set type: "
                                  f"{kind.gke_accelerator}, count: {mt.tpu_chips}"))
    field = "spec.placementPolicy.tpuTopology"
    topology = (spec.get("placementPolicy") or {}).get("tpuTopology") or mt.single_host_topology
    try:
        chips, hosts = tpu.slice_shape(mt.name, topology)
    except tpu.TopologyError as exc:
        return out + [Diagnostic(m.file, m.line_of(field), m.ref, field, f"Invalid value: {exc}",
                                 f"set {field} to one of the valid topologies of {mt.name}")]
    if hosts > 1:
        out += _tpu_slice_counts(m, spec, mt, topology, hosts)
        if mt.tpu == "tpu7x" and not (spec.get("placementPolicy") or {}).get("policyName"):
            out.append(Diagnostic(m.file, m.line_of("spec.placementPolicy"), m.ref, "spec.placementPolicy",
                                  "GKE creates multi-host Ironwood (TPU7x) node pools with a workload policy "
                                  "(--placement-policy) that carries the topology, not --tpu-topology; the twin reads "
                                  "tpuTopology", "add policyName: <your workload policy> to match the real pool",
                                  "notice"))
    out += unsourced_machine(m, mt, kind.name)
    return out


def unsourced_machine(m: Manifest, mt: Any, what: str) -> list[Diagnostic]:
    """A machine type whose vCPUs or memory no source gave is refused (its nodes would advertise no cpu or memory
    and nothing would fit); one without a published price is refused unless the NodePool says what it pays per
    node-hour (annotation kubetwin.io/hourly-price-usd), never billed at $0."""
    from kubetwin import catalog
    from kubetwin.autoscaler.nodepool import POOL_PRICE

    missing = catalog.unsourced(mt)
    shape = [w for w in missing if w != "price"]
    out: list[Diagnostic] = []
    if shape:
        out.append(Diagnostic(m.file, m.line_of("spec.machineType"), m.ref, "spec.machineType",
                              f"Unsupported value: \"{mt.name}\": the catalog has no sourced {' or '.join(shape)} "
                              f"for {mt.name}, so the twin cannot size its nodes (they would advertise no "
                              f"{' or '.join('cpu' if w == 'vCPUs' else w for w in shape)} and nothing would fit)",
                              "use another machine type, or add the sourced shape to "
                              "src/kubetwin/catalog/data/machines.yaml"))
    given = POOL_PRICE in ((m.obj.get("metadata") or {}).get("annotations") or {})  # a bad one: the registry says
    if "price" in missing and not given:
        out.append(Diagnostic(m.file, m.line_of("spec.machineType"), m.ref, "spec.machineType",
                              f"Required value: there is no published price for {what} ({mt.name}) in the catalog, "
                              "and the twin does not bill a pool at $0",
                              f'set metadata.annotations["{POOL_PRICE}"] to what you pay per node-hour (USD)'))
    return out


def _tpu_slice_counts(m: Manifest, spec: dict, mt: Any, topology: str, hosts: int) -> list[Diagnostic]:
    """A multi-host slice's pool holds exactly one slice, in one zone: nodeCount 0 or the slice's host count,
    autoscaling minNodeCount 0 or hosts and maxNodeCount hosts."""
    out: list[Diagnostic] = []
    what = f"a {topology} slice of {mt.name} is {hosts} nodes"
    count = spec.get("nodeCount")
    if count is not None and count not in (0, hosts):
        out.append(Diagnostic(m.file, m.line_of("spec.nodeCount"), m.ref, "spec.nodeCount",
                              f"Invalid value: {count}: {what}, and a multi-host TPU slice node pool holds exactly "
                              "one slice", f"set nodeCount: {hosts} (for more slices, add one node pool per slice)"))
    auto = spec.get("autoscaling") or {}
    if auto and auto.get("maxNodeCount") != hosts:
        out.append(Diagnostic(m.file, m.line_of("spec.autoscaling.maxNodeCount"), m.ref,
                              "spec.autoscaling.maxNodeCount", f"Invalid value: {auto.get('maxNodeCount')}: {what}; "
                              "a multi-host slice scales 0 <-> the whole slice", f"set maxNodeCount: {hosts}"))
    if auto and auto.get("minNodeCount") not in (0, hosts):
        out.append(Diagnostic(m.file, m.line_of("spec.autoscaling.minNodeCount"), m.ref,
                              "spec.autoscaling.minNodeCount", f"Invalid value: {auto.get('minNodeCount')}: {what}; "
                              "a multi-host slice scales 0 <-> the whole slice", f"set minNodeCount: 0 or {hosts}"))
    zones = spec.get("zones") or []
    if len(zones) > 1:
        out.append(Diagnostic(m.file, m.line_of("spec.zones"), m.ref, "spec.zones",
                              f"Invalid value: {zones}: a multi-host TPU slice is one ICI-connected block in one zone",
                              f"keep one zone, e.g. zones: [{zones[0]}]"))
    return out


def _dra_pool(m: Manifest, spec: dict, gpu: str | None) -> list[Diagnostic]:
    """A node pool on the NVIDIA DRA driver: GKE excludes GPU sharing there (set-up-dra limitations)."""
    from kubetwin.devices import mig
    from kubetwin.devices.dra import nvidia

    labels = spec.get("labels") or {}
    if not nvidia.uses_dra(labels):
        return []
    out = []
    for i, acc in enumerate(spec.get("accelerators") or []):
        for key in ("gpuSharingConfig", "gpuPartitionSize"):
            if acc.get(key):
                field = f"spec.accelerators[{i}].{key}"
                out.append(Diagnostic(m.file, m.line_of(field), m.ref, field,
                                      f"Invalid value: GKE does not support {key} on node pools that use DRA "
                                      f"({nvidia.NO_DEVICE_PLUGIN}=true)",
                                      f"remove {key}, or the {nvidia.NO_DEVICE_PLUGIN} label to use the device "
                                      "plugin"))
    config = labels.get(nvidia.MIG_CONFIG)
    if config and gpu:
        field = f'spec.labels["{nvidia.MIG_CONFIG}"]'
        try:
            if config != "all-disabled":
                nvidia.static_layout(gpu, config)
        except mig.MigError as exc:
            out.append(Diagnostic(m.file, m.line_of(f"spec.labels.{nvidia.MIG_CONFIG}"), m.ref, field,
                                  f"Invalid value: {config!r}: {exc}", "use all-<profile> or all-disabled"))
        else:
            out.append(Diagnostic(m.file, m.line_of(f"spec.labels.{nvidia.MIG_CONFIG}"), m.ref, field,
                                  "GKE's DRA support excludes MIG; the twin publishes the NVIDIA DRA driver's "
                                  "static MIG devices as on a cluster where mig-parted applied this config", "",
                                  "notice"))
    return out


def _partition_size(m: Manifest, i: int, acc: dict) -> list[Diagnostic]:
    """GKE multi-instance GPUs: the accelerator must support MIG and the size must be one of its profiles."""
    from kubetwin.devices import mig

    field = f"spec.accelerators[{i}].gpuPartitionSize"
    model = mig.model_of(acc["type"])
    if model is None:
        capable = ", ".join(a for g in mig.gpu_models() for a in mig.accelerators_of(g))
        return [Diagnostic(m.file, m.line_of(field), m.ref, field, f"Invalid value: {acc['gpuPartitionSize']!r}: "
                           f"{acc['type']} does not support multi-instance GPUs",
                           f"remove gpuPartitionSize, or use a MIG-capable GPU ({capable})")]
    try:
        mig.partition_count(model, acc["gpuPartitionSize"])
    except mig.MigError as exc:
        return [Diagnostic(m.file, m.line_of(field), m.ref, field, f"Invalid value: {exc}",
                           f"{acc['type']} is a {model}")]
    return []


def _pool_nodes(spec: dict) -> tuple[int, int, str, int]:
    """(nodes the pool starts with, the most it may grow to, the field that sets the start, zones it spans): per zone
    counts times its zones, a multi-host TPU pool's one slice in its first zone (autoscaler/nodepool.py)."""
    from kubetwin import catalog
    from kubetwin.autoscaler.nodepool import initial_node_count
    from kubetwin.devices import tpu

    zones = len(spec.get("zones") or [DEFAULT_ZONE])
    topology = tpu.pool_topology(spec)
    if topology is not None and tpu.is_multi_host(catalog.machine_type(spec["machineType"]).name, topology):
        zones = 1
    auto = spec.get("autoscaling")
    start = initial_node_count(spec)
    most = int(auto["maxNodeCount"]) if auto else start
    field = "spec.nodeCount" if spec.get("nodeCount") is not None or not auto else "spec.autoscaling.minNodeCount"
    return start * zones, max(most, start) * zones, field, zones


def cluster_size(manifests: list[Manifest]) -> list[Diagnostic]:
    """GKE's "Nodes per cluster: 15,000" (api.twin.MAX_NODES_PER_CLUSTER): the nodes the NodePools start with
    (nodeCount, else autoscaling's minNodeCount, which GKE creates up front, per zone) above it are an error at the
    pool that crosses it (the twin's wording: GKE's own error text is not published); maxima above it a notice, as the
    cluster autoscaler stops there (autoscaler/cluster_autoscaler.py). Over objects without errors, in file order;
    static v1 Nodes are not counted here (the autoscaler counts them)."""
    from kubetwin.api import twin

    limit = twin.MAX_NODES_PER_CLUSTER
    started = most = 0
    notice: Diagnostic | None = None
    for m in manifests:
        if m.kind != "NodePool" or m.obj.get("apiVersion") != twin.TWIN_API:
            continue
        spec = m.obj["spec"]
        start, top, field, zones = _pool_nodes(spec)
        if started + start > limit:
            per_zone = start // zones
            allowed = max(0, (limit - started) // zones)
            where = f"{per_zone} x {zones} zones" if zones > 1 else f"{per_zone}"
            return [Diagnostic(m.file, m.line_of(field), m.ref, field,
                               f"Invalid value: {per_zone}: the node pools would start with {started + start:,} "
                               f"nodes ({started:,} in the pools before this one + {where} here), above GKE's limit "
                               f"of {limit:,} nodes per cluster (https://cloud.google.com/kubernetes-engine/quotas; "
                               "the twin's wording)",
                               f"set {field} to at most {allowed} (per zone), use fewer zones, or split the "
                               "workload over several clusters")]
        started += start
        if notice is None and most + top > limit and spec.get("autoscaling"):
            out_field = "spec.autoscaling.maxNodeCount"
            notice = Diagnostic(m.file, m.line_of(out_field), m.ref, out_field,
                                f"the node pools' maxima add up to more than GKE's limit of {limit:,} nodes per "
                                f"cluster ({most + top:,} with this pool): the cluster autoscaler adds no node past "
                                f"{limit:,} (its --max-nodes-total; pods it leaves out stay Pending with "
                                '"max node total count already reached")',
                                "lower maxNodeCount if the pools are not meant to reach the limit", "notice")
        most += top
    return [notice] if notice is not None else []


# what each of GKE's AutoprovisioningNodePoolDefaults fields would change, and what the twin does instead
_NAP_DEFAULTS = {
    "oauthScopes": "the nodes' access scopes (the twin has no Google APIs to call)",
    "serviceAccount": "the nodes' service account (the twin has no Google APIs to call)",
    "upgradeSettings": "surge upgrades of auto-created pools (the twin runs no node upgrades)",
    "management": "auto-upgrade and auto-repair (the twin runs no node upgrades or repairs)",
    "minCpuPlatform": "the CPU platform (the twin's machines run at the catalog's speed)",
    "diskSizeGb": "the boot disk (the twin bills the machine only, not its boot disk)",
    "diskType": "the boot disk (the twin bills the machine only, not its boot disk)",
    "shieldedInstanceConfig": "Shielded VM options (no effect on the twin's nodes)",
    "bootDiskKmsKey": "boot disk encryption (no effect on the twin's nodes)",
    "imageType": "the node image (the twin's nodes boot in the pool's bootDelay whatever the image)",
    "insecureKubeletReadonlyPortEnabled": "the kubelet's read-only port (the twin has no kubelet endpoint)",
}


def autoprovisioning(manifests: list[Manifest]) -> list[Diagnostic]:
    """Scenario spec.clusterAutoscaling.autoprovisioningNodePoolDefaults (GKE's names, accepted by api.twin): one
    notice per field set, naming what it would change and what the run does instead (auto-created pools take the
    twin's node template, autoscaler/nap.py)."""
    from kubetwin.api import twin

    out: list[Diagnostic] = []
    for m in manifests:
        if m.kind != "Scenario" or m.obj.get("apiVersion") != twin.TWIN_API:
            continue
        defaults = ((m.obj.get("spec") or {}).get("clusterAutoscaling") or {}).get(
            "autoprovisioningNodePoolDefaults") or {}
        for key in sorted(defaults):
            field = f"spec.clusterAutoscaling.autoprovisioningNodePoolDefaults.{key}"
            what = _NAP_DEFAULTS.get(key, "this setting")
            out.append(Diagnostic(m.file, m.line_of(field), m.ref, field,
                                  f"not modelled: {key} sets {what}; the run creates auto-provisioned pools with "
                                  "the twin's node template and ignores it", "", "notice"))
    return out
