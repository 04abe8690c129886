"""Kueue's topology assignment, ported case by case from kubernetes-sigs/kueue
pkg/cache/scheduler/tas_cache_test.go TestFindTopologyAssignments (Apache-2.0; behaviour and cases, not code).

Each test names its upstream case. Upstream runs every case at its HEAD's feature-gate defaults (TASProfileMixed
on: unconstrained requests use LeastFreeCapacity); cases that need pod-set groups, balanced placement, multi-layer
slices, node affinity preferences, elastic workloads or node replacement are not ported (not modelled).
Generated from the Go file by /tmp/tas/gen.py and reviewed; nodes through tests/kueue_builders.py.
"""

from __future__ import annotations

from kueue_builders import make_bound_pod, make_topology_node

from kubetwin.kueue.tas.request import TopologyRequest
from kubetwin.kueue.tas.snapshot import PodSetRequest, TASFlavorSnapshot

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
SUBBLOCK = "cloud.com/topology-subblock"
DATACENTER = "cloud.com/datacenter"
AIZONE = "cloud.com/aizone"
HOST = "kubernetes.io/hostname"


def _check(nodes, levels, podsets, pods=(), node_labels=None):
    """Build the "default" topology's snapshot and compare each pod set's (assignment, reason) with upstream's."""
    assert podsets
    snap = TASFlavorSnapshot.build("default", levels, [n.obj() for n in nodes], node_labels)
    snap.add_pods([p.obj() for p in pods])
    requests = [
        PodSetRequest(
            ps.get("name", f"ps{i}"),
            ps["count"],
            ps["requests"],
            ps.get("topology"),
            ps.get("node_selector", {}),
            None,
            tuple(ps.get("tolerations", ())),
        )
        for i, ps in enumerate(podsets)
    ]
    got = snap.find_assignments(requests)
    for i, ps in enumerate(podsets):
        name = ps.get("name", f"ps{i}")
        assignment, reason = got[name]
        assert reason == ps.get("reason", ""), name
        if "want" in ps:
            levels_want, domains_want = ps["want"]
            assert assignment is not None
            assert (list(assignment.levels), assignment.domains) == (levels_want, domains_want)
        else:
            assert assignment is None


# upstream `defaultNodes`
DEFAULT_NODES = [
    make_topology_node("b1-r1-x3")
    .label(BLOCK, "b1")
    .label(RACK, "r1")
    .label(HOST, "x3")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r2-x5")
    .label(BLOCK, "b1")
    .label(RACK, "r2")
    .label(HOST, "x5")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r2-x1")
    .label(BLOCK, "b1")
    .label(RACK, "r2")
    .label(HOST, "x1")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r2-x6")
    .label(BLOCK, "b1")
    .label(RACK, "r2")
    .label(HOST, "x6")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b2-r2-x2")
    .label(BLOCK, "b2")
    .label(RACK, "r1")
    .label(HOST, "x2")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b2-r2-x4")
    .label(BLOCK, "b2")
    .label(RACK, "r2")
    .label(HOST, "x4")
    .allocatable({"cpu": "2", "memory": "4Gi", "pods": "40"})
    .ready(),
]

# upstream `scatteredNodes`
SCATTERED_NODES = [
    make_topology_node("b1-r1-x3")
    .label(BLOCK, "b1")
    .label(RACK, "r1")
    .label(HOST, "x3")
    .allocatable({"cpu": "4", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r1-x5")
    .label(BLOCK, "b1")
    .label(RACK, "r1")
    .label(HOST, "x5")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r1-x1")
    .label(BLOCK, "b1")
    .label(RACK, "r1")
    .label(HOST, "x1")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b2-r1-x6")
    .label(BLOCK, "b2")
    .label(RACK, "r1")
    .label(HOST, "x6")
    .allocatable({"cpu": "2", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b2-r1-x2")
    .label(BLOCK, "b2")
    .label(RACK, "r1")
    .label(HOST, "x2")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
]

# upstream `multipodNodeset`
MULTIPOD_NODES = [
    make_topology_node("b1-r1-x3")
    .label(BLOCK, "b1")
    .label(RACK, "r1")
    .label(HOST, "x3")
    .allocatable({"cpu": "10", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r2-x5")
    .label(BLOCK, "b1")
    .label(RACK, "r2")
    .label(HOST, "x5")
    .allocatable({"cpu": "10", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r2-x1")
    .label(BLOCK, "b1")
    .label(RACK, "r2")
    .label(HOST, "x1")
    .allocatable({"cpu": "10", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r2-x6")
    .label(BLOCK, "b1")
    .label(RACK, "r2")
    .label(HOST, "x6")
    .allocatable({"cpu": "10", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b2-r1-x2")
    .label(BLOCK, "b2")
    .label(RACK, "r1")
    .label(HOST, "x2")
    .allocatable({"cpu": "10", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b2-r2-x4")
    .label(BLOCK, "b2")
    .label(RACK, "r2")
    .label(HOST, "x4")
    .allocatable({"cpu": "20", "memory": "4Gi", "pods": "40"})
    .ready(),
]

# upstream `binaryTreesNodes`
BINARY_TREES_NODES = [
    make_topology_node("b1-r1-x3")
    .label(BLOCK, "b1")
    .label(RACK, "r1")
    .label(HOST, "x3")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r1-x5")
    .label(BLOCK, "b1")
    .label(RACK, "r1")
    .label(HOST, "x5")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r2-x1")
    .label(BLOCK, "b1")
    .label(RACK, "r2")
    .label(HOST, "x1")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b1-r2-x6")
    .label(BLOCK, "b1")
    .label(RACK, "r2")
    .label(HOST, "x6")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b2-r1-x2")
    .label(BLOCK, "b2")
    .label(RACK, "r1")
    .label(HOST, "x2")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b2-r1-x4")
    .label(BLOCK, "b2")
    .label(RACK, "r1")
    .label(HOST, "x4")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b2-r2-x7")
    .label(BLOCK, "b2")
    .label(RACK, "r2")
    .label(HOST, "x7")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
    make_topology_node("b2-r2-x8")
    .label(BLOCK, "b2")
    .label(RACK, "r2")
    .label(HOST, "x8")
    .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
    .ready(),
]


def test_minimize_the_number_of_used_racks_before_optimizing_the_number_of_nodes_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "minimize the number of used racks before optimizing the number of nodes; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b1-r2-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x5")
            .allocatable({"cpu": "2", "pods": "20"})
            .ready(),
            make_topology_node("b1-r3-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r3")
            .label(HOST, "x1")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r3-x6")
            .label(BLOCK, "b1")
            .label(RACK, "r3")
            .label(HOST, "x6")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r3-x2")
            .label(BLOCK, "b1")
            .label(RACK, "r3")
            .label(HOST, "x2")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r3-x4")
            .label(BLOCK, "b1")
            .label(RACK, "r3")
            .label(HOST, "x4")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK),
                "requests": {"cpu": 1000},
                "count": 4,
                "want": ([HOST], [(("x1",), 1), (("x2",), 1), (("x4",), 1), (("x6",), 1)]),
            },
        ],
    )


def test_choose_the_node_that_can_accommodate_all_pods():
    """tas_cache_test.go TestFindTopologyAssignments:
    "choose the node that can accommodate all Pods"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x5")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK),
                "requests": {"cpu": 1000},
                "count": 2,
                "want": ([HOST], [(("x3",), 2)]),
            },
        ],
    )


def test_no_annotation_implied_default_to_unconstrained_6_pods_fit_into_hosts_scattered_across_the():
    """tas_cache_test.go TestFindTopologyAssignments:
    "no annotation; implied default to unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they could fit into single rack; BestFit"."""  # noqa: E501
    _check(
        SCATTERED_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "requests": {"cpu": 1000},
                "count": 6,
                "want": ([HOST], [(("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2)]),
            },
        ],
    )


def test_unconstrained_6_pods_fit_into_hosts_scattered_across_the_whole_datacenter_even_they_could():
    """tas_cache_test.go TestFindTopologyAssignments:
    "unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they could fit into single rack; BestFit"."""  # noqa: E501
    _check(
        SCATTERED_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(unconstrained=True),
                "requests": {"cpu": 1000},
                "count": 6,
                "want": ([HOST], [(("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2)]),
            },
        ],
    )


def test_unconstrained_a_single_pod_fits_into_each_host_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "unconstrained; a single pod fits into each host; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(unconstrained=True),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("x3",), 1)]),
            },
        ],
    )


def test_unconstrained_a_single_pod_fits_into_each_host_leastfreecapacity_tasprofilemixed():
    """tas_cache_test.go TestFindTopologyAssignments:
    "unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(unconstrained=True),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("x3",), 1)]),
            },
        ],
    )


def test_block_required_4_pods_fit_into_one_host_each_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required; 4 pods fit into one host each; BestFit"."""
    _check(
        BINARY_TREES_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK),
                "requests": {"cpu": 1000},
                "count": 4,
                "want": ([HOST], [(("x3",), 1), (("x5",), 1), (("x1",), 1), (("x6",), 1)]),
            },
        ],
    )


def test_host_required_single_pod_fits_in_the_host_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "host required; single Pod fits in the host; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("x3",), 1)]),
            },
        ],
    )


