"""Time models: the constants that turn one GPU's FLOPs, bytes and collectives into seconds (docs/roofline.md).

Per op on one GPU, with compute c = FLOPs / (peak at the op's dtype · its efficiency) and memory
m = bytes / (bandwidth · memory_efficiency):

  op time    = max(c, m) + overlap · min(c, m) + kernels · kernel_s
  (a weight matmul's c counts M + matmul_pad_rows rows for its M tokens: small matmuls waste their tiles)
  comm time  = bytes / (one-way link · comm_efficiency) + collectives · collective_s
  beside     = max(w, x) + comm_overlap · min(w, x): communication x on its own stream beside compute w
  step time  = Σ ops + Σ comm + step_s
             = max(Σ ops + Σ comm, launches · launch_s) + step_s for a step launched without CUDA graphs
  a request  = request_s on the host before its first step (beside the GPU), then its steps

`overlap` 0 is a kernel that hides its memory traffic under its compute (or the reverse) perfectly, 1 one that
does not overlap them at all; real kernels near the ridge point sit between. The roofline model sets overlap
and every fixed cost to 0: it is the physical lower bound. Figures belong to a GPU and a dtype, never to a model.
"""

from pydantic import model_validator

from llmcalc.model.base import SHARE_MIN, Frozen, Name

SHARES = ("compute_efficiency", "fp8_efficiency", "block_fp8_efficiency", "attention_efficiency", "attention_backward",
          "memory_efficiency", "comm_efficiency")
"""The fields that are shares of a datasheet peak, in (0, 1]."""
BOUNDS: dict[str, tuple[float, float]] = {**{name: (0.0, 1.0) for name in SHARES}, "matmul_pad_rows": (0.0, 4096.0),
                                          "overlap": (0.0, 1.0), "comm_overlap": (0.0, 1.0),
                                          "kernel_s": (0.0, 1.0), "collective_s": (0.0, 1.0),
                                          "step_s": (0.0, 1.0), "request_s": (0.0, 1.0),
                                          "launch_s": (0.0, 1.0)}
"""Each figure's range (lo, hi): shares in (lo, hi], seconds in [lo, hi), the rest in [lo, hi]; a fit clips to it."""


def overlapped(c: float, m: float, overlap: float) -> float:
    """The overlap rule: work with compute c and memory m takes max(c, m) + overlap·min(c, m) seconds. Every time
    in llmcalc is this rule, written here once; overlap_split and compute_behind are its two other faces."""
    return max(c, m) + overlap * min(c, m)


def overlap_split(overlap: float) -> tuple[float, float]:
    """The overlap rule as the weights (of max(c, m), of c + m) it gives: max(c, m) + k·min(c, m) =
    (1 − k)·max(c, m) + k·(c + m). A sum of many entries' times (a decode's steps, a step's entries) sums its
    maxima and its plain terms apart, each in closed form."""
    return 1.0 - overlap, overlap


def compute_behind(t: float, m: float, overlap: float) -> float | None:
    """The overlap rule solved for compute: the c at which overlapped(c, m, overlap) is `t`; None where t does
    not depend on c (memory-bound with full overlap) or is below what memory alone takes."""
    if t - overlap * m >= m:  # compute-bound: c + overlap·m = t
        return t - overlap * m
    if overlap > 0 and t > m:  # memory-bound: m + overlap·c = t
        return (t - m) / overlap
    return None


SMOKE_GPU = "cpu"
"""The `gpu` of a CPU smoke run's profile (`llmcalc calibrate --device cpu`): its figures are no GPU's, so no GPU's
estimates load it."""


