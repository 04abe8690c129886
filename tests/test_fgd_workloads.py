"""The FGD paper's whole evaluation: several pod lists in one `kubetwin experiment fgd`, and the fast fragment
path (devices.gpushare.FragTable) giving the same numbers as before it."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.devices.gpushare import FragTable, GpuShareCluster, TypicalPods, frag_amount
from kubetwin.experiments import fgd, openb
from kubetwin.scheduler.gpu_policies import POLICIES

pytestmark = pytest.mark.slow  # whole runs or processes: make test-fast leaves them out

DATA = Path(__file__).parent / "data" / "openb"
ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> None:
    res = CliRunner().invoke(app, ["experiment", "fgd", *args])
    assert res.exit_code == 0, res.output


def _rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _pod_lists(folder: Path) -> Path:
    """Two workloads from the test slice: every pod, and every other pod."""
    lines = (DATA / "pods.csv").read_text().splitlines(keepends=True)
    folder.mkdir()
    (folder / "openb_pod_list_all.csv").write_text("".join(lines))
    (folder / "openb_pod_list_half.csv").write_text("".join(lines[:1] + lines[1::2]))
    return folder


def test_several_pod_lists_give_one_csv_with_a_workload_column(tmp_path: Path) -> None:
    pods = _pod_lists(tmp_path / "pods")
    common = ["--nodes", str(DATA / "nodes.csv"), "--policy", "FGD", "--policy", "Random", "--seed", "42",
              "--seed", "43"]
    _cli(*common, "--pods-dir", str(pods), "-o", str(tmp_path / "two.csv"), "-j", "2")
    _cli(*common, "--pods-dir", str(pods), "-o", str(tmp_path / "one-job.csv"), "-j", "1")
    assert (tmp_path / "two.csv").read_bytes() == (tmp_path / "one-job.csv").read_bytes()  # same bytes any --jobs
    rows = _rows(tmp_path / "two.csv")
    assert list(rows[0]) == ["workload", *fgd.COLUMNS]
    order = list(dict.fromkeys((r["workload"], r["policy"], r["seed"]) for r in rows))
    assert order == [(w, p, s) for w in ("all", "half") for p in ("FGD", "Random") for s in ("42", "43")]
    for w in ("all", "half"):  # each workload's rows are what a run on that pod list alone writes
        _cli(*common, "--pods", str(pods / f"openb_pod_list_{w}.csv"), "-o", str(tmp_path / f"{w}.csv"), "-j", "1")
        alone = _rows(tmp_path / f"{w}.csv")
        assert list(alone[0]) == list(fgd.COLUMNS)
        assert [{k: v for k, v in r.items() if k != "workload"} for r in rows if r["workload"] == w] == alone
    # the runs really read different pod lists
    curves = {w: [r["allocated_gpu_pct"] for r in rows if r["workload"] == w] for w in ("all", "half")}
    assert curves["all"] != curves["half"]


def test_workload_names_and_the_papers_seventeen(tmp_path: Path) -> None:
    pods = _pod_lists(tmp_path / "pods")
    _cli("--nodes", str(DATA / "nodes.csv"), "--pods-dir", str(pods), "--workload", "half", "--policy", "BestFit",
         "--pods", str(DATA / "pods.csv"), "-o", str(tmp_path / "w.csv"), "-j", "1")
    assert [r["workload"] for r in _rows(tmp_path / "w.csv")][::130] == ["pods", "half"]  # --pods first
    assert len(fgd.PAPER_WORKLOADS) == 17 and len(set(fgd.PAPER_WORKLOADS)) == 17
    assert fgd.workload_name("x/openb_pod_list_gpushare40.csv") == "gpushare40"
    res = CliRunner().invoke(app, ["experiment", "fgd", "--nodes", str(DATA / "nodes.csv"), "--pods-dir",
                                   str(pods), "--workload", "nosuch", "--policy", "FGD", "-o", str(tmp_path / "x.csv")])
    assert res.exit_code == 1 and "openb_pod_list_nosuch.csv: error" in res.output and "no such file" in res.output
    res = CliRunner().invoke(app, ["experiment", "fgd", "--nodes", str(DATA / "nodes.csv"), "--policy", "FGD",
                                   "-o", str(tmp_path / "x.csv")])
    assert res.exit_code == 1 and "no pod list given" in res.output
    assert not (tmp_path / "x.csv").exists()


def test_the_papers_pod_lists_are_in_shared(shared: Path, tmp_path: Path) -> None:
    traces = shared / "traces" / "openb"
    assert all((traces / f"openb_pod_list_{w}.csv").is_file() for w in fgd.PAPER_WORKLOADS)
    # a slice: the test nodes, every 30th pod of one list per family, one policy, one seed
    sliced = tmp_path / "pods"
    sliced.mkdir()
    picks = [ws[-1] for ws in fgd.FAMILIES.values()]
    for w in picks:
        lines = (traces / f"openb_pod_list_{w}.csv").read_text().splitlines(keepends=True)
        (sliced / f"openb_pod_list_{w}.csv").write_text("".join(lines[:1] + lines[1::30]))
    args = ["--nodes", str(DATA / "nodes.csv"), "--pods-dir", str(sliced), "--policy", "FGD", "-o"]
    _cli(*args, str(tmp_path / "a.csv"), *(x for w in picks for x in ("--workload", w)), "-j", "2")
    rows = _rows(tmp_path / "a.csv")
    assert list(dict.fromkeys(r["workload"] for r in rows)) == picks
    for w in picks:
        mine = [r for r in rows if r["workload"] == w]
        assert [int(r["arrived_gpu_pct"]) for r in mine] == list(range(1, 131))


def test_a_pod_list_without_gpu_demand_is_not_inflated(tmp_path: Path) -> None:
    cpu_only = tmp_path / "openb_pod_list_cpuonly.csv"
    cpu_only.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,0,0\np1,2000,10,0,0\n")
    pods = openb.load_pods(cpu_only)
    assert len(fgd.workload(pods, 8000, 1.3, np.random.default_rng(1))) == 2  # re-sampling would never end


def test_optimized_runs_give_the_rows_of_the_code_before_them(tmp_path: Path) -> None:
    """fgd-pinned.csv: every 10th arrived % of 6 policies x seeds 42..44 on the test slice, written by the code
    before FragTable (commit e4d3df7)."""
    out = tmp_path / "now.csv"
    _cli("--nodes", str(DATA / "nodes.csv"), "--pods", str(DATA / "pods.csv"), "--policy", "all", "--seed", "42",
         "--seed", "43", "--seed", "44", "-o", str(out), "-j", "1")
    pinned = _rows(DATA / "fgd-pinned.csv")
    assert [r for r in _rows(out) if int(r["arrived_gpu_pct"]) % 10 == 0] == pinned


def test_optimized_runs_give_the_published_rows(shared: Path) -> None:
    """docs/fgd-openb.csv was written before FragTable: FGD and BestFit, seed 42, on the whole default trace."""
    traces = shared / "traces" / "openb"
    nodes = openb.load_nodes(traces / "openb_node_list_gpu_node.csv")
    pods = openb.load_pods(traces / "openb_pod_list_default.csv")
    published = _rows(ROOT / "docs" / "fgd-openb.csv")
    for policy in ("FGD", "BestFit"):
        now = [{k: str(v) for k, v in r.items()} for r in fgd.experiment(nodes, pods, policy, 42)]
        assert now == [r for r in published if r["policy"] == policy and r["seed"] == "42"]


def test_frag_table_is_frag_amount_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    c = GpuShareCluster([f"n{i}" for i in range(40)], [96_000] * 40, [10**6] * 40,
                        rng.choice([1, 2, 4, 8], 40).tolist(), rng.choice(["T4", "V100M32", "A10"], 40).tolist())
    c.idle = np.where(c.exists, rng.choice([0, 100, 250, 500, 700, 1000], c.idle.shape), 0)
    shapes = [fgd.Shape(int(cpu), 0, int(k), int(m), frozenset(s)) for cpu, k, m, s in
              [(4000, 1, 500, ()), (8000, 1, 1000, ()), (16000, 2, 1000, ()), (0, 0, 0, ()), (6000, 1, 250, ()),
               (32000, 8, 1000, ()), (4000, 1, 700, ("T4",)), (12000, 4, 1000, ("V100M32", "A10"))]]
    typical = TypicalPods.from_shapes([s for i, s in enumerate(shapes) for _ in range(i + 1)], c.model_ids)
    table = FragTable(typical)
    cpu_left = rng.integers(0, 40_000, 40)
    for lo, hi in [(0, 40), (3, 10), (5, 6), (7, 8), (5, 6), (0, 1), (11, 14)]:  # batches, and repeated single nodes
        want = frag_amount(cpu_left[lo:hi], c.idle[lo:hi], c.model[lo:hi], typical)
        got = table(cpu_left[lo:hi], c.idle[lo:hi], c.model[lo:hi])
        assert got.tobytes() == want.tobytes()
    # one node's memo key is its state: a CPU change that crosses no class's request reuses it, one that does not
    one = slice(5, 6)
    below = int(typical.cpu[typical.cpu > 0].min()) - 1
    for cpu in (0, below, below + 1, 40_000):
        left = np.array([cpu])
        assert table(left, c.idle[one], c.model[one]).tobytes() == \
            frag_amount(left, c.idle[one], c.model[one], typical).tobytes()
    # the key holds the GPUs' idle milli as a multiset: a node with the same GPUs in another order shares the entry
    # of one seen before, and still gets what frag_amount gives it alone
    for r in range(40):
        for idle in (c.idle[r:r + 1], c.idle[r:r + 1, ::-1].copy()):
            left, model = cpu_left[r:r + 1], c.model[r:r + 1]
            assert table(left, idle, model).tobytes() == frag_amount(left, idle, model, typical).tobytes()


def test_runs_sharing_a_pod_lists_fragment_table_give_the_rows_of_runs_alone() -> None:
    """`experiment fgd` runs every policy of a pod list and seed on one pod sequence, and a worker's runs on one
    pod list share its fragment table (and the memo in it) from seed to seed."""
    nodes, pods = openb.load_nodes(DATA / "nodes.csv"), openb.load_pods(DATA / "pods.csv")
    typical_of = [fgd.shape_of(p) for p in pods]
    table = fgd.fragment_table(nodes, typical_of)

    def alone(policy: str, seed: int) -> list[dict]:
        """One Replay with its own fragment table and its own draw of the pod sequence."""
        replay = fgd.Replay(nodes, typical_of, policy, seed)
        records = replay.run(fgd.arrivals(nodes, pods, seed, 1.3))
        gpus = replay.cluster.capacity_milli // fgd.FULL
        return [dict(zip(fgd.COLUMNS, (policy, seed, *row), strict=True)) for row in fgd.discretize(records, gpus)]

    for seed in (42, 43):
        assert fgd.experiments(nodes, pods, POLICIES, seed, 1.3, table) == [alone(p, seed) for p in POLICIES]