def test_host_required_single_pod_fits_in_the_host_bestfit_tasprofilemixed():
    """tas_cache_test.go TestFindTopologyAssignments:
    "host required; single Pod fits in the host; BestFit; TASProfileMixed"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("x3",), 1)]),
            },
        ],
    )


def test_host_preferred_single_pod_fits_in_the_host_bestfit_tasprofilemixed():
    """tas_cache_test.go TestFindTopologyAssignments:
    "host preferred; single Pod fits in the host; BestFit; TASProfileMixed"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("x3",), 1)]),
            },
        ],
    )


def test_rack_required_single_pod_fits_in_a_rack_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "rack required; single Pod fits in a rack; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(required=RACK),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b1",
                                "r1",
                            ),
                            1,
                        )
                    ],
                ),
            },
        ],
    )


def test_rack_required_multiple_pods_fit_in_a_rack_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "rack required; multiple Pods fit in a rack; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(required=RACK),
                "requests": {"cpu": 1000},
                "count": 3,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b1",
                                "r2",
                            ),
                            3,
                        )
                    ],
                ),
            },
        ],
    )


def test_block_preferred_pods_fit_in_2_blocks_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block preferred; Pods fit in 2 blocks; BestFit"."""
    _check(
        [
            make_topology_node("b1").label(BLOCK, "b1").allocatable({"cpu": "2", "pods": "20"}).ready(),
            make_topology_node("b2").label(BLOCK, "b2").allocatable({"cpu": "1", "pods": "10"}).ready(),
            make_topology_node("b3").label(BLOCK, "b3").allocatable({"cpu": "4", "pods": "40"}).ready(),
        ],
        [BLOCK],
        [
            {
                "topology": TopologyRequest(preferred=BLOCK),
                "requests": {"cpu": 1000},
                "count": 5,
                "want": ([BLOCK], [(("b2",), 1), (("b3",), 4)]),
            },
        ],
    )


def test_rack_required_multiple_pods_fit_in_some_racks_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "rack required; multiple Pods fit in some racks; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(required=RACK),
                "requests": {"cpu": 1000},
                "count": 2,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b2",
                                "r2",
                            ),
                            2,
                        )
                    ],
                ),
            },
        ],
    )


def test_rack_required_too_many_pods_to_fit_in_any_rack_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "rack required; too many pods to fit in any rack; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(required=RACK),
                "requests": {"cpu": 1000},
                "count": 4,
                "reason": 'topology "default" allows to fit only 3 out of 4 pod(s)',
            },
        ],
    )


def test_block_required_single_pod_fits_in_a_block_and_a_single_rack_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required; single Pod fits in a block and a single rack; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(required=BLOCK),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b2",
                                "r1",
                            ),
                            1,
                        )
                    ],
                ),
            },
        ],
    )


def test_block_required_single_pod_fits_in_a_block_spread_across_two_racks_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required; single Pod fits in a block spread across two racks; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(required=BLOCK),
                "requests": {"cpu": 1000},
                "count": 4,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b1",
                                "r1",
                            ),
                            1,
                        ),
                        (
                            (
                                "b1",
                                "r2",
                            ),
                            3,
                        ),
                    ],
                ),
            },
        ],
    )


def test_block_required_pods_fit_in_a_block_spread_across_two_racks_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required; Pods fit in a block spread across two racks; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(required=BLOCK),
                "requests": {"cpu": 1000},
                "count": 4,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b1",
                                "r1",
                            ),
                            1,
                        ),
                        (
                            (
                                "b1",
                                "r2",
                            ),
                            3,
                        ),
                    ],
                ),
            },
        ],
    )


def test_block_required_single_pod_which_cannot_be_split_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required; single Pod which cannot be split; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(required=BLOCK),
                "requests": {"cpu": 4000},
                "count": 1,
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: resource "cpu": 4',  # noqa: E501
            },
        ],
    )


