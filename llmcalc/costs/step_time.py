"""Seconds of the step form's entries on one GPU under a time model (llmcalc/model/time_model.py).

Per entry (llmcalc/costs/step.py: Op, Cost), with c its FLOPs plus matmul_pad_rows × its row FLOPs at the rate
of its kind (a matmul at the peak of the dtype it runs in, a mixer core at the attention's) and m its bytes at the
bandwidth: the overlap rule max(c, m) + overlap·min(c, m), plus its kernels' fixed cost. A collective: bytes over
the link tier it crosses plus each call's latency. A step adds step_s; one launched without CUDA graphs lasts at
least its launches · launch_s (StepTime.bounded).
"""

from __future__ import annotations

from llmcalc.costs.expert_balance import busiest_rank
from llmcalc.costs.parallel import collective_link
from llmcalc.costs.step import Cost, Op, collectives, kernels, op_name
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import TimeModel
from llmcalc.workload import Workload


def attention_dtype(w: Workload) -> str:
    """The dtype the attention core computes in: `attention_dtype`, else the compute dtype, but bf16 when
    that is fp8 or int8 (serving stacks run attention in bf16 over fp8 weights and caches)."""
    return w.attention_dtype or ("bf16" if w.compute_dtype in ("fp8", "int8", "fp4") else w.compute_dtype)


def native_types(spec: ModelSpec, gpu: GPU, w: Workload) -> dict[str, str]:
    """op → the matmul type its weights' format runs in natively on `gpu` (fp8 formats on fp8 tensor cores, MXFP4
    and NVFP4 on fp4 ones), for the ops whose every component shares one such type; none unless the workload
    lets compute follow the format (Workload.native_compute). Elsewhere the compute dtype: a format the GPU has
    no unit for is dequantised into it (weight-only), its bytes still the format's."""
    if not w.native_compute(spec):
        return {}
    formats, kinds = w.formats(spec), {}
    for path in matrix_paths(spec):
        kind = formats.of(path).compute
        kinds.setdefault(op_name(path), set()).add(kind if kind and getattr(gpu.peak_tflops, kind) else None)
    return {op: k.pop() for op, k in kinds.items() if len(k) == 1 and None not in k}


def matrix_paths(spec: ModelSpec) -> list[str]:
    """The component paths of every layer matrix (attention/q, ffn/experts, ffn/dense_up, ...)."""
    d = spec.d_model
    paths = [f"{g.mixer_name}/{k}" for g in spec.layer_groups() if g.mixer is not None for k in g.mixer.matrices(d)]
    paths += [spec.ffn_prefix(g) + k for g in spec.layer_groups() for k in g.ffn.matrices(d)]
    return list(dict.fromkeys(paths))


def native_shares(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel) -> dict[str, tuple[str, float]]:
    """op → (the type it runs in natively, the share of that type's peak it reaches) for the ops of native_types:
    the time model's block_fp8_efficiency where every component's fp8 weights are scaled per block (the engine's
    block-scaled kernels), else its efficiency at that type."""
    if not (kinds := native_types(spec, gpu, w)):
        return {}
    formats, blockwise = w.formats(spec), {}
    for path in matrix_paths(spec):
        op = op_name(path)
        blockwise[op] = blockwise.get(op, True) and formats.of(path).blockwise
    return {op: (k, tm.matmul_efficiency(k, blockwise[op])) for op, k in kinds.items()}


def native_rates(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel) -> dict[str, float]:
    """op → FLOP/s of the ops that run in their format's native type (native_shares)."""
    return {op: gpu.peak(k) * share for op, (k, share) in native_shares(spec, gpu, w, tm).items()}


def block_scaled_note(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel) -> str | None:
    """Which ops run at the time model's block-scaled fp8 share (native_shares), and that share; None if none."""
    ops = [op for op, (k, share) in native_shares(spec, gpu, w, tm).items() if share != tm.matmul_efficiency(k)]
    if not ops:
        return None
    whence = (f"; fitted to {tm.engine}'s published runs on the {tm.gpu}, "
              f"presets/calibration/engines/{tm.engine}/{tm.gpu}.yaml") if tm.engine else ""
    return (f"{', '.join(ops)}: fp8 weights scaled per 128 × 128 block run at the engine's block-scaled kernels' "
            f"{tm.block_fp8_efficiency:g} of the fp8 peak (block_fp8_efficiency{whence}; "
            "docs/roofline.md#block-scaled-fp8)")


def busiest_ranks(spec: ModelSpec, w: Workload, tm: TimeModel) -> dict[Op, float]:
    """Expert parallelism under the traffic's skew (Workload.routing_skew): op → the busiest rank's routed tokens
    over the mean rank's (expert_balance.busiest_rank), for each MoE layer group's routed experts and for the
    expert all-to-all (the most any group gives); none where every rank gets the mean: ep 1, uniform routing, or a
    time model that balances the ranks (TimeModel.balanced_experts)."""
    ep, skew = w.layout.ep, w.routing_skew
    if ep == 1 or not skew or tm.balanced_experts:
        return {}
    out = {Op.of(gi, op_name(spec.ffn_prefix(g) + "experts")): busiest_rank(g.ffn.routed_experts, ep, g.ffn.top_k, skew)
           for gi, g in enumerate(spec.layer_groups()) if g.ffn.routed_experts}
    return out | {Op.of(None, "comm/ep_all_to_all"): max(out.values())} if out else out


