"""The reference engine's own kernels, counted: a forward of the reference model run under FakeTensorMode (shapes and
dtypes only, no GPU and no memory) on the paths a GPU takes (layers.GPU_PATHS), every aten call it dispatches
sorted into what launches no kernel (views, allocations), the weight matmuls and attention kernels (which llmcalc's
step form already costs) and the rest: the engine's element-wise and reduction kernels, with the bytes each reads
and writes. The reference engine's time (llmcalc/costs/engine_time.py) adds these to the step form's ops; nothing
here is a formula of the model. A training step is counted the same way in its three parts: the forward with its
loss, its backward (autograd) and the optimizer's update (count_training).

SDPA is taken as one fused kernel (a GPU's flash or cuDNN kernel; fake tensors would run its math fallback), its
output laid out [B, T, H, e] as those kernels lay it out; under autograd F.rms_norm as the GPU's fused kernel too.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from llmcalc.errors import UserError
from llmcalc.model.engine_profile import EngineKernels, TrainingKernels
from llmcalc.model.spec import ModelSpec

NO_KERNEL = {
    "view", "_unsafe_view", "reshape", "_reshape_alias", "expand", "transpose", "t", "permute", "unsqueeze", "squeeze",
    "slice", "select", "split", "split_with_sizes", "chunk", "unbind", "alias", "detach", "as_strided", "empty",
    "empty_strided", "empty_like", "lift_fresh", "unfold", "narrow", "diagonal", "view_as_real", "view_as_complex",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "device", "set_", "resize_", "_local_scalar_dense",
    "is_same_size", "size", "stride", "numel", "dim", "result_type", "_has_compatible_shallow_copy_type",
    "new_empty", "new_empty_strided",
}
"""aten calls that launch no kernel: views, metadata, allocations."""
MATMUL = {"mm", "addmm", "bmm", "baddbmm", "_grouped_mm", "_scaled_mm", "_scaled_grouped_mm", "addbmm"}
"""Weight and batched matmuls: the step form's."""
REDUCTION = {"linalg_vector_norm", "norm", "sum", "mean", "amax", "amin", "max", "min", "softmax", "_softmax",
             "_safe_softmax", "log_softmax", "_log_softmax", "topk", "sort", "argsort", "cumsum", "logsumexp", "var",
             "var_mean", "std", "searchsorted", "argmax", "argmin", "prod", "any", "all"}
"""Kernels that reduce along a dimension (their fixed cost is a reduction's, not an element-wise pass's)."""
GATHER = {"index_select", "embedding", "index", "gather", "take"}
"""Kernels that read only the rows they select: they move their output twice (read, write) and the index."""
SCATTER = {"index_add", "index_add_", "index_put", "index_put_", "scatter", "scatter_", "scatter_add", "scatter_add_",
           "index_copy", "index_copy_"}
"""Kernels that write rows of a larger tensor: they move their source three times (read it, read and write the
rows) and the index."""


