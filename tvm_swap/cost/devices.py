"""Device specs as data: compute peak, memory bandwidth, host link bandwidth per direction and both ways.

Link figures are *measured* transfer rates, not the bus's nominal ones: that is what the simulator needs.
`tensor_flops` is the dense bf16/fp16 tensor-core rate; the roofline (tvm_swap.cost.roofline) uses it for ops whose
tensors are bf16/fp16, and `peak_flops` (fp32) for the rest.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import TvmSwapError

HALF_DTYPES = ("bfloat16", "float16")


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    memory_bytes: int
    peak_flops: float          # fp32 FLOP/s
    mem_bandwidth: float       # device memory bytes/s
    h2d_bandwidth: float       # host->device bytes/s, alone on the link
    d2h_bandwidth: float       # device->host bytes/s, alone on the link
    duplex_bandwidth: float    # total bytes/s when both directions copy at once
    launch_overhead_s: float = 5e-6   # per kernel
    compute_efficiency: float = 0.6   # fraction of roofline real kernels reach
    description: str = ""
    tensor_flops: float = 0.0         # dense bf16/fp16 FLOP/s (tensor cores); 0: as peak_flops
    host: str = ""                    # the HOSTS entry of the CPU next to it (ops a plan places on the host)

    def flops_for(self, dtype: str) -> float:
        """Peak FLOP/s of an op computing in `dtype`."""
        if self.tensor_flops and dtype in HALF_DTYPES:
            return self.tensor_flops
        return self.peak_flops

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "DeviceSpec":
        return cls(**{k: v for k, v in d.items() if k in _DEVICE_FIELDS})   # plans older than a field

    def with_link(self, one_way: float, both_ways: float | None = None) -> "DeviceSpec":
        """A copy with another link speed (e.g. a throttled CPU emulation)."""
        both = 2 * one_way if both_ways is None else both_ways
        return DeviceSpec(**{**asdict(self), "h2d_bandwidth": one_way, "d2h_bandwidth": one_way,
                             "duplex_bandwidth": both})


_DEVICE_FIELDS = {f for f in DeviceSpec.__dataclass_fields__}


@dataclass(frozen=True)
class HostSpec:
    """The CPU and memory an op placed on the host runs on (a plan's host-compute stream).

    An op there takes max(flops / peak_flops, bytes / mem_bandwidth) + launch_overhead_s (tvm_swap.cost.host):
    the memory-bound elementwise kernels a plan may place there (an optimizer update) are bandwidth-bound."""
    name: str
    cores: int
    peak_flops: float          # fp32 FLOP/s of all cores, vector units included
    mem_bandwidth: float       # sustained host memory bytes/s (STREAM-like), not the nominal channel rate
    launch_overhead_s: float = 20e-6
    description: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "HostSpec":
        return cls(**d)


HOSTS: dict[str, HostSpec] = {
    # One socket of the CPU an H100/H200 server (NVIDIA DGX H100/H200: 2x Intel Xeon Platinum 8480C) pairs
    # with. Intel ARK, Xeon Platinum 8480+: 56 cores, 2.0 GHz base, two AVX-512 FMA units per core, so
    # 56 x 2.0e9 x 64 fp32 FLOP/cycle = 7.2 TFLOP/s; 8 channels of DDR5-4800 = 307 GB/s per socket nominal,
    # of which a STREAM triad reaches about 80%: 240 GB/s taken here. Not measured here.
    "xeon-8480": HostSpec(
        name="xeon-8480", cores=56, peak_flops=7.2e12, mem_bandwidth=240e9,
        description="one Intel Xeon Platinum 8480+ socket (56 cores, 8x DDR5-4800: 307 GB/s nominal, 240 GB/s "
                    "sustained assumed), the CPU of a DGX H100/H200; unmeasured here",
    ),
    # The emulated backend's host is the same CPU as its "device".
    "cpu-host": HostSpec(name="cpu-host", cores=1, peak_flops=2e9, mem_bandwidth=10e9, launch_overhead_s=2e-6,
                         description="the host of the emulated CPU backend (the same CPU)"),
}


def get_host(device: "str | DeviceSpec | dict") -> HostSpec:
    """The host spec next to `device` (a name, a DeviceSpec or its dict)."""
    name = device.get("host", "") if isinstance(device, dict) else get_device(device).host
    if name not in HOSTS:
        raise TvmSwapError(f"device {getattr(device, 'name', device)!r} names no host spec (host={name!r}); "
                           f"known hosts: {', '.join(sorted(HOSTS))}: pass a DeviceSpec with host= one of them")
    return HOSTS[name]


DEVICES: dict[str, DeviceSpec] = {
    # The paper's testbed: V100 16 GB on PCIe 3; PCIe measured 12 GB/s one way, 20 GB/s both ways.
    "v100-16gb": DeviceSpec(
        name="v100-16gb", memory_bytes=16 * 10**9, peak_flops=15.7e12, mem_bandwidth=900e9,
        h2d_bandwidth=12e9, d2h_bandwidth=12e9, duplex_bandwidth=20e9,
        description="NVIDIA V100 16GB, PCIe 3.0 x16 (SwapAdvisor's measured link)",
    ),
    # H100 and H200 SXM. Sources: NVIDIA H100 Tensor Core GPU datasheet and NVIDIA H200 Tensor Core GPU
    # datasheet (nvidia.com, 2024): 80 GB HBM3 at 3.35 TB/s / 141 GB HBM3e at 4.8 TB/s, FP32 67 TFLOPS,
    # BF16 tensor core 1,979 TFLOPS *with sparsity*, i.e. 989 TFLOPS dense, PCIe Gen5 "128 GB/s" (both
    # directions together, nominal). PCIe 5.0 x16 (PCI-SIG: 32 GT/s x 16 lanes, 128b/130b) is 63 GB/s per
    # direction nominal; pinned cudaMemcpyAsync reaches about 55 GB/s one way and about 100 GB/s with both
    # directions busy (NVIDIA nvbandwidth host_to_device / bidirectional figures on Hopper PCIe 5 hosts).
    # Not measured here: replace with scripts/gpu_check.sh figures when run on the machine.
    "h200": DeviceSpec(
        name="h200", memory_bytes=141 * 10**9, peak_flops=67e12, mem_bandwidth=4.8e12,
        h2d_bandwidth=55e9, d2h_bandwidth=55e9, duplex_bandwidth=100e9, tensor_flops=989e12, host="xeon-8480",
        description="NVIDIA H200 SXM 141GB HBM3e, bf16 989 TFLOPS dense, PCIe 5.0 x16 (55 GB/s one way, "
                    "100 GB/s duplex: typical pinned-copy rates, unmeasured here)",
    ),
    "h100": DeviceSpec(
        name="h100", memory_bytes=80 * 10**9, peak_flops=67e12, mem_bandwidth=3.35e12,
        h2d_bandwidth=55e9, d2h_bandwidth=55e9, duplex_bandwidth=100e9, tensor_flops=989e12, host="xeon-8480",
        description="NVIDIA H100 SXM 80GB HBM3, bf16 989 TFLOPS dense, PCIe 5.0 x16 (55 GB/s one way, "
                    "100 GB/s duplex: typical pinned-copy rates, unmeasured here)",
    ),
    # The CPU "device" of the emulated backend: copies are memcpy on worker threads, link throttled on demand.
    "cpu": DeviceSpec(
        name="cpu", memory_bytes=16 * 2**30, peak_flops=2e9, mem_bandwidth=10e9,
        h2d_bandwidth=5e9, d2h_bandwidth=5e9, duplex_bandwidth=10e9, launch_overhead_s=2e-6,
        compute_efficiency=1.0, host="cpu-host", description="host CPU as an emulated device (llvm target)",
    ),
}


def get_device(name: str | DeviceSpec) -> DeviceSpec:
    if isinstance(name, DeviceSpec):
        return name
    try:
        return DEVICES[name]
    except KeyError:
        raise TvmSwapError(f"unknown device {name!r}; known devices: {', '.join(sorted(DEVICES))}") from None
