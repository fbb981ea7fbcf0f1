"""Measure the reference `Decoder` of a spec: parameters, FLOPs, KV cache bytes, peak memory and, on a GPU, time.

FLOPs are torch's FlopCounterMode totals (matmuls only: mm/addmm/bmm and the attention products), run
with SDPA's math backend: it decomposes attention into two bmm over the full T×L scores, masked or not
(backward: four more), which is what llmcalc's `attention_core="dense"` convention counts. (The fused CPU
kernel is invisible to FlopCounterMode, and fused GPU kernels' backward adds a recomputation of the
scores.) Params, FLOPs and cache bytes depend only on shapes, so device="cuda" takes them from a fake run.
"""

from __future__ import annotations

import contextlib
import statistics
import time
import weakref
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from llmcalc.errors import UserError
from llmcalc.model.spec import ModelSpec
from llmcalc.reference.model import Decoder
from llmcalc.reference.optimizer import MasterAdamW

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
PARTS = ("embedding", "layers.attention", "layers.ffn", "layers.norms", "final_norm", "lm_head")


@dataclass
class Measured:
    """What `measure` found. Params, FLOPs and cache bytes are exact counts; peak_bytes is measured with
    the serving kernels (Decoder.use_kernels), see LiveBytes."""

    params_total: int  # sum of p.numel() over parameters (tied counted once)
    params_by_module: dict[str, int]  # PARTS: "embedding", "layers.attention", ... , "lm_head"
    prefill_flops: int  # FlopCounterMode total for forward(tokens [B,S], start=0, logits="last")
    decode_flops: int  # one decode step at context S (cache holds S tokens; new token at position S), logits last
    train_flops: int | None  # forward with logits="all" on [B,S] + cross-entropy loss .backward(); None if train=False
    kv_bytes: int  # sum of nbytes of the cache tensors after prefill of S tokens (capacity max_tokens = S)
    peak_bytes: int | None  # peak bytes of live tensors during the prefill (weights + cache + activations)
    prefill_s: float | None  # cuda only: median wall time of the prefill (CUDA events, warm-up, ≥5 runs)
    decode_s: float | None  # cuda only: median time of one decode step


