"""Kueue's Topology-Aware Scheduling (kubernetes-sigs/kueue keps/2724-topology-aware-scheduling).

`request` reads a pod set's topology request from its template's annotations (jobframework/tas.go), `snapshot`
builds a flavor's topology tree from the Nodes it selects and finds a pod set's assignment
(pkg/cache/scheduler/tas_flavor_snapshot.go `findTopologyAssignment`), `assignment` is the TopologyAssignment
and its v1beta2 form. The store side -- the ungater that turns an assignment into each gated pod's node
selector (pkg/controller/tas/topology_ungater.go) -- is `kueue.controller.tas`.
"""
