"""GKE multi-network support for Pods, checked against the cluster's networkConfig (Scenario spec.cluster).

GKE's "Set up multi-network support for Pods" (cloud.google.com/kubernetes-engine/docs/how-to/
setup-multinetwork-support-for-pods, Requirements): "Multi-network support for Pods requires GKE Dataplane V2", and
the cluster is created with it on (``gcloud container clusters create --enable-dataplane-v2
--enable-multi-networking``; the cluster API's ``networkConfig.datapathProvider: ADVANCED_DATAPATH`` and
``networkConfig.enableMultiNetworking: true``). Google's GPUDirect-RDMA (A3 Ultra, A4) and H4D guides create their
clusters that way, which is the twin's default (api/twin.py ClusterNetworkConfig).

What a cluster without it does, as the twin models it:

- asking for multi-networking on a LEGACY_DATAPATH cluster is refused, in the requirement's words (the exact
  text of GKE's API error was not found in a source; the sentence is the documentation's);
- ``networking.gke.io/v1`` ``Network`` and ``GKENetworkParamSet`` objects are refused as kubectl refuses a kind its
  cluster does not serve (``no matches for kind "Network" in version "networking.gke.io/v1"``): twin assumption that
  GKE installs these CRDs with multi-networking (the multi-network page creates them only after enabling it);
- a pod whose ``networking.gke.io/interfaces`` names networks is a warning, not an error: the annotation is a string
  the API server stores, and without multi-networking GKE attaches only the default interface, so NCCL (or MPI)
  sees no extra NICs (workloads/gpudirect.py reads such a pod as missing its interfaces).
"""

from __future__ import annotations

from typing import Any

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.api.twin import TWIN_API
from kubetwin.workloads.gpudirect import GROUP, INTERFACES

REQUIREMENT = "Multi-network support for Pods requires GKE Dataplane V2"
SOURCE = "https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods"
MULTI_NETWORK_KINDS = ("Network", "GKENetworkParamSet")


def network_config(manifests: list[Manifest]) -> tuple[Manifest | None, dict[str, Any]]:
    """The Scenario and its spec.cluster.networkConfig with the twin's defaults (both on)."""
    scenario = next((m for m in manifests if m.kind == "Scenario" and m.obj.get("apiVersion") == TWIN_API), None)
    cfg = (((scenario.obj.get("spec") or {}) if scenario else {}).get("cluster") or {}).get("networkConfig") or {}
    return scenario, {"datapathProvider": cfg.get("datapathProvider", "ADVANCED_DATAPATH"),
                      "enableMultiNetworking": cfg.get("enableMultiNetworking", True)}


def enabled(manifests: list[Manifest]) -> bool:
    """Whether the cluster has multi-network support for Pods (both settings on)."""
    _, cfg = network_config(manifests)
    return cfg["datapathProvider"] == "ADVANCED_DATAPATH" and cfg["enableMultiNetworking"] is True


def diagnostics(manifests: list[Manifest]) -> list[Diagnostic]:
    """The cluster setting itself, then what a cluster without multi-networking refuses or ignores."""
    scenario, cfg = network_config(manifests)
    out: list[Diagnostic] = []
    base = "spec.cluster.networkConfig"
    if scenario is not None and cfg["enableMultiNetworking"] and cfg["datapathProvider"] != "ADVANCED_DATAPATH":
        out.append(Diagnostic(scenario.file, scenario.line_of(f"{base}.enableMultiNetworking"), scenario.ref,
                              f"{base}.enableMultiNetworking",
                              f"Invalid value: true: {REQUIREMENT} (datapathProvider is "
                              f"{cfg['datapathProvider']}; {SOURCE})",
                              "set datapathProvider: ADVANCED_DATAPATH (gcloud container clusters create "
                              "--enable-dataplane-v2 --enable-multi-networking; Dataplane V2 is chosen when the "
                              "cluster is created), or enableMultiNetworking: false"))
        return out
    if enabled(manifests):
        return out
    why = ("the cluster has no multi-network support for Pods (Scenario spec.cluster.networkConfig: "
           f"datapathProvider {cfg['datapathProvider']}, enableMultiNetworking "
           f"{str(cfg['enableMultiNetworking']).lower()})")
    fix = ("set spec.cluster.networkConfig to datapathProvider: ADVANCED_DATAPATH and enableMultiNetworking: true "
           f"(gcloud container clusters create --enable-dataplane-v2 --enable-multi-networking; {SOURCE})")
    for m in manifests:
        group = str(m.obj.get("apiVersion") or "").rpartition("/")[0]
        if group == GROUP and m.kind in MULTI_NETWORK_KINDS:
            out.append(Diagnostic(m.file, m.line_of("kind"), m.ref, "kind",
                                  f'no matches for kind "{m.kind}" in version "{m.obj.get("apiVersion")}": {why}, '
                                  "so its Network CRDs are not installed",
                                  f"ensure CRDs are installed first: {fix}"))
            continue
        for ref in kinds.pod_templates(m.obj):
            annotations = ((ref.template.get("metadata") or {}).get("annotations") or {})
            if not isinstance(annotations, dict) or not annotations.get(INTERFACES):
                continue
            field = ref.at(f'metadata.annotations["{INTERFACES}"]')
            out.append(Diagnostic(m.file, m.line_of(ref.at("metadata.annotations")), m.ref, field,
                                  f"{why}: GKE attaches only the pod's default interface and ignores the networks "
                                  f"{INTERFACES} names, so NCCL or MPI finds no extra NICs (GPUDirect pods fall back "
                                  "to sockets over eth0)", fix, "warning"))
    return out
