"""GPU specs (`presets/gpus/*.yaml`, or a user's YAML): dense peak FLOP/s per dtype, memory
bandwidth and capacity, and two link tiers: the interconnect within a node (NVLink, Infinity Fabric, PCIe)
and the network between nodes. See docs/roofline.md.

Units: vendors quote TFLOP/s and GB/s in powers of ten and memory in "GB" that is binary-sized
(80 GB of HBM is 80 GiB), so capacity is read as GiB. Link bandwidths are both directions
together, as vendors quote them; one direction carries half. Latencies are in microseconds.
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import Field, model_validator

from llmcalc.errors import UserError
from llmcalc.model.base import Frozen, Name, PosInt


FIGURE_MAX = 1e6
FIGURE_MIN = 1e-6
Figure = Annotated[float, Field(ge=FIGURE_MIN, le=FIGURE_MAX)]
"""A datasheet figure (TFLOP/s, GB/s, GiB, µs, USD/h): finite (Frozen refuses NaN and inf), at least a millionth and
at most a million, so every product and quotient of figures and a workload's sizes stays a finite float."""


class PeakTflops(Frozen):
    """Dense peak per dtype in TFLOP/s (int8: TOPS); null when the GPU has no such unit."""

    fp32: Figure
    tf32: Figure | None = None
    bf16: Figure | None = None
    fp16: Figure
    fp8: Figure | None = None
    int8: Figure | None = None
    fp4: Figure | None = None
    """Blackwell's e2m1 (MXFP4 / NVFP4) tensor cores."""


@dataclass(frozen=True)
class Link:
    """The link tier a collective crosses: what one GPU sends per second in one direction, and the fixed time of
    a small collective over it."""

    bytes_per_s: float
    """Bytes/s in one direction: half the quoted bidirectional figure."""
    latency_s: float
    """Seconds a small collective takes end to end over this tier (its latency term); 0 where unknown."""


Architecture = Literal["ampere", "ada", "hopper", "blackwell", "cdna3"]
"""A GPU's architecture: which published kernel figures apply to it (presets/kernels/attention.yaml)."""


class GPU(Frozen):
    name: Name
    description: str
    architecture: Architecture | None = None
    """The GPU's architecture (ampere, ada, hopper, blackwell, cdna3): which published kernel figures apply to it
    (presets/kernels/attention.yaml); null: unknown, none apply."""
    device_names: tuple[str, ...] = ()
    """Words in the name the device reports (torch.cuda.get_device_name(): NVIDIA H100 80GB HBM3 → H100), by which a
    measurement on it finds this preset; the longest match over all presets wins (H100 PCIe over H100)."""
    source: str
    peak_tflops: PeakTflops
    memory_gib: Figure
    memory_bandwidth_gbs: Figure
    interconnect: str
    interconnect_gbs: Figure
    """GB/s (10^9) per GPU over `interconnect`, both directions together, as vendors quote it."""
    gpus_per_node: PosInt | None = None
    """GPUs that `interconnect` joins (8 on an HGX/DGX board, 72 in a GB200 NVL72 rack, 2 for a bridged pair of
    cards); null: unknown or the server's choice (PCIe cards), every collective crosses the interconnect (one
    tier)."""
    interconnect_latency_us: Figure | None = None
    """Microseconds a small (a few KB) collective over `interconnect` takes end to end, as NCCL measures it;
    null: unknown (0)."""
    network_gbs: Figure | None = None
    """GB/s (10^9) per GPU between nodes (InfiniBand/RoCE NICs, or PCIe between bridged pairs), both directions
    together like `interconnect_gbs`: one 400 Gb/s NIC per GPU is 50 GB/s each way, 100 GB/s here; null:
    unknown, a collective beyond `gpus_per_node` GPUs is costed on the interconnect."""
    network_latency_us: Figure | None = None
    """Microseconds a small collective takes end to end when it spans nodes; null: unknown (0)."""
    price_per_hour: Figure | None = None
    """USD per GPU per hour, on-demand cloud rental (the provider, its page and the date read are in the preset's
    comments); null: no public price is known."""
    notes: str = ""

    @model_validator(mode="after")
    def _tiers(self):
        if self.network_gbs is not None and self.gpus_per_node is None:
            raise ValueError("`network_gbs` needs `gpus_per_node` (the GPUs the interconnect joins): add it, "
                             "or remove network_gbs")
        if self.network_latency_us is not None and self.network_gbs is None:
            raise ValueError("`network_latency_us` needs `network_gbs`: add it, or remove network_latency_us")
        return self

    @property
    def memory_bytes(self) -> int:
        return int(Decimal(str(self.memory_gib)) * 2**30)

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth in bytes/s."""
        return self.memory_bandwidth_gbs * 1e9

    @property
    def link_one_way(self) -> float:
        """GPU-to-GPU bytes/s in one direction over the interconnect: half the quoted bidirectional figure."""
        return self.interconnect_gbs * 1e9 / 2

    def link(self, span: int) -> Link:
        """The tier a collective over `span` consecutive GPUs crosses: the interconnect while span ≤ gpus_per_node
        (or gpus_per_node is unknown), else the network. Without a `network_gbs` the interconnect is used for
        every span (the single-tier model: too fast beyond a node)."""
        if self.gpus_per_node is None or span <= self.gpus_per_node or self.network_gbs is None:
            return Link(self.link_one_way, (self.interconnect_latency_us or 0) * 1e-6)
        return Link(self.network_gbs * 1e9 / 2, (self.network_latency_us or 0) * 1e-6)

    def peak(self, dtype: str) -> float:
        """Dense FLOP/s for matmuls in `dtype`; a dtype the GPU lacks is a user error."""
        tflops = getattr(self.peak_tflops, dtype, None)
        if tflops is None:
            have = [k for k, v in self.peak_tflops.model_dump().items() if v]
            raise UserError(f"`compute_dtype`: {self.name} has no {dtype} peak; use one of {', '.join(have)}")
        return tflops * 1e12