def test_block_required_too_many_pods_to_fit_requested_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required; too many Pods to fit requested; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(required=BLOCK),
                "requests": {"cpu": 1000},
                "count": 5,
                "reason": 'topology "default" allows to fit only 4 out of 5 pod(s)',
            },
        ],
    )


def test_rack_required_single_pod_requiring_memory_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "rack required; single Pod requiring memory; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(required=RACK),
                "requests": {"memory": 1024},
                "count": 4,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b1",
                                "r1",
                            ),
                            4,
                        )
                    ],
                ),
            },
        ],
    )


def test_rack_preferred_but_only_block_can_accommodate_the_workload_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "rack preferred; but only block can accommodate the workload; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(preferred=RACK),
                "requests": {"cpu": 1000},
                "count": 4,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b1",
                                "r1",
                            ),
                            1,
                        ),
                        (
                            (
                                "b1",
                                "r2",
                            ),
                            3,
                        ),
                    ],
                ),
            },
        ],
    )


def test_rack_preferred_but_only_multiple_blocks_can_accommodate_the_workload_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "rack preferred; but only multiple blocks can accommodate the workload; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(preferred=RACK),
                "requests": {"cpu": 1000},
                "count": 6,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b1",
                                "r1",
                            ),
                            1,
                        ),
                        (
                            (
                                "b1",
                                "r2",
                            ),
                            3,
                        ),
                        (
                            (
                                "b2",
                                "r2",
                            ),
                            2,
                        ),
                    ],
                ),
            },
        ],
    )


def test_block_preferred_but_only_multiple_blocks_can_accommodate_the_workload_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block preferred; but only multiple blocks can accommodate the workload; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(preferred=BLOCK),
                "requests": {"cpu": 1000},
                "count": 6,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b1",
                                "r1",
                            ),
                            1,
                        ),
                        (
                            (
                                "b1",
                                "r2",
                            ),
                            3,
                        ),
                        (
                            (
                                "b2",
                                "r2",
                            ),
                            2,
                        ),
                    ],
                ),
            },
        ],
    )


def test_block_preferred_but_the_workload_cannot_be_accommodate_in_entire_topology_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block preferred; but the workload cannot be accommodate in entire topology; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK],
        [
            {
                "topology": TopologyRequest(preferred=BLOCK),
                "requests": {"cpu": 1000},
                "count": 10,
                "reason": 'topology "default" allows to fit only 7 out of 10 pod(s)',
            },
        ],
    )


def test_only_nodes_with_matching_labels_are_considered_no_matching_node_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "only nodes with matching labels are considered; no matching node; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label("zone", "zone-a")
            .label(HOST, "x3")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"}),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "reason": "no topology domains at level: kubernetes.io/hostname",
            },
        ],
        node_labels={"zone": "zone-b"},
    )


def test_only_nodes_with_matching_labels_are_considered_matching_node_is_found_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "only nodes with matching labels are considered; matching node is found; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label("zone", "zone-a")
            .label(HOST, "x3")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
            .ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("x3",), 1)]),
            },
        ],
        node_labels={"zone": "zone-a"},
    )


def test_only_nodes_with_matching_levels_are_considered_no_host_label_on_node_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "only nodes with matching levels are considered; no host label on node; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=RACK),
                "requests": {"cpu": 1000},
                "count": 1,
                "reason": "no topology domains at level: cloud.com/topology-rack",
            },
        ],
    )


def test_don_t_consider_unscheduled_pods_when_computing_capacity_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "don't consider unscheduled Pods when computing capacity; BestFit"."""
    _check(
        [
            make_topology_node("x3").label(HOST, "x3").allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"}).ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 600},
                "count": 1,
                "want": ([HOST], [(("x3",), 1)]),
            },
        ],
        pods=[make_bound_pod("test-unscheduled").request("cpu", "600m")],
    )


def test_don_t_consider_terminal_pods_when_computing_the_capacity_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "don't consider terminal pods when computing the capacity; BestFit"."""
    _check(
        [
            make_topology_node("x3").label(HOST, "x3").allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"}).ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 600},
                "count": 1,
                "want": ([HOST], [(("x3",), 1)]),
            },
        ],
        pods=[
            make_bound_pod("test-failed").node_name("x3").request("cpu", "600m").phase("Failed"),
            make_bound_pod("test-succeeded").node_name("x3").request("cpu", "600m").phase("Succeeded"),
        ],
    )


def test_include_usage_from_pending_scheduled_non_tas_pods_blocked_assignment_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "include usage from pending scheduled non-TAS pods, blocked assignment; BestFit"."""
    _check(
        [
            make_topology_node("x3").label(HOST, "x3").allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"}).ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 600},
                "count": 1,
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1',  # noqa: E501
            },
        ],
        pods=[make_bound_pod("test-pending").node_name("x3").request("cpu", "600m").phase("Pending")],
    )


def test_include_usage_from_running_non_tas_pods_blocked_assignment_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "include usage from running non-TAS pods, blocked assignment; BestFit"."""
    _check(
        [
            make_topology_node("x3").label(HOST, "x3").allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"}).ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 600},
                "count": 1,
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1',  # noqa: E501
            },
        ],
        pods=[make_bound_pod("test-running").node_name("x3").request("cpu", "600m").phase("Running")],
    )


def test_node_allocatable_capacity_completely_used_by_non_tas_pod_empty_remainingcapacity():
    """tas_cache_test.go TestFindTopologyAssignments:
    "node allocatable capacity completely used by non-TAS pod; empty remainingCapacity"."""
    _check(
        [
            make_topology_node("x3").label(HOST, "x3").allocatable({"cpu": "1", "pods": "1"}).ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 100},
                "count": 1,
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1',  # noqa: E501
            },
        ],
        pods=[make_bound_pod("running1").node_name("x3").request("cpu", "1").phase("Running")],
    )


def test_include_usage_from_non_tas_pods_pod_usage():
    """tas_cache_test.go TestFindTopologyAssignments:
    "include usage from non-TAS pods; pod usage"."""
    _check(
        [
            make_topology_node("x3").label(HOST, "x3").allocatable({"pods": "10"}).ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 0},
                "count": 9,
                "reason": 'topology "default" allows to fit only 8 out of 9 pod(s)',
            },
        ],
        pods=[
            make_bound_pod("running1").node_name("x3").phase("Running"),
            make_bound_pod("running2").node_name("x3").phase("Running"),
        ],
    )


