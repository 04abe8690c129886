"""Alpha-beta cost of NCCL collectives over one interconnect tier.

time = alpha + algorithm_factor * size / busbw, with nccl-tests' bus-bandwidth convention
(NVIDIA/nccl-tests:doc/PERFORMANCE.md): a ring all_reduce moves 2(n-1)/n of the buffer over each link,
all_gather / reduce_scatter (n-1)/n of the full (gathered) buffer, send_recv the whole buffer once. `size` is the
collective's buffer in bytes (for all_gather the gathered output), as Vidur's profiles record it
(microsoft/vidur@e26eb8f:vidur/profiling/collectives/collectives_wrapper.py, `"size": self._size * 2  # bytes`).

An `Interconnect` is a parameter so issue 6 can add inter-node tiers (gVNIC, TCPX, TCPXO, RoCE) beside NVLink.
Where a measured profile exists (Vidur's 8xH100 DGX all_reduce / send_recv) alpha and busbw are fitted per group
size on the even rows of that profile (benchmarks/bench_calibration.py reports the error on all rows); elsewhere
busbw = 0.8 x the per-direction link rate ("ring collectives reach ~80% of unidirectional NVLink spec",
stas00/ml-engineering@744d01e:network/README.md, via ../shared/catalog/catalog_draft.yaml nccl_model).

vLLM's tensor-parallel all-reduce (`vllm_all_reduce_time`) uses its custom one-shot/two-shot kernel over NVLink P2P
for buffers up to 8 MiB (vllm/distributed/device_communicators/custom_all_reduce.py, `max_size=8192 * 1024`) and
NCCL above; where the tier has measured custom-kernel figures (`custom_ar`) the faster of the two is taken.
Not modelled: NVLS/SHARP all_reduce, tree algorithms, and multi-node hierarchies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Interconnect", "all_gather_time", "all_reduce_time", "for_gpu", "reduce_scatter_time", "send_recv_time",
           "vllm_all_reduce_time", "H100_NVLINK", "PCIE_GEN4"]

GB = 1e9


@dataclass(frozen=True)
class Interconnect:
    """One tier a collective runs over. busbw_gbps / latency_us apply to any group size unless `fitted` gives
    (latency_us, busbw_gbps) for that size; p2p_* describe a point-to-point send/recv pair."""

    name: str
    busbw_gbps: float  # asymptotic nccl-tests bus bandwidth per GPU, GB/s
    latency_us: float  # alpha: fixed cost of one collective call
    p2p_gbps: float
    p2p_latency_us: float
    source: str
    fitted: dict[int, tuple[float, float]] = field(default_factory=dict)  # n -> (latency_us, busbw_gbps)
    custom_ar: dict[int, tuple[float, float]] = field(default_factory=dict)  # n -> (latency_us, buffer GB/s)

    def alpha_beta(self, n: int) -> tuple[float, float]:
        """(alpha seconds, bytes/s of bus bandwidth) for a group of n GPUs."""
        lat, bw = self.fitted.get(n, (self.latency_us, self.busbw_gbps))
        return lat * 1e-6, bw * GB


# Fitted on the even rows of shared/profiles/vidur/network_h100_dgx/{all_reduce,send_recv}.csv (Vidur's 8xH100
# DGX, NCCL, fp16 buffers 2 KiB..64 MiB; microsoft/vidur@7d475133:data/profiling/network/h100_dgx) by least squares
# on relative error; per n = 2/4/8 because NCCL picks different ring/channel layouts per group size.
H100_NVLINK = Interconnect(
    name="nvlink4-h100",
    busbw_gbps=338.5, latency_us=28.5,  # n=8 values used for other sizes
    p2p_gbps=357.0, p2p_latency_us=7.5,  # send_recv devices_per_node=2 (intra-node)
    source="fitted to Vidur h100_dgx all_reduce.csv / send_recv.csv (even rows), MIT",
    fitted={2: (16.8, 283.5), 4: (30.4, 378.0), 8: (28.5, 338.5)},
    # The custom (one-shot/two-shot, NVLink P2P) all-reduce on H100 with registered buffers, as inside vLLM's CUDA
    # graphs: latency = alpha + buffer / rate, fitted (least squares on relative error) to the six sizes of the
    # "custom allreduce" table in sgl-project/sglang#2904 (H100, TP 2/4/8; the same kernel family as vLLM's, whose
    # non-graph numbers in that table are 1.3-2x higher because of an extra input copy). Residuals <= 17 %. The
    # table's "data size" is a count of float32 elements (its test_trt_reduce.py performance() all-reduces
    # torch.randint(..., (sz,), dtype=torch.float32)), so 512..1048576 elements are 2 KiB..4 MiB: the rates below
    # are bytes/s (4x the rates fitted per element).
    custom_ar={2: (3.8, 252.0), 4: (4.05, 138.0), 8: (6.05, 134.0)},
)

# PCIe Gen4 x16: 32 GB/s per direction (PCI-SIG spec rate); 0.7 efficiency and 30 us alpha are twin assumptions
# (no NVLink on L4 / g2, https://www.nvidia.com/en-us/data-center/l4/ "PCIe Gen4 x16 64GB/s" bidirectional).
PCIE_GEN4 = Interconnect(
    name="pcie-gen4", busbw_gbps=22.4, latency_us=30.0, p2p_gbps=22.4, p2p_latency_us=15.0,
    source="PCIe Gen4 x16 32 GB/s/direction x 0.7 (twin assumption); L4 has no NVLink",
)

_NVLINK_EFFICIENCY = 0.8  # stas00/ml-engineering@744d01e:network/README.md rule of thumb (A100 234.9/300, B200 682/900)
_NVLINK_ALPHA_US = 25.0  # twin assumption: between Vidur's fitted H100 alphas (16.8-30.4 us)


def for_gpu(gpu_name: str, nvlink_gbps: float | None) -> Interconnect:
    """The intra-node tier for a GPU model: the Vidur-fitted NVLink4 tier for H100/H200 (same NVSwitch fabric),
    0.8 x per-direction NVLink for other NVLink GPUs, PCIe Gen4 when there is no NVLink."""
    if nvlink_gbps is None:
        return PCIE_GEN4
    if ("h100" in gpu_name or "h200" in gpu_name) and abs(nvlink_gbps - 450) < 1:
        return H100_NVLINK
    bw = _NVLINK_EFFICIENCY * nvlink_gbps
    return Interconnect(name=f"nvlink-{gpu_name}", busbw_gbps=bw, latency_us=_NVLINK_ALPHA_US, p2p_gbps=bw,
                        p2p_latency_us=10.0, source=f"0.8 x {nvlink_gbps:g} GB/s per-direction NVLink (catalog)")


def all_reduce_time(size_bytes: float, n: int, link: Interconnect) -> float:
    """Seconds for a ring all_reduce of a `size_bytes` buffer over n GPUs (0 for n == 1)."""
    if n <= 1:
        return 0.0
    alpha, bw = link.alpha_beta(n)
    return alpha + 2.0 * (n - 1) / n * size_bytes / bw


CUSTOM_AR_MAX_BYTES = 8 * 1024 * 1024  # vLLM CustomAllreduce max_size


def vllm_all_reduce_time(size_bytes: float, n: int, link: Interconnect) -> float:
    """Seconds for vLLM's tensor-parallel all-reduce of `size_bytes`: the custom kernel where the tier has figures
    for n GPUs and the buffer fits its 8 MiB, else (or when slower) NCCL's ring."""
    nccl = all_reduce_time(size_bytes, n, link)
    fit = link.custom_ar.get(n)
    if fit is None or size_bytes > CUSTOM_AR_MAX_BYTES:
        return nccl
    return min(nccl, fit[0] * 1e-6 + size_bytes / (fit[1] * GB))


def all_gather_time(size_bytes: float, n: int, link: Interconnect) -> float:
    """Seconds for an all_gather whose gathered output is `size_bytes`."""
    if n <= 1:
        return 0.0
    alpha, bw = link.alpha_beta(n)
    return alpha + (n - 1) / n * size_bytes / bw


def reduce_scatter_time(size_bytes: float, n: int, link: Interconnect) -> float:
    """Seconds for a reduce_scatter of a `size_bytes` input buffer."""
    return all_gather_time(size_bytes, n, link)


def send_recv_time(size_bytes: float, link: Interconnect) -> float:
    """Seconds for one point-to-point transfer (pipeline-parallel activations, KV transfer)."""
    return link.p2p_latency_us * 1e-6 + size_bytes / (link.p2p_gbps * GB)
