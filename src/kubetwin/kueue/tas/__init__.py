"""Kueue's Topology-Aware Scheduling (kubernetes-sigs/kueue keps/2724-topology-aware-scheduling).

`request` reads a pod set's topology request from its template's annotations (jobframework/tas.go), `snapshot`
builds a flavor's topology tree from the Nodes it selects and finds a pod set's assignment
(pkg/cache/scheduler/tas_flavor_snapshot.go `findTopologyAssignment`), `ungater` turns an assignment into the
node selectors of each gated pod (pkg/controller/tas/topology_ungater.go).
"""