def test_include_usage_from_running_non_tas_pods_found_free_capacity_on_another_node_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "include usage from running non-TAS pods, found free capacity on another node; BestFit"."""
    _check(
        [
            make_topology_node("x3").label(HOST, "x3").allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"}).ready(),
            make_topology_node("x5").label(HOST, "x5").allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"}).ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 600},
                "count": 1,
                "want": ([HOST], [(("x5",), 1)]),
            },
        ],
        pods=[make_bound_pod("test-pod").node_name("x3").request("cpu", "600m")],
    )


def test_no_assignment_as_node_is_not_ready_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "no assignment as node is not ready; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label("zone", "zone-a")
            .label(HOST, "x3")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
            .not_ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "reason": "no topology domains at level: kubernetes.io/hostname",
            },
        ],
        node_labels={"zone": "zone-a"},
    )


def test_no_assignment_as_node_is_unschedulable_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "no assignment as node is unschedulable; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label("zone", "zone-a")
            .label(HOST, "x3")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
            .ready()
            .unschedulable(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "reason": "no topology domains at level: kubernetes.io/hostname",
            },
        ],
        node_labels={"zone": "zone-a"},
    )


def test_skip_node_which_has_untolerated_taint_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "skip node which has untolerated taint; BestFit"."""
    _check(
        [
            make_topology_node("x3")
            .label("zone", "zone-a")
            .label(HOST, "x3")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
            .taint("example.com/gpu", "present", "NoSchedule")
            .ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: taint "example.com/gpu=present:NoSchedule": 1',  # noqa: E501
            },
        ],
        node_labels={"zone": "zone-a"},
    )


def test_detailed_failure_message_with_exclusion_stats():
    """tas_cache_test.go TestFindTopologyAssignments:
    "detailed failure message with exclusion stats"."""
    _check(
        [
            make_topology_node("x1")
            .label(HOST, "x1")
            .allocatable({"cpu": "1", "pods": "10"})
            .taint("key", "value", "NoSchedule")
            .ready(),
            make_topology_node("x2")
            .label(HOST, "x2")
            .label("zone", "zone-b")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("x3")
            .label(HOST, "x3")
            .label("zone", "zone-b")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("x4")
            .label(HOST, "x4")
            .label("zone", "zone-a")
            .allocatable({"cpu": "100m", "pods": "10"})
            .ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "node_selector": {"zone": "zone-a"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: nodeSelector: 2, resource "cpu": 1, taint "key=value:NoSchedule": 1',  # noqa: E501
            },
        ],
    )


def test_resource_exclusion_picks_most_restrictive_resource():
    """tas_cache_test.go TestFindTopologyAssignments:
    "resource exclusion picks most restrictive resource"."""
    _check(
        [
            make_topology_node("dual-shortage")
            .label(HOST, "dual-shortage")
            .allocatable({"cpu": "500m", "pods": "10", "example.com/gpu": "0"})
            .ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "count": 1,
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1',  # noqa: E501
            },
        ],
    )


def test_allow_to_schedule_on_node_with_tolerated_taint_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "allow to schedule on node with tolerated taint; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label("zone", "zone-a")
            .label(HOST, "x3")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
            .taint("example.com/gpu", "present", "NoSchedule")
            .ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "tolerations": [{"key": "example.com/gpu", "value": "present", "operator": "Equal"}],
                "want": ([HOST], [(("x3",), 1)]),
            },
        ],
        node_labels={"zone": "zone-a"},
    )


def test_no_assignment_as_node_does_not_have_enough_allocatable_pods_status_allocatable_pods_bestfi():
    """tas_cache_test.go TestFindTopologyAssignments:
    "no assignment as node does not have enough allocatable pods (.status.allocatable['pods']); BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label("zone", "zone-a")
            .label(HOST, "x3")
            .allocatable({"cpu": "1000m", "pods": "1"})
            .ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 300},
                "count": 1,
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "pods": 1',  # noqa: E501
            },
        ],
        pods=[make_bound_pod("test-running").node_name("b1-r1-x3").request("cpu", "300m").phase("Running")],
        node_labels={"zone": "zone-a"},
    )


def test_multiple_podsets_account_assumed_pod_usage_against_allocatable_pods_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "multiple PodSets account assumed pod usage against allocatable pods; BestFit"."""
    _check(
        [
            make_topology_node("x1").label(HOST, "x1").allocatable({"cpu": "2", "pods": "1"}).ready(),
        ],
        [HOST],
        [
            {
                "name": "one",
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("x1",), 1)]),
            },
            {
                "name": "two",
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "pods": 1',  # noqa: E501
            },
        ],
    )


def test_skip_node_which_doesn_t_match_node_selector_missing_label_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "skip node which doesn't match node selector, missing label; BestFit"."""
    _check(
        [
            make_topology_node("x3")
            .label("zone", "zone-a")
            .label(HOST, "x3")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
            .ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 300},
                "count": 1,
                "node_selector": {"custom-label-1": "custom-value-1"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: nodeSelector: 1',  # noqa: E501
            },
        ],
        node_labels={"zone": "zone-a"},
    )


def test_skip_node_which_doesn_t_match_node_selector_label_exists_value_doesn_t_match_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "skip node which doesn't match node selector, label exists, value doesn't match; BestFit"."""
    _check(
        [
            make_topology_node("x3")
            .label("zone", "zone-a")
            .label(HOST, "x3")
            .label("custom-label-1", "value-1")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
            .ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 300},
                "count": 1,
                "node_selector": {"custom-label-1": "value-2"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: nodeSelector: 1',  # noqa: E501
            },
        ],
        node_labels={"zone": "zone-a"},
    )


def test_allow_to_schedule_on_node_which_matches_node_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "allow to schedule on node which matches node; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label("zone", "zone-a")
            .label(HOST, "x3")
            .label("custom-label-1", "value-1")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label("zone", "zone-a")
            .label(HOST, "x5")
            .label("custom-label-1", "value-2")
            .allocatable({"cpu": "1", "memory": "1Gi", "pods": "10"})
            .ready(),
        ],
        [HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "node_selector": {"custom-label-1": "value-2"},
                "want": ([HOST], [(("x5",), 1)]),
            },
        ],
        node_labels={"zone": "zone-a"},
    )


def test_block_required_for_podset_host_required_for_slices_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required for podset; host required for slices; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x5")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required=HOST, slice_size=2),
                "requests": {"cpu": 1000},
                "count": 6,
                "want": ([HOST], [(("x1",), 2), (("x3",), 2), (("x5",), 2)]),
            },
        ],
    )