class TimeModel(Frozen):
    """A named set of time constants; `sources` says where each figure comes from."""

    name: str = "roofline"
    """roofline (the physical bound at stated efficiencies) or calibrated (a GPU's profile)."""
    gpu: str | None = None
    """The GPU preset the figures were measured or fitted on; None: any GPU."""
    engine: Name | None = None
    """The engine whose published runs on that GPU some figures were fitted to (a (GPU, engine) profile,
    presets/calibration/engines/<engine>/); None: the GPU's own profile, for any engine."""
    compute_efficiency: float = 0.8
    """Share of the dense 16/32-bit peak a large matmul reaches: 798 of 989 TFLOP/s (bf16, 8192³) on an H100."""
    fp8_efficiency: float | None = None
    """Share of the fp8 / int8 peak an fp8 or int8 matmul reaches; None: compute_efficiency."""
    block_fp8_efficiency: float | None = None
    """Share of the fp8 peak a matmul over fp8 weights with a scale per 128 × 128 block (DeepSeek-V3's format,
    activations scaled per 128 values) reaches in the serving engine's kernels, which apply the scales inside the
    reduction; None: fp8_efficiency. A named engine states it per GPU architecture (presets/engines/)."""
    attention_efficiency: float | None = None
    """Share of the peak at its dtype the attention core (flash attention) reaches; None: compute_efficiency."""
    attention_backward: float = 0.87
    """The attention kernel's backward throughput over its forward's, its FLOPs counted as the kernel runs them
    (flash: 2.5 × the forward's). 0.87: FlashAttention-2, cuDNN and FlashAttention-3 all reach 0.87 of their
    forward's TFLOP/s backward on an H100 (FlashAttention-3 paper, Figures 5 and 6; presets/kernels/attention.yaml).
    The roofline takes 1: no kernel's shortfall."""
    attention_kernel: str | None = None
    """The named attention kernel (presets/kernels/attention.yaml) whose figures attention_efficiency and
    attention_backward hold; None: the profile's own figures."""
    matmul_pad_rows: float = 0.0
    """Rows a weight matmul computes beyond its M tokens: tensor cores run whole tiles of 64–256 rows and a small
    M fills few of the GPU's SMs, so a matmul of M rows reaches M / (M + matmul_pad_rows) of its large-M
    efficiency. Its compute time is 2·(M + pad)·N·K / (peak · efficiency)."""
    memory_efficiency: float = 0.9
    """Share of the datasheet bandwidth a streaming kernel reaches: ~3.0 of 3.35 TB/s on an H100."""
    comm_efficiency: float = 0.8
    """Share of the one-way link bandwidth a collective reaches (NCCL bus bandwidth)."""
    overlap: float = 0.0
    """How much of the smaller of an op's compute and memory time is not hidden under the larger, in [0, 1]."""
    comm_overlap: float = 0.12
    """How much of the shorter of a computation and a communication running beside it on its own CUDA stream is
    not hidden, in [0, 1] (training's gradient reduction, context-parallel ring, interleaved pipeline sends): the
    share of the GPU's SMs the communication holds while both run, since NCCL's thread blocks take whole SMs and
    the compute runs on the rest. 0.12: NCCL's 16 SMs on an 8-NIC DGX (NVIDIA/nccl issue 689, its maintainer) of
    an H100's 132. The roofline takes 0: the communication wholly hidden."""
    hide_layer_comm: bool = False
    """Whether training's tensor- and expert-parallel communication runs beside its layers' compute (beside, at
    comm_overlap), as Megatron's tp_comm_overlap and its MoE all-to-all overlap run it: both are options, off by
    default, so False charges that communication in full. The roofline takes True: the least time any schedule
    reaches."""
    balanced_experts: bool = False
    """Whether every expert-parallel rank gets the mean's routed tokens whatever the traffic's skew (the workload's
    expert_skew): False times the busiest rank, which each MoE layer waits for. The roofline takes True: the least
    any placement of the experts reaches."""
    kernel_s: float = 0.0
    """Seconds each kernel adds beyond its work: launch, ramp-up and tail."""
    collective_s: float = 0.0
    """Seconds each collective call adds beyond its bytes: its latency."""
    step_s: float = 0.0
    """Seconds each forward step adds on the host: scheduling, sampling, synchronisation."""
    launch_s: float = 0.0
    """Host seconds per kernel and per collective call of a step launched without CUDA graphs (the workload's
    enforce_eager): the Python and PyTorch dispatch that issues each one. The GPU runs them as they come, so such
    a step lasts at least its launches · launch_s; a step replayed from a CUDA graph pays none of it."""
    request_s: float = 0.0
    """Seconds each request spends on the host before the scheduler sees it: the API server's parsing, chat
    template and tokenising. It runs beside the GPU (the engine keeps stepping the others), so it adds to the
    request's TTFT and end-to-end latency, not to any step."""
    sources: dict[str, str] = {}
    """Where each figure comes from: a datasheet, a published measurement, or a fit (with its inputs)."""

    @model_validator(mode="after")
    def _ranges(self) -> "TimeModel":
        for name in SHARES:
            v = getattr(self, name)
            if v is not None and not BOUNDS[name][0] < v <= BOUNDS[name][1]:
                raise ValueError(f"`{name}`: {v} is not in (0, 1]; give a share such as 0.8")
            if v is not None and v < SHARE_MIN:
                raise ValueError(f"`{name}`: {v:g} is below a millionth of the peak; give a share such as 0.8")
        if not BOUNDS["matmul_pad_rows"][0] <= self.matmul_pad_rows <= BOUNDS["matmul_pad_rows"][1]:
            raise ValueError(f"`matmul_pad_rows`: {self.matmul_pad_rows} is not in [0, 4096]; give rows such as 64")
        for name in ("overlap", "comm_overlap"):
            if not BOUNDS[name][0] <= getattr(self, name) <= BOUNDS[name][1]:
                raise ValueError(f"`{name}`: {getattr(self, name)} is not in [0, 1]; give a share such as 0.5")
        for name in ("kernel_s", "collective_s", "step_s", "request_s", "launch_s"):
            if not BOUNDS[name][0] <= getattr(self, name) < BOUNDS[name][1]:
                raise ValueError(f"`{name}`: {getattr(self, name)} is not in [0, 1) seconds; give a time such as 5e-6")
        return self

    def overlapped(self, c: float, m: float) -> float:
        """Seconds of work with compute c and memory m under this model's overlap (overlapped)."""
        return overlapped(c, m, self.overlap)

    def beside(self, compute: float, comm: float) -> float:
        """Seconds of `compute` with `comm` running beside it on its own stream (overlapped, comm_overlap)."""
        return overlapped(compute, comm, self.comm_overlap)

    def matmul_efficiency(self, dtype: str, blockwise: bool = False) -> float:
        """The share of `dtype`'s peak a matmul in it reaches; `blockwise`: over fp8 weights scaled per block."""
        if blockwise and dtype == "fp8" and self.block_fp8_efficiency:
            return self.block_fp8_efficiency
        low = dtype in ("fp8", "int8", "fp4")
        return self.fp8_efficiency or self.compute_efficiency if low else self.compute_efficiency

    @property
    def fixed_costs(self) -> bool:
        """Whether any fixed cost or partial overlap is modelled (the roofline has none)."""
        return bool(self.overlap or self.matmul_pad_rows or self.kernel_s or self.collective_s or self.step_s
                    or self.request_s)


ROOFLINE = TimeModel(attention_backward=1.0, comm_overlap=0.0, hide_layer_comm=True, balanced_experts=True,
                     sources={"compute_efficiency": "798 of 989 TFLOP/s, bf16 8192³ matmul, measured on an H100 SXM",
                              "memory_efficiency": "~3.0 of 3.35 TB/s, device-to-device copy, measured on an H100 SXM",
                              "comm_efficiency": "NCCL bus bandwidth over NVLink, ~80% of the one-way link"})
"""The roofline: the physical bound at the stated efficiencies, with no fixed cost and perfect overlap."""