def _nbytes(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def _strided(tensors: list) -> bool:
    """Whether an element-wise kernel over `tensors` broadcasts an operand or walks one by strides (a slice, a
    transposed view): such kernels reach about half the bandwidth of a contiguous pass over equal shapes."""
    sized = [t for t in tensors if t.dim() > 0]
    largest = max((t.numel() for t in sized), default=0)
    return any(not t.is_contiguous() or t.numel() < largest for t in sized)


def _op(func) -> str:
    """aten.add_.Tensor → add_."""
    return func.__name__.split(".")[0] if hasattr(func, "__name__") else str(func)


class KernelCount(TorchDispatchMode):
    """Counts, for every aten call dispatched under it: calls, kernels launched, and by kind (matmul, attention,
    element-wise, reduction) the kernels and the bytes their tensors read and write."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.kinds = {k: [0, 0] for k in ("matmul", "attention", "elementwise", "strided", "scatter", "reduction")}

    def add(self, kind: str, nbytes: int) -> None:
        self.kinds[kind][0] += 1
        self.kinds[kind][1] += nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = _op(func)
        self.calls += 1
        if name in NO_KERNEL or name.startswith("sym_") or func.namespace == "prim":
            return out
        ins = [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if name in MATMUL:
            self.add("matmul", 0)
        elif "attention" in name or "scaled_dot_product" in name:
            self.add("attention", 0)
        elif name.rstrip("_") in GATHER or name in GATHER:
            index = sum(_nbytes(t) for t in ins if not t.is_floating_point())
            self.add("elementwise", 2 * sum(_nbytes(t) for t in outs) + index)
        elif name in SCATTER:
            source = max((_nbytes(t) for t in ins[1:] if t.is_floating_point()), default=0)
            index = sum(_nbytes(t) for t in ins if not t.is_floating_point())
            self.add("scatter", 3 * source + index)
        else:
            inplace = name.endswith("_") or "out" in (kwargs or {})
            moved = sum(_nbytes(t) for t in ins) + (0 if inplace else sum(_nbytes(t) for t in outs))
            if inplace:  # the written tensor is read among the inputs and written once more
                moved += _nbytes(ins[0]) if ins else 0
            if name.rstrip("_") in REDUCTION:
                self.add("reduction", moved)
            else:
                self.add("strided" if _strided(ins + outs) else "elementwise", moved)
        return out

    def result(self) -> EngineKernels:
        k = self.kinds
        launches = sum(n for n, _ in k.values())
        return EngineKernels(calls=self.calls, launches=launches, elementwise=k["elementwise"][0],
                             elementwise_bytes=k["elementwise"][1], strided=k["strided"][0],
                             strided_bytes=k["strided"][1], scatters=k["scatter"][0], scatter_bytes=k["scatter"][1],
                             reductions=k["reduction"][0],
                             reduction_bytes=k["reduction"][1], matmuls=k["matmul"][0],
                             attention=k["attention"][0])


@contextmanager
def fused_attention(mode: KernelCount):
    """The attention cores as the step form costs them, each recorded in `mode` as one attention kernel:
    F.scaled_dot_product_attention (a GPU's fused kernel; its output [B, H, T, e_v] laid out [B, T, H, e_v] as flash
    and cuDNN return it; under autograd its backward one kernel too) and MLA's absorbed decode step over the latent
    cache (MLAttention._absorbed_step, whose products and softmax the calibrated latent-attention curve times as
    one)."""
    from llmcalc.reference.layers import MLAttention

    sdpa, absorbed = F.scaled_dot_product_attention, MLAttention.__dict__["_absorbed_step"]

    class Core(torch.autograd.Function):
        """The fused kernel with its backward, one kernel each way (flash's or cuDNN's)."""

        @staticmethod
        def forward(ctx, q, k, v):
            mode.add("attention", 0)
            ctx.shapes = [t.shape for t in (q, k, v)]
            B, H, T = q.shape[:3]
            return q.new_empty(B, T, H, v.shape[-1]).transpose(1, 2)

        @staticmethod
        def backward(ctx, grad):
            mode.add("attention", 0)
            return tuple(grad.new_empty(shape) for shape in ctx.shapes)

    def one_kernel(q, k, v, *args, **kwargs):
        return Core.apply(q, k, v)

    def latent_step(q_lat, q_rope, latent, k_rope, scale):
        mode.add("attention", 0)
        return q_lat.new_empty(q_lat.shape)  # [B, H, r]

    F.scaled_dot_product_attention = one_kernel
    MLAttention._absorbed_step = staticmethod(latent_step)
    try:
        yield
    finally:
        F.scaled_dot_product_attention = sdpa
        MLAttention._absorbed_step = absorbed


@contextmanager
def fused_norm(mode: KernelCount):
    """F.rms_norm under autograd as a GPU runs it, recorded in `mode`: torch's `_fused_rms_norm`, one row-wise
    kernel reading x and the weight and writing y and an fp32 1/rms per row, and its backward's two (the input's
    gradient from dy, x, the weight and 1/rms; the weight's from dy, x and 1/rms). On the CPU and under
    FakeTensorMode torch decomposes it into element-wise passes instead."""

    class Norm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight):
            ctx.shapes = (x.shape, None if weight is None else weight.shape)
            w, stats = _nbytes(weight), 4 * x.numel() // x.shape[-1]
            ctx.bytes = (3 * _nbytes(x) + w + stats, 2 * _nbytes(x) + w + stats)
            mode.add("reduction", 2 * _nbytes(x) + w + stats)
            return x.new_empty(x.shape)

        @staticmethod
        def backward(ctx, grad):
            for moved in ctx.bytes[:1 if ctx.shapes[1] is None else 2]:
                mode.add("reduction", moved)
            return tuple(None if shape is None else grad.new_empty(shape) for shape in ctx.shapes)

    rms_norm = F.rms_norm
    F.rms_norm = lambda x, shape, weight=None, eps=None: Norm.apply(x, weight)
    try:
        yield
    finally:
        F.rms_norm = rms_norm


def count_step(spec: ModelSpec, batch: int, new: int, context: int, mla_decode: str = "absorbed") -> EngineKernels:
    """The reference's kernels in one forward of `batch` sequences of `new` tokens after `context` cached ones
    (context 0: a prefill, logits of the last position read in fp32 as sampling does; new 1: a decode step), on its
    serving kernels as a GPU runs them, under FakeTensorMode."""
    from llmcalc.reference.layers import GPU_PATHS
    from llmcalc.reference.model import Decoder

    with FakeTensorMode():
        model = Decoder(spec, dtype=torch.bfloat16).eval().use_kernels("serving")
        tokens = torch.zeros(batch, new, dtype=torch.long)
        cache = model.new_cache(batch, context + new)
        counter = KernelCount()
        GPU_PATHS[0] = True
        try:
            with torch.no_grad(), fused_attention(counter), counter:
                logits = model(tokens, cache, context, "last", mla_decode)
                if context == 0:
                    logits.float()
        finally:
            GPU_PATHS[0] = False
    return counter.result()


def count_training(spec: ModelSpec, batch: int, seq: int) -> TrainingKernels:
    """The reference's kernels in one training step of `batch` sequences of `seq` tokens, as
    reference/measure.py train_run runs it on a GPU, under FakeTensorMode: the forward with every position's logits
    and the cross-entropy loss in fp32, its backward (autograd), and MasterAdamW's update."""
    from llmcalc.reference.layers import GPU_PATHS
    from llmcalc.reference.model import Decoder
    from llmcalc.reference.optimizer import MasterAdamW

    with FakeTensorMode():
        model = Decoder(spec, dtype=torch.bfloat16).train().use_kernels("serving")
        opt = MasterAdamW(model.parameters())
        tokens = torch.zeros(batch, seq, dtype=torch.long)
        counter, totals = KernelCount(), []
        GPU_PATHS[0] = True
        try:
            with fused_attention(counter), fused_norm(counter), counter:
                logits = model(tokens, None, 0, "all")
                loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten())
                totals.append(counter.result())
                try:
                    loss.backward()
                except RuntimeError as e:  # a kernel written for inference alone (e.g. LSH's in-place merges)
                    raise UserError(f"`model`: the reference cannot run {spec.name}'s backward "
                                    f"({str(e).split(':')[0]}); its training step is not measurable on the reference "
                                    "engine") from None
                totals.append(counter.result())
                opt.step()
                totals.append(counter.result())
        finally:
            GPU_PATHS[0] = False
    return TrainingKernels(totals[0], _less(totals[1], totals[0]), _less(totals[2], totals[1]))


def _less(a: EngineKernels, b: EngineKernels) -> EngineKernels:
    """The kernels counted in `a` beyond those in `b`."""
    return EngineKernels(**{f: getattr(a, f) - getattr(b, f) for f in EngineKernels.__dataclass_fields__})


def mixer_kernels(spec: ModelSpec, mixer: str, batch: int, new: int, context: int) -> EngineKernels:
    """The kernels of one layer holding only the mixer `mixer` (a component path of spec.mixers): a one-layer model
    of it counted less the embedding, final norm and head (a two-layer count minus a one-layer one)."""
    from llmcalc.model.spec import ModelSpec as Spec

    def layers(n: int) -> EngineKernels:
        data = spec.model_dump() | {"n_layers": n, "hybrid_pattern": [{"mixer": mixer, "ffn": "none"}] * n}
        return count_step(Spec.model_validate(data), batch, new, context)

    return _less(layers(2), layers(1))