def test_block_required_for_podset_host_required_for_slices_prioritize_more_free_slice_capacity_fir():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required for podset; host required for slices; prioritize more free slice capacity first and then tight fit; BestFit"."""  # noqa: E501
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "6", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x5")
            .allocatable({"cpu": "5", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "4", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x6")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x6")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required=HOST, slice_size=2),
                "requests": {"cpu": 1000},
                "count": 12,
                "want": ([HOST], [(("x1",), 4), (("x3",), 6), (("x6",), 2)]),
            },
        ],
    )


def test_block_required_for_podset_host_required_for_slices_select_domains_with_tight_fit_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required for podset; host required for slices; select domains with tight fit; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x5")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required=HOST, slice_size=2),
                "requests": {"cpu": 1000},
                "count": 4,
                "want": ([HOST], [(("x1",), 2), (("x5",), 2)]),
            },
        ],
    )


def test_block_required_for_podset_rack_required_for_slices_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required for podset; rack required for slices; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x5")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r2-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x1")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r2-x6")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x6")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r2-x2")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x2")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b2-r1-x4")
            .label(BLOCK, "b2")
            .label(RACK, "r1")
            .label(HOST, "x4")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b2-r1-x7")
            .label(BLOCK, "b2")
            .label(RACK, "r1")
            .label(HOST, "x7")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=2),
                "requests": {"cpu": 1000},
                "count": 4,
                "want": ([HOST], [(("x3",), 1), (("x5",), 1), (("x1",), 1), (("x2",), 1)]),
            },
        ],
    )


def test_block_preferred_for_podset_rack_required_for_slices_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block preferred for podset; rack required for slices; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(preferred=BLOCK, slice_required=RACK, slice_size=2),
                "requests": {"cpu": 1000},
                "count": 4,
                "want": ([HOST], [(("x1",), 1), (("x5",), 1), (("x4",), 2)]),
            },
        ],
    )


def test_block_required_for_podset_host_required_for_slices_optimize_last_domain_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required for podset; host required for slices; optimize last domain; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "4", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x5")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required=HOST, slice_size=2),
                "requests": {"cpu": 1000},
                "count": 6,
                "want": ([HOST], [(("x1",), 2), (("x3",), 4)]),
            },
        ],
    )


def test_block_preferred_for_podset_host_required_for_slices_2_blocks_with_unbalanced_subdomains_be():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block preferred for podset; host required for slices; 2 blocks with unbalanced subdomains; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x5")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b2-r1-x6")
            .label(BLOCK, "b2")
            .label(RACK, "r1")
            .label(HOST, "x6")
            .allocatable({"cpu": "6", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(preferred=BLOCK, slice_required=HOST, slice_size=3),
                "requests": {"cpu": 1000},
                "count": 12,
                "want": ([HOST], [(("x1",), 3), (("x3",), 3), (("x6",), 6)]),
            },
        ],
    )


def test_block_required_for_podset_rack_required_for_slices_podset_fits_in_a_block_but_slices_do_no():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required for podset; rack required for slices; podset fits in a block, but slices do not fit in racks"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b1-r2-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x5")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b1-r3-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r3")
            .label(HOST, "x1")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=3),
                "requests": {"cpu": 1000},
                "count": 6,
                "reason": 'topology "default" doesn\'t allow to fit any of 2 slice(s)',
            },
        ],
    )


def test_block_required_for_podset_rack_required_for_slices_only_1_out_of_2_slices_fit_the_topology():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required for podset; rack required for slices; only 1 out of 2 slices fit the topology"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b1-r2-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x5")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r3-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r3")
            .label(HOST, "x1")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r4-x6")
            .label(BLOCK, "b1")
            .label(RACK, "r4")
            .label(HOST, "x6")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=3),
                "requests": {"cpu": 1000},
                "count": 6,
                "reason": 'topology "default" allows to fit only 1 out of 2 slice(s)',
            },
        ],
    )


def test_block_required_for_podset_rack_required_for_slices_podset_fits_in_both_blocks_but_slices_f():
    """tas_cache_test.go TestFindTopologyAssignments:
    "block required for podset; rack required for slices; podset fits in both blocks, but slices fit in only one block"."""  # noqa: E501
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b1-r2-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x5")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b1-r3-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r3")
            .label(HOST, "x1")
            .allocatable({"cpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b2-r4-x6")
            .label(BLOCK, "b2")
            .label(RACK, "r4")
            .label(HOST, "x6")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b2-r5-x2")
            .label(BLOCK, "b2")
            .label(RACK, "r5")
            .label(HOST, "x2")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=3),
                "requests": {"cpu": 1000},
                "count": 6,
                "want": ([HOST], [(("x6",), 3), (("x2",), 3)]),
            },
        ],
    )


def test_slice_required_topology_level_cannot_be_above_the_main_required_topology_level():
    """tas_cache_test.go TestFindTopologyAssignments:
    "slice required topology level cannot be above the main required topology level"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=HOST, slice_required=BLOCK, slice_size=1),
                "requests": {"cpu": 1000},
                "count": 1,
                "reason": "podset slice topology cloud.com/topology-block is above the podset topology kubernetes.io/hostname",  # noqa: E501
            },
        ],
    )


def test_slice_size_is_required_when_slice_topology_is_requested():
    """tas_cache_test.go TestFindTopologyAssignments:
    "slice size is required when slice topology is requested"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "reason": "slice topology requested, but slice size not provided",
            },
        ],
    )


def test_cannot_request_not_existing_slice_topology():
    """tas_cache_test.go TestFindTopologyAssignments:
    "cannot request not existing slice topology"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required="not-existing-topology-level", slice_size=1),
                "requests": {"cpu": 1000},
                "count": 1,
                "reason": "no requested topology level for slices: not-existing-topology-level",
            },
        ],
    )


def test_no_topology_for_podset_host_required_for_slices_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "no topology for podset; host required for slices; BestFit"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x5")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(slice_required=HOST, slice_size=2),
                "requests": {"cpu": 1000},
                "count": 6,
                "want": ([HOST], [(("x1",), 2), (("x3",), 2), (("x5",), 2)]),
            },
        ],
    )


def test_no_topology_for_podset_host_required_for_slices_multiple_blocks_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "no topology for podset; host required for slices; multiple blocks; BestFit"."""
    _check(
        SCATTERED_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(slice_required=HOST, slice_size=2),
                "requests": {"cpu": 1000},
                "count": 6,
                "want": ([HOST], [(("x3",), 4), (("x6",), 2)]),
            },
        ],
    )