class LiveBytes(TorchDispatchMode):
    """Live and peak bytes of tensor storage, counted as ops create it.

    Every storage an op returns is counted once, by its nbytes, from when it is first seen until it is
    freed (a weakref finalizer on the storage; torch keeps one Python storage object per live storage).
    Views share their base's storage and in-place ops create none, so neither adds bytes; meta tensors
    are skipped. Works on real and fake tensors alike. Not counted: allocator rounding, caching and
    fragmentation, and scratch memory a kernel allocates internally without returning it.
    """

    def __init__(self):
        super().__init__()
        self.live: dict[int, int] = {}
        self.now = self.peak = 0

    def reset_peak(self) -> None:
        self.peak = self.now

    def _see(self, t) -> None:
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            return
        storage = t.untyped_storage()
        key = storage._cdata
        if key in self.live:
            return
        self.live[key] = storage.nbytes()
        self.now += self.live[key]
        self.peak = max(self.peak, self.now)
        weakref.finalize(storage, self._free, key).atexit = False

    def _free(self, key: int) -> None:
        self.now -= self.live.pop(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            self._see(t)
        return out


def part_of(name: str) -> str:
    """The PARTS entry of a parameter name (q/k norms count as layer norms, as llmcalc's norms/qk; T5's bias table,
    held by the first layer and read by all, counts once as a position table, as llmcalc's embedding/position)."""
    head = name.split(".")[0]
    if name.endswith(".relative_attention_bias.weight"):
        return "embedding"
    if head == "layers":
        return "layers.norms" if ".qk_norms." in name else {
            "attn": "layers.attention", "ffn": "layers.ffn", "norms": "layers.norms"}[name.split(".")[2]]
    return {"embed": "embedding", "pos_embed": "embedding", "pos_biases": "embedding", "final_norm": "final_norm",
            "lm_head": "lm_head", "lm_head_bias": "lm_head"}[head]


def count_flops(fn) -> int:
    """FlopCounterMode's total for fn(), attention on SDPA's math backend."""
    counter = FlopCounterMode(display=False)
    with sdpa_kernel(SDPBackend.MATH), counter:
        fn()
    return counter.get_total_flops()


def measure(spec: ModelSpec, batch: int, seq: int, device: str = "fake", mla_decode: str = "absorbed",
            dtype: str = "bf16", train: bool = True) -> Measured:
    """Build the reference model of `spec` and measure it at `batch` sequences of `seq` tokens.

    device: "fake" (full size under FakeTensorMode, no memory), "cpu" (real tensors; scale the spec
    down), "cuda" (real run for peak memory and time; the counts come from a fake run).
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    if device == "cuda" and spec.stack.kind != "decoder":
        raise UserError(f"`device` cuda: the {spec.stack.kind} reference runs on fake or cpu")
    if device == "cuda":
        counts = measure(spec, batch, seq, "fake", mla_decode, dtype, train)
        return replace(counts, **_cuda_run(spec, batch, seq, mla_decode, DTYPES[dtype]))
    if device not in ("fake", "cpu"):
        raise ValueError(f"device {device!r}: use fake, cpu or cuda")
    with FakeTensorMode() if device == "fake" else contextlib.nullcontext():
        return _measure(spec, batch, seq, mla_decode, DTYPES[dtype], train)


def reference_model(spec: ModelSpec, seq: int, dtype: torch.dtype = torch.bfloat16):
    """The reference module of the spec's stack kind: the decoder (model.py), a bidirectional encoder, or an
    encoder-decoder whose encoder reads as many positions as llmcalc takes for a prompt of `seq` tokens
    (encoder_decoder.py)."""
    from llmcalc.reference.encoder_decoder import Encoder, EncoderDecoder
    from llmcalc.reference.gemma3n import Gemma3nDecoder

    build = {"decoder": lambda: Decoder(spec, dtype=dtype), "encoder": lambda: Encoder(spec, dtype=dtype),
             "encoder-decoder": lambda: EncoderDecoder(spec, dtype=dtype,
                                                       encoder_seq=spec.stack.encoder_length(None, seq)),
             "gemma3n": lambda: Gemma3nDecoder(spec, dtype=dtype)}
    return build[spec.stack.kind]()


def prefill_peak(spec: ModelSpec, batch: int, seq: int, dtype: torch.dtype = torch.bfloat16):
    """The reference model built on the serving kernels, its cache, and the peak bytes of live tensors over a
    prefill of `seq` tokens in `batch` sequences (weights and cache included), under the current mode (fake
    or real tensors)."""
    with LiveBytes() as mem:
        tokens = torch.zeros(batch, seq, dtype=torch.long)
        model = reference_model(spec, seq, dtype).eval().use_kernels("serving")
        cache = model.new_cache(batch, seq)
        mem.reset_peak()
        with torch.no_grad():
            model(tokens, cache, 0, "last").float()  # sampling reads the logits in fp32
    return model, cache, mem.peak


def _measure(spec, batch, seq, mla_decode, dtype, train) -> Measured:
    model, cache, peak = prefill_peak(spec, batch, seq, dtype)
    tokens = torch.zeros(batch, seq, dtype=torch.long)
    model.use_kernels("counted")
    by_module = dict.fromkeys(PARTS, 0)
    decoder = spec.stack.kind == "decoder"
    for name, p in model.named_parameters():  # an encoder's, an encoder-decoder's: by their top-level module
        key = part_of(name) if decoder else name.split(".")[0]
        by_module[key] = by_module.get(key, 0) + p.numel()
    with torch.no_grad():
        prefill = count_flops(lambda: model(tokens, model.new_cache(batch, seq), 0, "last"))
        decode = count_flops(lambda: model(tokens[:, :1], model.new_cache(batch, seq + 1), seq, "last", mla_decode)
                             ) if spec.stack.decodes else 0  # an encoder has no decode step

    def train_step():
        logits = model(tokens, None, 0, "all")
        F.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten()).backward()

    return Measured(
        params_total=sum(by_module.values()), params_by_module=by_module,
        prefill_flops=prefill, decode_flops=decode, train_flops=count_flops(train_step) if train else None,
        kv_bytes=sum(t.nbytes for kv in cache for t in kv), peak_bytes=peak, prefill_s=None, decode_s=None,
    )


@dataclass
class LoraMeasured:
    """A LoRA training step of the reference decoder (llmcalc/reference/lora.py) at batch × seq, all logits."""

    trainable_params: int  # sum of numel over parameters with requires_grad (the adapters)
    params_total: int  # every parameter, base and adapters
    train_flops: int  # FlopCounterMode: forward + cross-entropy backward, SDPA math backend (as measure's)
    saved_bytes: int | None  # storage autograd keeps for the backward at the end of the forward, parameters aside
    frozen_saved_bytes: int | None  # the same for the frozen base without adapters (input gradient flowing)
    static_bytes: int | None  # live after the step: weights, adapters, their gradients, fp32 master + Adam m and v
    peak_bytes: int | None  # peak live bytes over the step: weights, adapters, fp32 master + Adam m and v,
    #                         activations, gradients (None: routed experts, whose counted kernels gather weights)


def measure_lora(spec: ModelSpec, batch: int, seq: int, rank: int, targets: frozenset[str], device: str = "fake",
                 dtype: str = "bf16") -> LoraMeasured:
    """Build the reference model of `spec` with rank-`rank` adapters on `targets` (base frozen) and measure one
    training step on `batch` sequences of `seq` tokens: device "fake" (full size, no memory) or "cpu"."""
    if device not in ("fake", "cpu"):
        raise ValueError(f"device {device!r}: LoRA runs on fake or cpu")
    if spec.stack.kind != "decoder":
        raise UserError("`lora_rank`: LoRA validation builds the reference decoder; give a decoder model")
    with FakeTensorMode() if device == "fake" else contextlib.nullcontext():
        return _measure_lora(spec, batch, seq, rank, targets, DTYPES[dtype])


def _measure_lora(spec, batch, seq, rank, targets, dtype) -> LoraMeasured:
    from llmcalc.reference.lora import add_lora

    tokens = torch.zeros(batch, seq, dtype=torch.long)

    def step(model, saved=None):
        with torch.autograd.graph.saved_tensors_hooks(*saved) if saved else contextlib.nullcontext():
            logits = model(tokens, None, 0, "all")
            loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten())
        loss.backward()

    def kept_bytes(model) -> int:
        """Run a step; the storage autograd kept for the backward (each storage once, parameters aside)."""
        params = {p.untyped_storage()._cdata for p in model.parameters()}
        kept: dict[int, int] = {}

        def pack(t):
            key = t.untyped_storage()._cdata
            if key not in params:
                kept[key] = t.untyped_storage().nbytes()
            return t

        step(model, (pack, lambda t: t))
        return sum(kept.values())

    model = add_lora(Decoder(spec, dtype=dtype), rank, targets)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    flops = count_flops(lambda m=model: step(m))
    del model
    if spec.ffn.routed_experts:
        return LoraMeasured(trainable, total, flops, None, None, None, None)
    with LiveBytes() as mem:
        model = add_lora(Decoder(spec, dtype=dtype), rank, targets)
        states = [torch.zeros(p.shape, dtype=torch.float32) for p in model.parameters() if p.requires_grad
                  for _ in range(3)]  # fp32 master, Adam m and v
        saved = kept_bytes(model)
        # after the step: weights, adapters, their gradients and optimizer states (and the token ids, not counted)
        static = mem.now - mem.live.get(tokens.untyped_storage()._cdata, 0)
    del states, model
    frozen = kept_bytes(add_lora(Decoder(spec, dtype=dtype), rank, frozenset()))
    return LoraMeasured(trainable, total, flops, saved, frozen, static, mem.peak)


def _cuda_run(spec, batch, seq, mla_decode, dtype) -> dict:
    """Peak memory of the prefill (torch.cuda.max_memory_allocated) and median prefill / decode times."""
    model = Decoder(spec, dtype=dtype, device="cuda").eval().use_kernels("serving")
    prefill_s, peak, _ = prefill_run(model, batch, seq)
    decode_s, _ = decode_run(model, batch, seq, mla_decode)
    return dict(peak_bytes=peak, prefill_s=prefill_s, decode_s=decode_s)


def prefill_run(model: Decoder, batch: int, seq: int, warmup: int = 1, runs: int = 3) -> tuple[float, int | None, int]:
    """Median seconds of a prefill of `seq` tokens (random_tokens) in `batch` sequences into a preallocated cache
    of `seq` positions (logits of the last position, read in fp32 as sampling does), timed on the model's device (CUDA
    events on cuda, after `warmup` untimed runs); on cuda the peak bytes allocated over it
    (torch.cuda.max_memory_allocated: weights, cache, activations, kernels' workspaces; None elsewhere); and the
    cache's bytes."""
    from llmcalc.reference.calibrate import Timer

    dev = model.embed.weight.device
    tokens = random_tokens(model, batch, seq)
    with torch.no_grad():
        cache = model.new_cache(batch, seq)
        cuda = dev.type == "cuda"
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        seconds = Timer(str(dev))(lambda: model(tokens, cache, 0, "last").float(), warmup, runs)
        peak = torch.cuda.max_memory_allocated() if cuda else None
        kv = sum(t.nbytes for c in cache for t in c)
    return seconds, peak, kv


def random_tokens(model: Decoder, batch: int, seq: int) -> torch.Tensor:
    """Token ids drawn uniformly (a fixed seed), so a router sends tokens to experts as real text spreads them:
    equal ids would give every token the same hidden state and the same experts, which reads fewer expert weights
    than the time model's decode step (and real traffic) does."""
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(0, model.spec.vocab_size, (batch, seq), generator=g)
    return ids.to(model.embed.weight.device)


def decode_run(model: Decoder, batch: int, seq: int, mla_decode: str = "absorbed", warmup: int = 3, runs: int = 20,
               graph: bool = True) -> tuple[float, str]:
    """Median seconds of one decode step of `batch` sequences (random_tokens) at position `seq` over a zeroed
    cache of seq + 1 positions (attention's time does not depend on the cached values), and how it ran: on cuda
    the step is captured once in a CUDA graph and replayed, so no Python or launch overhead is timed ("CUDA
    graph"); "eager" where graph is False, off cuda, or where capture fails (the reason is given)."""
    from llmcalc.reference.calibrate import Timer

    dev = model.embed.weight.device
    tokens = random_tokens(model, batch, 1)
    with torch.no_grad():
        cache = model.new_cache(batch, seq + 1)

        def step():
            return model(tokens, cache, seq, "last", mla_decode)

        fn, how = step, "eager"
        if graph and dev.type == "cuda":
            try:
                fn, how = _captured(step), "CUDA graph"
            except RuntimeError as e:
                how = f"eager (CUDA graph capture failed: {str(e).splitlines()[0][:120]})"
        seconds = Timer(str(dev))(fn, warmup, runs)
    return seconds, how


def _captured(step):
    """step() captured in a CUDA graph (after two warm-up calls on a side stream): its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


@dataclass
class TrainTimes:
    """One training step of the reference (train_run): medians of each part, and the peak bytes allocated."""

    step_s: float  # forward + backward + optimizer
    forward_s: float  # forward with every position's logits, and the cross-entropy loss
    backward_s: float
    optimizer_s: float
    peak_bytes: int | None  # torch.cuda.max_memory_allocated over the steps (None off cuda)
    static_bytes: int | None  # allocated before the first step: weights, fp32 master, Adam m and v (None off cuda)


def train_run(model: Decoder, batch: int, seq: int, warmup: int = 1, runs: int = 3) -> TrainTimes:
    """Median seconds of a training step of `model` (serving kernels: flash attention, grouped expert GEMMs; with
    autograd) on `batch` random sequences of `seq` tokens: forward with every position's logits and the
    cross-entropy loss in fp32, backward, MasterAdamW's update; each part timed with CUDA events on cuda."""
    dev = model.embed.weight.device
    cuda = dev.type == "cuda"
    model.train()
    opt = MasterAdamW(model.parameters())
    tokens = random_tokens(model, batch, seq)
    if cuda:
        torch.cuda.synchronize()
        static = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    parts: list[tuple[float, float, float]] = []
    for i in range(warmup + runs):
        marks = []

        def mark():
            if cuda:
                e = torch.cuda.Event(enable_timing=True)
                e.record()
                marks.append(e)
            else:
                marks.append(time.perf_counter())

        mark()
        logits = model(tokens, None, 0, "all")  # [B, S, V]
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten())
        del logits
        mark()
        loss.backward()
        del loss
        mark()
        opt.step()
        mark()
        if cuda:
            torch.cuda.synchronize()
            gaps = [a.elapsed_time(b) / 1e3 for a, b in zip(marks, marks[1:])]
        else:
            gaps = [b - a for a, b in zip(marks, marks[1:])]
        if i >= warmup:
            parts.append(tuple(gaps))
    model.eval()
    fwd, bwd, upd = (statistics.median(p[i] for p in parts) for i in range(3))
    return TrainTimes(step_s=statistics.median(sum(p) for p in parts), forward_s=fwd, backward_s=bwd,
                      optimizer_s=upd, peak_bytes=torch.cuda.max_memory_allocated() if cuda else None,
                      static_bytes=static if cuda else None)
