import pytest

from kubetwin.catalog import (
    CatalogError,
    allocatable,
    capacity,
    gpu_type,
    hourly_price,
    machine_type,
    machine_types,
)

MIB = 1024**2
GIB = 1024**3

REQUIRED = (
    [f"g2-standard-{n}" for n in (4, 8, 12, 16, 24, 32, 48, 96)]
    + [f"a2-highgpu-{n}g" for n in (1, 2, 4, 8)]
    + ["a2-megagpu-16g"]
    + [f"a2-ultragpu-{n}g" for n in (1, 2, 4, 8)]
    + [f"a3-highgpu-{n}g" for n in (1, 2, 4, 8)]
    + ["a3-edgegpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g"]
    + [f"e2-standard-{n}" for n in (2, 4, 8, 16, 32)]
    + [f"n2-standard-{n}" for n in (2, 4, 8, 16, 32, 64)]
    + [f"n2d-standard-{n}" for n in (2, 4, 8, 16, 32)]
    + [f"c3-standard-{n}" for n in (4, 8, 22, 44, 88)]
)


def test_all_required_machine_types_present():
    names = {m.name for m in machine_types()}
    assert set(REQUIRED) <= names


def test_a3_highgpu_8g():
    mt = machine_type("a3-highgpu-8g")
    assert mt.family == "a3"
    assert mt.gpu == "nvidia-h100-80gb"
    assert mt.gpu_count == 8
    assert mt.vcpus == 208
    assert mt.memory_gib == 1872
    assert hourly_price(mt, spot=False) == pytest.approx(88.49)
    assert hourly_price(mt, spot=True) == pytest.approx(35.39575)


def test_other_gpu_shapes():
    assert machine_type("a3-megagpu-8g").gpu == "nvidia-h100-mega-80gb"
    assert machine_type("a3-ultragpu-8g").gpu == "nvidia-h200-141gb"
    a4 = machine_type("a4-highgpu-8g")
    assert (a4.gpu, a4.gpu_count, a4.vcpus) == ("nvidia-b200", 8, 224)
    assert machine_type("a2-megagpu-16g").gpu_count == 16
    assert machine_type("g2-standard-24").gpu_count == 2


def test_gpu_specs():
    h100 = gpu_type("nvidia-h100-80gb")
    assert h100.memory_gib == 80 and h100.bf16_tflops == 989
    assert gpu_type("nvidia-h200-141gb").memory_gib == 141
    assert gpu_type("nvidia-l4").memory_gib == 24
    for mt in machine_types():
        if mt.gpu is not None:
            assert gpu_type(mt.gpu).source


def test_cpu_shapes_4gb_per_vcpu():
    shapes = [mt for mt in machine_types() if mt.family in {"e2", "n2", "n2d", "c3"}]
    assert {mt.family for mt in shapes} == {"e2", "n2", "n2d", "c3"}
    for mt in shapes:
        assert mt.memory_gib == 4 * mt.vcpus
        assert mt.gpu is None and mt.gpu_count == 0


def test_verbatim_cpu_prices():
    assert hourly_price(machine_type("n2-standard-8"), spot=False) == pytest.approx(0.388472)
    assert hourly_price(machine_type("c3-standard-8"), spot=True) == pytest.approx(0.074176)
    assert hourly_price(machine_type("n2d-standard-2"), spot=False) == pytest.approx(0.084492)
    assert hourly_price(machine_type("e2-standard-2"), spot=False) == pytest.approx(0.067011, abs=1e-5)


def test_allocatable_cpu_4_vcpu():
    mt = machine_type("e2-standard-4")
    assert capacity(mt)["cpu"] == 4000
    assert allocatable(mt)["cpu"] == 4000 - (60 + 10 + 10)


def test_allocatable_cpu_large():
    mt = machine_type("a3-highgpu-8g")  # 208 vCPU: 80m + 0.25% * 204 cores = 80 + 510
    assert allocatable(mt)["cpu"] == 208_000 - 590


def test_allocatable_memory_16gib():
    mt = machine_type("e2-standard-4")  # 16 GiB
    reserved = round(0.25 * 4 * GIB + 0.20 * 4 * GIB + 0.10 * 8 * GIB + 100 * MIB)  # 2.6 GiB + 100 MiB
    assert capacity(mt)["memory"] == 16 * GIB
    assert allocatable(mt)["memory"] == 16 * GIB - reserved


def test_allocatable_memory_above_128gib():
    mt = machine_type("a2-highgpu-8g")  # 680 GiB
    reserved_gib = 1 + 0.8 + 0.8 + 0.06 * 112 + 0.02 * (680 - 128)
    expected = 680 * GIB - round(reserved_gib * GIB + 100 * MIB)
    assert allocatable(mt)["memory"] == expected


def test_pods():
    mt = machine_type("n2-standard-8")
    assert allocatable(mt)["pods"] == 110
    assert capacity(mt, max_pods=32)["pods"] == 32


def test_unknown_machine_names_close_matches():
    with pytest.raises(CatalogError) as ei:
        machine_type("a3-highgpu-9g")
    msg = str(ei.value)
    assert "a3-highgpu-9g" in msg and "a3-highgpu-8g" in msg
    assert isinstance(ei.value, ValueError)


def test_unknown_gpu():
    with pytest.raises(CatalogError, match="nvidia-h100-80gb"):
        gpu_type("nvidia-h100-80g")


def test_spot_cheaper_than_on_demand_everywhere():
    assert machine_types()
    for mt in machine_types():
        od, spot = hourly_price(mt, spot=False), hourly_price(mt, spot=True)
        assert od is not None and spot is not None and 0 < spot < od, mt.name


def test_h4d_machine_types():
    """H4D as GKE's own cluster autoscaler sizes and prices it (machinetypes table, us-central1 per-resource
    rates): 192 vCPUs (SMT off), 720 GB standard, 1,488 GB highmem, no GPU; on-demand = vCPUs x 0.03224 + GB x
    0.00231, Spot x 0.6 (the table's PreemptibleDiscount), -lssd at the table's own override."""
    shapes = {n: (machine_type(n).vcpus, machine_type(n).memory_gib, machine_type(n).gpu) for n in
              ("h4d-standard-192", "h4d-highmem-192", "h4d-highmem-192-lssd")}
    assert shapes == {"h4d-standard-192": (192, 720, None), "h4d-highmem-192": (192, 1488, None),
                      "h4d-highmem-192-lssd": (192, 1488, None)}
    for name, (vcpus, gb, _) in shapes.items():
        mt = machine_type(name)
        assert mt.family == "h4d" and "cluster-autoscaler" in mt.source and "machine_types_config" in mt.source
        if name.endswith("-lssd"):
            assert (hourly_price(mt, spot=False), hourly_price(mt, spot=True)) == (10.030586, 5.776885)
        else:
            assert hourly_price(mt, spot=False) == pytest.approx(vcpus * 0.03224 + gb * 0.00231, abs=1e-6)
            assert hourly_price(mt, spot=True) == pytest.approx(0.6 * (vcpus * 0.03224 + gb * 0.00231), abs=1e-6)
    assert "hpc-optimized-machines" in machine_type("h4d-standard-192").source  # the series' page
    # the bundled Local SSDs cost something: -lssd above the plain highmem shape, both ways
    lssd, plain = machine_type("h4d-highmem-192-lssd"), machine_type("h4d-highmem-192")
    for spot in (False, True):
        assert hourly_price(lssd, spot) > hourly_price(plain, spot)


def test_every_machine_has_source():
    assert machine_types()
    assert [mt.name for mt in machine_types() if not mt.source] == []