def test_no_topology_for_podset_rack_required_for_slices_multiple_blocks_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "no topology for podset; rack required for slices; multiple blocks; BestFit"."""
    _check(
        DEFAULT_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(slice_required=RACK, slice_size=2),
                "requests": {"cpu": 1000},
                "count": 4,
                "want": ([HOST], [(("x1",), 1), (("x5",), 1), (("x4",), 2)]),
            },
        ],
    )


def test_find_topology_assignment_for_two_podsets_with_overlapping_domain():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for two podsets with overlapping domain"."""
    _check(
        [
            make_topology_node("b1").label(BLOCK, "b1").allocatable({"cpu": "2", "pods": "10"}).ready(),
            make_topology_node("b2").label(BLOCK, "b2").allocatable({"cpu": "2", "pods": "10"}).ready(),
            make_topology_node("b3").label(BLOCK, "b3").allocatable({"cpu": "2", "pods": "10"}).ready(),
        ],
        [BLOCK],
        [
            {
                "name": "podset1",
                "topology": TopologyRequest(preferred=BLOCK),
                "requests": {"cpu": 1000},
                "count": 3,
                "want": ([BLOCK], [(("b1",), 2), (("b2",), 1)]),
            },
            {
                "name": "podset2",
                "topology": TopologyRequest(preferred=BLOCK),
                "requests": {"cpu": 1000},
                "count": 3,
                "want": ([BLOCK], [(("b2",), 1), (("b3",), 2)]),
            },
        ],
    )


def test_find_topology_assignment_for_two_podsets_with_the_same_group():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for two podsets with the same group"."""
    _check(
        [
            make_topology_node("b1")
            .label(BLOCK, "b1")
            .allocatable({"cpu": "2", "example.com/gpu": "2", "memory": "2Gi", "pods": "10"})
            .ready(),
            make_topology_node("b2")
            .label(BLOCK, "b2")
            .allocatable({"cpu": "5", "example.com/gpu": "4", "pods": "10"})
            .ready(),
            make_topology_node("b3")
            .label(BLOCK, "b3")
            .allocatable({"cpu": "2", "example.com/gpu": "2", "pods": "10"})
            .ready(),
        ],
        [BLOCK],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([BLOCK], [(("b2",), 1)]),
            },
            {
                "name": "workers",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "count": 4,
                "want": ([BLOCK], [(("b2",), 4)]),
            },
        ],
    )


def test_find_topology_assignment_for_two_podsets_with_the_same_group_with_domains_that_can_tightly():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for two podsets with the same group with domains that can tightly fit leader and workers"."""  # noqa: E501
    _check(
        [
            make_topology_node("b1")
            .label(BLOCK, "b1")
            .allocatable({"cpu": "2", "example.com/gpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b2")
            .label(BLOCK, "b2")
            .allocatable({"cpu": "8", "example.com/gpu": "8", "pods": "10"})
            .ready(),
            make_topology_node("b3")
            .label(BLOCK, "b3")
            .allocatable({"cpu": "2", "example.com/gpu": "2", "pods": "10"})
            .ready(),
        ],
        [BLOCK],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([BLOCK], [(("b2",), 1)]),
            },
            {
                "name": "workers",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000, "example.com/gpu": 2},
                "count": 4,
                "want": ([BLOCK], [(("b2",), 4)]),
            },
        ],
    )


def test_find_topology_assignment_for_grouped_podsets_skips_domain_where_only_workers_fit_without_l():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for grouped podsets skips domain where only workers fit without leader"."""
    _check(
        [
            make_topology_node("small-used")
            .label(BLOCK, "b1")
            .label(RACK, "small")
            .label(HOST, "small-used")
            .allocatable({"cpu": "2800m", "pods": "10"})
            .ready(),
            make_topology_node("small-free")
            .label(BLOCK, "b1")
            .label(RACK, "small")
            .label(HOST, "small-free")
            .allocatable({"cpu": "2800m", "pods": "10"})
            .ready(),
            make_topology_node("large-free")
            .label(BLOCK, "b1")
            .label(RACK, "large")
            .label(HOST, "large-free")
            .allocatable({"cpu": "6", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(required=RACK, group_name="sameGroup"),
                "requests": {"cpu": 2500},
                "count": 1,
                "want": ([HOST], [(("large-free",), 1)]),
            },
            {
                "name": "workers",
                "topology": TopologyRequest(required=RACK, group_name="sameGroup"),
                "requests": {"cpu": 2500},
                "count": 1,
                "want": ([HOST], [(("large-free",), 1)]),
            },
        ],
        pods=[make_bound_pod("filler").node_name("small-used").request("cpu", "2500m").phase("Running")],
    )


def test_find_topology_assignment_for_grouped_podsets_skips_domain_where_mixed_size_workers_only_fi():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for grouped podsets skips domain where mixed-size workers only fit without leader"."""
    _check(
        [
            make_topology_node("small-used")
            .label(BLOCK, "b1")
            .label(RACK, "small")
            .label(HOST, "small-used")
            .allocatable({"cpu": "2800m", "pods": "10"})
            .ready(),
            make_topology_node("small-free")
            .label(BLOCK, "b1")
            .label(RACK, "small")
            .label(HOST, "small-free")
            .allocatable({"cpu": "2800m", "pods": "10"})
            .ready(),
            make_topology_node("large-free")
            .label(BLOCK, "b1")
            .label(RACK, "large")
            .label(HOST, "large-free")
            .allocatable({"cpu": "6", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(required=RACK, group_name="sameGroup"),
                "requests": {"cpu": 2500},
                "count": 1,
                "want": ([HOST], [(("large-free",), 1)]),
            },
            {
                "name": "workers",
                "topology": TopologyRequest(required=RACK, group_name="sameGroup"),
                "requests": {"cpu": 500},
                "count": 2,
                "want": ([HOST], [(("large-free",), 2)]),
            },
        ],
        pods=[make_bound_pod("filler").node_name("small-used").request("cpu", "2500m").phase("Running")],
    )


def test_find_topology_assignment_for_grouped_podsets_keeps_tight_domain_when_leader_and_workers_fi():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for grouped podsets keeps tight domain when leader and workers fit together"."""
    _check(
        [
            make_topology_node("small-used")
            .label(BLOCK, "b1")
            .label(RACK, "small")
            .label(HOST, "small-used")
            .allocatable({"cpu": "2800m", "pods": "10"})
            .ready(),
            make_topology_node("small-free")
            .label(BLOCK, "b1")
            .label(RACK, "small")
            .label(HOST, "small-free")
            .allocatable({"cpu": "2800m", "pods": "10"})
            .ready(),
            make_topology_node("large-free")
            .label(BLOCK, "b1")
            .label(RACK, "large")
            .label(HOST, "large-free")
            .allocatable({"cpu": "6", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(required=RACK, group_name="sameGroup"),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("small-free",), 1)]),
            },
            {
                "name": "workers",
                "topology": TopologyRequest(required=RACK, group_name="sameGroup"),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("small-free",), 1)]),
            },
        ],
        pods=[make_bound_pod("filler").node_name("small-used").request("cpu", "2500m").phase("Running")],
    )