def busiest_of(spec: ModelSpec, w: Workload, tm: TimeModel) -> float | None:
    """The report's figure: the most busiest_ranks gives (1.0 where the ranks are even); None without expert
    parallelism."""
    return max(busiest_ranks(spec, w, tm).values(), default=1.0) if w.layout.ep > 1 else None


def expert_parallel_note(spec: ModelSpec, w: Workload, tm: TimeModel) -> str:
    """How the expert-parallel ranks' loads were timed: the busiest rank's, at the traffic's skew, or the mean's."""
    busiest = busiest_of(spec, w, tm) or 1.0
    if busiest > 1:
        return (f"expert parallel: each MoE layer waits for its busiest rank, which computes and receives "
                f"×{busiest:.2f} the mean rank's routed tokens at the traffic's expert skew {w.routing_skew:g} "
                "(`expert_skew`; 0: uniform routing; docs/moe.md#expert-parallel-load)")
    why = "the roofline balances the ranks" if tm.balanced_experts else "uniform routing (`expert_skew` 0)"
    return f"expert parallel: every rank gets the mean's routed tokens: {why}"


class StepTime:
    """Seconds of a step's entries on one GPU under a time model (llmcalc/model/time_model.py): per op
    max(c, m) + overlap·min(c, m) + its kernels' fixed cost, c its FLOPs plus matmul_pad_rows × its row FLOPs
    at the peak of the dtype it runs in (the attention core: attention_dtype) and m its bytes at the bandwidth;
    communication bytes over the link tier the collective crosses (collective_link) plus each call's
    latency (collective_s, and the network's extra latency beyond a node); step_s per forward; a forward launched
    without CUDA graphs lasts at least host_s. Under expert
    parallelism the routed experts' FLOPs and the all-to-all's bytes are the busiest rank's (busiest_ranks): the
    mean's times `busiest`."""

    def __init__(self, spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel, prefill: bool):
        attn = attention_dtype(w)
        self.flops = gpu.peak(w.compute_dtype) * tm.matmul_efficiency(w.compute_dtype)
        self.attention = gpu.peak(attn) * (tm.attention_efficiency or tm.matmul_efficiency(attn))
        self.bytes = gpu.bandwidth * tm.memory_efficiency
        self.native = native_rates(spec, gpu, w, tm)
        self.tm, self.overlap, self.step_s, self.pad = tm, tm.overlap, tm.step_s, tm.matmul_pad_rows
        launches = kernels(spec, w.absorbed(spec.attention, prefill), prefill)
        self.fixed = {k: n * tm.kernel_s for k, n in launches.items()}
        # kernels and collective calls one forward launches, by entry: the host's floor without CUDA graphs (host_s)
        self.launches = launches | {Op.of(None, op): n for op, n in collectives(spec, w.layout).items()}
        self.launch_s = tm.launch_s if w.enforce_eager else 0.0
        self.busiest = busiest_ranks(spec, w, tm)
        self.links: dict[str, float] = {}  # comm op → one-way bytes/s it reaches on the tier it crosses
        node = gpu.link(1)
        for op, n in collectives(spec, w.layout).items():
            tier = collective_link(op, w.layout, gpu)
            self.links[op] = tier.bytes_per_s * tm.comm_efficiency / self.busiest.get(Op.of(None, op), 1.0)
            # a call pays the profile's collective_s (measured within a node) plus the slower tier's extra latency
            extra = max(0.0, tier.latency_s - node.latency_s) if tm.fixed_costs else 0.0
            self.fixed[Op.of(None, op)] = n * (tm.collective_s + extra)

    @property
    def host_s(self) -> float:
        """Seconds the host takes to launch one forward's kernels and collectives without CUDA graphs (launches ·
        launch_s): a step lasts at least this long (`bounded`); 0 for a step replayed from a graph."""
        return sum(self.launches.values()) * self.launch_s

    def bounded(self, gpu_s: float) -> float:
        """A step's seconds from the GPU's `gpu_s` (its entries' times): at least the host's launches (host_s),
        plus the host's step_s."""
        return max(gpu_s, self.host_s) + self.step_s

    def link(self, op: str) -> float:
        """One-way bytes/s a communication op reaches: its tier's bandwidth · comm_efficiency (over the busiest
        rank's load for the expert all-to-all, which that rank's bytes set)."""
        return self.links[op]

    def rate(self, op: Op) -> float:
        """FLOP/s of an entry: a mixer core's (attention/core, a hybrid's mamba/core) at the attention's, a
        matmul's at its format's native type or the compute dtype's."""
        return self.attention if op.core else self.native.get(op.name, self.flops)

    def times(self, op: Op, cost: Cost) -> tuple[float, float, float, float]:
        """(compute, memory, communication, fixed) seconds of one entry."""
        fixed = self.fixed.get(op, 0.0)
        if op.collective:
            return 0.0, 0.0, cost.bytes / self.links[op.name], fixed
        flops = cost.flops * self.busiest.get(op, 1.0) + self.pad * cost.row_flops
        return flops / self.rate(op), cost.bytes / self.bytes, 0.0, fixed

    def time(self, op: Op, cost: Cost) -> float:
        """Seconds of one entry: the overlap rule (TimeModel.overlapped) on its compute and memory, plus its
        communication and fixed cost."""
        c, m, x, o = self.times(op, cost)
        return self.tm.overlapped(c, m) + x + o