def test_find_topology_assignment_for_two_podsets_with_the_same_group_no_fit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for two podsets with the same group - no fit"."""
    _check(
        [
            make_topology_node("b1")
            .label(BLOCK, "b1")
            .allocatable({"cpu": "1", "example.com/gpu": "0", "pods": "10"})
            .ready(),
            make_topology_node("b2")
            .label(BLOCK, "b2")
            .allocatable({"cpu": "4", "example.com/gpu": "4", "pods": "10"})
            .ready(),
        ],
        [BLOCK],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000},
                "count": 1,
                "reason": 'topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: resource "example.com/gpu": 1',  # noqa: E501
            },
            {
                "name": "workers",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "count": 4,
                "reason": 'topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: resource "example.com/gpu": 1',  # noqa: E501
            },
        ],
    )


def test_find_topology_assignment_for_two_podsets_with_the_same_group_optimizes_domain_for_both_lea():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for two podsets with the same group - optimizes domain for both leader and workers"."""
    _check(
        [
            make_topology_node("b1")
            .label(BLOCK, "b1")
            .allocatable({"cpu": "11", "example.com/gpu": "8", "pods": "10"})
            .ready(),
            make_topology_node("b2")
            .label(BLOCK, "b2")
            .allocatable({"cpu": "4", "example.com/gpu": "4", "pods": "10"})
            .ready(),
        ],
        [BLOCK],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([BLOCK], [(("b1",), 1)]),
            },
            {
                "name": "workers",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "count": 4,
                "want": ([BLOCK], [(("b1",), 4)]),
            },
        ],
    )


def test_bestfit_podset_group_workers_spread_across_hosts():
    """tas_cache_test.go TestFindTopologyAssignments:
    "BestFit: podset group workers spread across hosts"."""
    _check(
        [
            make_topology_node("b1-r1-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "20", "example.com/gpu": "4", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x2")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x2")
            .allocatable({"cpu": "20", "example.com/gpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "20", "example.com/gpu": "2", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x4")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x4")
            .allocatable({"cpu": "20", "example.com/gpu": "2", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(preferred=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("x1",), 1)]),
            },
            {
                "name": "workers",
                "topology": TopologyRequest(preferred=BLOCK, slice_size=2, slice_required=HOST, group_name="sameGroup"),
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "count": 6,
                "want": ([HOST], [(("x1",), 4), (("x2",), 2)]),
            },
        ],
    )


def test_find_topology_assignment_for_two_podsets_with_the_same_group_leader_does_not_fit_anywhere():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for two podsets with the same group - leader does not fit anywhere"."""
    _check(
        [
            make_topology_node("b1")
            .label(BLOCK, "b1")
            .allocatable({"cpu": "4", "example.com/gpu": "4", "pods": "10"})
            .ready(),
            make_topology_node("b2")
            .label(BLOCK, "b2")
            .allocatable({"cpu": "4", "example.com/gpu": "4", "pods": "10"})
            .ready(),
        ],
        [BLOCK],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 10000},
                "count": 1,
                "reason": 'topology "default" allows to fit only 4 out of 4 pod(s)',
            },
            {
                "name": "workers",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "count": 4,
                "reason": 'topology "default" allows to fit only 4 out of 4 pod(s)',
            },
        ],
    )


def test_find_topology_assignment_for_two_podsets_with_the_same_group_multiple_hosts():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for two podsets with the same group - multiple hosts"."""
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "2", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x5")
            .allocatable({"cpu": "2", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b1-r1-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "2", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b2-r4-x6")
            .label(BLOCK, "b2")
            .label(RACK, "r4")
            .label(HOST, "x6")
            .allocatable({"cpu": "1", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b2-r5-x2")
            .label(BLOCK, "b2")
            .label(RACK, "r5")
            .label(HOST, "x2")
            .allocatable({"cpu": "2", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b2-r6-x4")
            .label(BLOCK, "b2")
            .label(RACK, "r6")
            .label(HOST, "x4")
            .allocatable({"cpu": "2", "pods": "10", "example.com/gpu": "1"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 2000},
                "count": 1,
                "want": ([HOST], [(("x1",), 1)]),
            },
            {
                "name": "workers",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "count": 2,
                "want": ([HOST], [(("x3",), 1), (("x5",), 1)]),
            },
        ],
    )


def test_find_topology_assignment_for_two_podsets_with_the_same_group_requesting_same_resources_and():
    """tas_cache_test.go TestFindTopologyAssignments:
    "find topology assignment for two podsets with the same group requesting same resources and nodes in the same rack"."""  # noqa: E501
    _check(
        [
            make_topology_node("b1-r1-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x3")
            .allocatable({"cpu": "1", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b1-r1-x5")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x5")
            .allocatable({"cpu": "1", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b1-r2-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x1")
            .allocatable({"cpu": "1", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b1-r2-x6")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x6")
            .allocatable({"cpu": "1", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b2-r3-x2")
            .label(BLOCK, "b2")
            .label(RACK, "r3")
            .label(HOST, "x2")
            .allocatable({"cpu": "1", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b2-r3-x4")
            .label(BLOCK, "b2")
            .label(RACK, "r3")
            .label(HOST, "x4")
            .allocatable({"cpu": "1", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b2-r4-x7")
            .label(BLOCK, "b2")
            .label(RACK, "r4")
            .label(HOST, "x7")
            .allocatable({"cpu": "1", "pods": "10", "example.com/gpu": "1"})
            .ready(),
            make_topology_node("b2-r4-x8")
            .label(BLOCK, "b2")
            .label(RACK, "r4")
            .label(HOST, "x8")
            .allocatable({"cpu": "1", "pods": "10", "example.com/gpu": "1"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "count": 1,
                "want": ([HOST], [(("x3",), 1)]),
            },
            {
                "name": "workers",
                "topology": TopologyRequest(required=BLOCK, group_name="sameGroup"),
                "requests": {"cpu": 1000, "example.com/gpu": 1},
                "count": 2,
                "want": ([HOST], [(("x5",), 1), (("x1",), 1)]),
            },
        ],
    )


def test_multiple_podsets_rack_required_for_both_different_resource_requests_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "multiple podsets: rack required for both, different resource requests; BestFit"."""
    _check(
        MULTIPOD_NODES,
        [BLOCK, RACK],
        [
            {
                "name": "podset1",
                "topology": TopologyRequest(required=RACK),
                "requests": {"cpu": 1000},
                "count": 2,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b1",
                                "r1",
                            ),
                            2,
                        )
                    ],
                ),
            },
            {
                "name": "podset2",
                "topology": TopologyRequest(required=RACK),
                "requests": {"memory": 1024},
                "count": 1,
                "want": (
                    [BLOCK, RACK],
                    [
                        (
                            (
                                "b1",
                                "r1",
                            ),
                            1,
                        )
                    ],
                ),
            },
        ],
    )


def test_multiple_podsets_block_required_for_one_unconstrained_for_another_tasprofilemixed():
    """tas_cache_test.go TestFindTopologyAssignments:
    "multiple podsets: block required for one, unconstrained for another; TASProfileMixed"."""
    _check(
        MULTIPOD_NODES,
        [BLOCK, RACK, HOST],
        [
            {
                "name": "podset1",
                "topology": TopologyRequest(required=BLOCK),
                "requests": {"cpu": 1000},
                "count": 8,
                "want": ([HOST], [(("x2",), 8)]),
            },
            {
                "name": "podset2",
                "topology": TopologyRequest(unconstrained=True),
                "requests": {"cpu": 1000},
                "count": 2,
                "want": ([HOST], [(("x2",), 2)]),
            },
        ],
    )


def test_temporary_state_cleanup_prevents_leakage_across_podsets():
    """tas_cache_test.go TestFindTopologyAssignments:
    "temporary state cleanup prevents leakage across PodSets"."""
    _check(
        [
            make_topology_node("n1").label(HOST, "x1").allocatable({"cpu": "4", "memory": "4Gi", "pods": "10"}).ready(),
            make_topology_node("n2").label(HOST, "x2").allocatable({"cpu": "4", "memory": "4Gi", "pods": "10"}).ready(),
        ],
        [HOST],
        [
            {"name": "ps1", "requests": {"cpu": 1000, "memory": 1000}, "count": 1, "want": ([HOST], [(("x1",), 1)])},
            {
                "name": "ps2",
                "requests": {"cpu": 1000, "memory": 1000},
                "count": 1,
                "node_selector": {"never": "match"},
                "reason": 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 2; excluded: nodeSelector: 2',  # noqa: E501
            },
        ],
    )


def test_multi_layer_topology_no_feature_gate_additional_layers_ignored():
    """tas_cache_test.go TestFindTopologyAssignments:
    "multi-layer topology: no feature gate; additional layers ignored"."""
    _check(
        [
            make_topology_node("b1-r1-x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("b1-r1-x2")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x2")
            .allocatable({"cpu": "4", "pods": "10"})
            .ready(),
            make_topology_node("b1-r2-x3")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x3")
            .allocatable({"cpu": "3", "pods": "10"})
            .ready(),
            make_topology_node("b1-r2-x4")
            .label(BLOCK, "b1")
            .label(RACK, "r2")
            .label(HOST, "x4")
            .allocatable({"cpu": "4", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=4),
                "requests": {"cpu": 1000},
                "count": 8,
                "want": ([HOST], [(("x1",), 1), (("x2",), 3), (("x3",), 3), (("x4",), 1)]),
            },
        ],
    )


def test_optimize_the_last_domain_for_lws_using_bestfit():
    """tas_cache_test.go TestFindTopologyAssignments:
    "optimize the last domain for LWS using BestFit"."""
    _check(
        [
            make_topology_node("dom1-node")
            .label("cloud.com/topology-zone", "dom1")
            .label("cloud.com/topology-rack", "rack1")
            .label(HOST, "dom1-node")
            .allocatable({"cpu": "10", "memory": "10Gi", "pods": "10"})
            .ready(),
            make_topology_node("dom2-node")
            .label("cloud.com/topology-zone", "dom2")
            .label("cloud.com/topology-rack", "rack2")
            .label(HOST, "dom2-node")
            .allocatable({"cpu": "6", "memory": "10Gi", "pods": "10"})
            .ready(),
        ],
        ["cloud.com/topology-zone", "cloud.com/topology-rack", HOST],
        [
            {
                "name": "leader",
                "topology": TopologyRequest(
                    required="cloud.com/topology-zone",
                    slice_required="cloud.com/topology-rack",
                    slice_size=1,
                    group_name="lws",
                ),
                "requests": {"cpu": 1000, "memory": 1073741824},
                "count": 1,
                "want": ([HOST], [(("dom2-node",), 1)]),
            },
            {
                "name": "workers",
                "topology": TopologyRequest(
                    required="cloud.com/topology-zone",
                    slice_required="cloud.com/topology-rack",
                    slice_size=1,
                    group_name="lws",
                ),
                "requests": {"cpu": 1000, "memory": 1073741824},
                "count": 5,
                "want": ([HOST], [(("dom2-node",), 5)]),
            },
        ],
    )


def test_stable_tie_break_on_identical_nodes_tasbalancedplacement_disabled():
    """tas_cache_test.go TestFindTopologyAssignments:
    "stable tie break on identical nodes: TASBalancedPlacement disabled"."""
    _check(
        [
            make_topology_node("x2")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x2")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("x1",), 1)]),
            },
        ],
    )


def test_stable_tie_break_on_identical_nodes_reversed_order_tasbalancedplacement_disabled():
    """tas_cache_test.go TestFindTopologyAssignments:
    "stable tie break on identical nodes: reversed order, TASBalancedPlacement disabled"."""
    _check(
        [
            make_topology_node("x1")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x1")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
            make_topology_node("x2")
            .label(BLOCK, "b1")
            .label(RACK, "r1")
            .label(HOST, "x2")
            .allocatable({"cpu": "1", "pods": "10"})
            .ready(),
        ],
        [BLOCK, RACK, HOST],
        [
            {
                "topology": TopologyRequest(required=HOST),
                "requests": {"cpu": 1000},
                "count": 1,
                "want": ([HOST], [(("x1",), 1)]),
            },
        ],
    )
