"""How a model is run (`Workload`): the batch and lengths, the dtypes, the counting conventions, the parallel
layout and the serving runtime's reserve, validated once and passed whole to every estimator.

A spec (llmcalc/model/spec.py) holds what the checkpoint is; a workload holds how it is run; the two share
no field. Errors name the field in the domain's words (`batch`, `tp`; llmcalc/errors.py) and say the fix; a
front end writes its own word there (the CLI its flag).
"""

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, model_validator

from llmcalc.errors import Unread, UserError
from llmcalc.model.base import MAX_GROUP, MAX_SIZE, Deferred, Frozen
from llmcalc.model.lora import TARGETS
from llmcalc.model.pipeline_layout import Chunks, parse_layout
from llmcalc.model.spec import ModelSpec

if TYPE_CHECKING:
    from llmcalc.model.formats import WeightFormats

MAX_GPUS = 2**20
"""Sanity bound on the GPU count and each parallel degree (the largest clusters hold ~10^5 GPUs)."""

RECOMPUTE_OPS = {
    "qkv": "the attention's input projections (q, k, v; MLA's down and up projections; DSA's indexer "
           "projections; MTP's 2d→d input projection)",
    "attention": "the attention core: scores, softmax and the weighted values (DSA's indexer scores, Linformer's "
                 "sequence projections, Reformer's hashing)",
    "attention_out": "the attention's output projection o",
    "ffn": "the FFN's matmuls (dense or gated; MoE: router, routed and shared experts)",
}
"""Ops a recompute policy can name (`recompute_ops`), each with what it redoes in the backward pass."""
RECOMPUTE_MODES = {"none": (), "selective": ("attention",), "full": tuple(RECOMPUTE_OPS)}
"""The ops each `recompute` mode redoes: selective the attention core (Korthikanti et al. 2022), full every op of
every layer (the LM head is not recomputed)."""

EXPERT_SKEW = 1.64
"""The experts' load skew of real serving traffic, as a coefficient of variation of their shares of the routed
tokens: DeepSeek-R1 served by TensorRT-LLM at expert parallel 32 (256 experts, 8 a rank) puts 2.56 times the mean's
routed tokens on the busiest rank, averaged over layers and iterations (NVIDIA/TensorRT-LLM,
examples/wide_ep/ep_load_balancer/README.md: imbalance ratio (max − mean) / mean 1.564 without a load balancer);
llmcalc/costs/expert_balance.py gives 2.56 there at 1.64 (docs/moe.md#expert-parallel-load)."""
MAX_SKEW = 10.0
"""Sanity bound on `expert_skew`: beyond it one expert takes nearly every token."""

Whole = Annotated[int, Field(strict=True)]
"""A whole number; bools and floats are refused, never coerced. Ranges are checked by require_sizes."""
StorageDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
ComputeDtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]


def require_sizes(**values: int | None) -> None:
    """Each given size must be a positive whole number, at most MAX_SIZE (a GPU count or parallel degree:
    MAX_GPUS); None is a size left unset."""
    for name, v in values.items():
        if v is None:
            continue
        if v <= 0:
            raise UserError(f"`{name}`: must be > 0 (got {v}); give a positive whole number")
        bound, what = ((MAX_GPUS, "cluster") if name in ("gpus", "tp", "pp", "dp", "ep", "cp", "vpp") else
                       (MAX_GROUP, "quantisation group") if name == "group_size" else (MAX_SIZE, "workload"))
        if v > bound:
            raise UserError(f"`{name}`: {v} is more than {bound:,}, beyond any real {what}; give a smaller number")


class Layout(Frozen):
    """GPUs and how the model splits over them: gpus = tp · pp · dp · cp; ep spreads whole routed experts over
    ep GPUs of the tp · dp · cp group (docs/roofline.md#parallel-layouts). cp, vpp and uneven stages
    (first_stage_layers, last_stage_layers) are read by training only (docs/formulas.md#training-memory-per-gpu,
    docs/roofline.md#training-step-time), sp and tp_comm_overlap by training only; every default leaves a layout
    as it was."""

    tp: Whole = 1
    """Tensor parallel: every layer's heads and FFN width split over tp GPUs."""
    pp: Whole = 1
    """Pipeline parallel: the layers split into pp stages."""
    dp: Whole = 1
    """Data parallel: dp replicas, each running batch / dp sequences."""
    ep: Whole = 1
    """Expert parallel degree."""
    cp: Whole = 1
    """Context parallel: each sequence split into cp parts, one per GPU (ring attention over the parts)."""
    sp: bool = False
    """Sequence parallel (Megatron): the activations tensor parallelism keeps whole are split over the tp GPUs
    along the sequence instead."""
    tp_comm_overlap: bool = False
    """Training: Megatron's tp_comm_overlap, the tensor-parallel all-gathers and reduce-scatters run beside the
    layers' GEMMs (Transformer Engine's userbuffers); it needs sequence parallelism (`sp`)."""
    vpp: Whole = 1
    """Virtual pipeline stages per pipeline GPU: 1 runs the 1F1B schedule, 2 or more Megatron's interleaved
    1F1B over pp · vpp model chunks."""
    first_stage_layers: Whole | None = None
    """Training: the layers of the first pipeline stage (Megatron's decoder_first_pipeline_num_layers); None: the
    default split (stage_layers)."""
    last_stage_layers: Whole | None = None
    """Training: the layers of the last pipeline stage (decoder_last_pipeline_num_layers); None: the default."""
    embedding_in_split: bool = False
    """Training: the embedding counts as one layer when the layers split over the model chunks, so the first
    chunk holds one layer fewer (Megatron's account_for_embedding_in_pipeline_split)."""
    loss_in_split: bool = False
    """Training: the head and loss count as one layer, so the last chunk holds one layer fewer (Megatron's
    account_for_loss_in_pipeline_split)."""
    pp_layout: str | None = None
    """Training: every model chunk's layers as Megatron's pipeline layout string (pipeline_model_parallel_layout,
    llmcalc/model/pipeline_layout.py), e.g. "Et|(tt|)*30mL"; pp · vpp chunks, chunk i on stage i mod pp."""

    @model_validator(mode="after")
    def _sizes(self) -> "Layout":
        require_sizes(tp=self.tp, pp=self.pp, dp=self.dp, ep=self.ep, cp=self.cp, vpp=self.vpp,
                      first_stage_layers=self.first_stage_layers, last_stage_layers=self.last_stage_layers)
        for name in ("first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split"):
            if getattr(self, name) not in (None, False) and self.pp == 1:
                raise UserError(f"`{name}`: one pipeline stage holds every layer; give `pp` > 1 or drop `{name}`")
        if (self.embedding_in_split or self.loss_in_split) and self.stages_given:
            raise UserError("`embedding_in_split`: give the first and last stages' layers or count the embedding "
                            "and loss as layers, not both (Megatron refuses them together)")
        if self.pp_layout is not None:
            if self.pp == 1:
                raise UserError("`pp_layout`: one pipeline stage holds every layer; give `pp` > 1 or drop `pp_layout`")
            other = next((k for k in ("first_stage_layers", "last_stage_layers", "embedding_in_split",
                                      "loss_in_split") if getattr(self, k) not in (None, False)), None)
            if other:
                raise UserError(f"`pp_layout`: the layout places every layer; drop `{other}` (Megatron refuses them "
                                "together)")
            chunks = len(self.layout_chunks.layers)
            if chunks != self.pp * self.vpp:
                raise UserError(f"`pp_layout`: {chunks} model chunks, but pp {self.pp} × vpp {self.vpp} = "
                                f"{self.pp * self.vpp}; give pp · vpp chunks, or the pp and vpp they fit")
        if self.sp and self.tp == 1:
            raise UserError("`sp`: sequence parallelism splits activations over the tensor-parallel GPUs; "
                            "give `tp` > 1 or drop `sp`")
        if self.tp_comm_overlap and not self.sp:
            raise UserError("`tp_comm_overlap`: Megatron overlaps tensor-parallel communication with the GEMMs under "
                            "sequence parallelism only; add `sp` (and `tp` > 1)")
        if self.vpp > 1 and self.pp == 1:
            raise UserError(f"`vpp`: {self.vpp} virtual stages interleave a pipeline; give `pp` > 1 or drop `vpp`")
        return self

    @classmethod
    def of(cls, gpus: int | None = None, tp: int | None = None, pp: int = 1, dp: int = 1,
           ep: int = 1, cp: int = 1, **rest) -> "Layout":
        """The layout of `gpus` GPUs in all: tp defaults to gpus / (pp · dp · cp), else 1; gpus, when given with
        tp, must equal tp · pp · dp · cp. `rest`: the other fields (vpp, first_stage_layers, ...)."""
        require_sizes(gpus=gpus, tp=tp, pp=pp, dp=dp, cp=cp)
        if tp is None:
            tp = max(1, gpus // (pp * dp * cp)) if gpus else 1
        if gpus is not None and gpus != tp * pp * dp * cp:
            with_cp = f" × cp {cp}" if cp > 1 else ""
            raise UserError(f"`gpus`: {gpus} is not tp {tp} × pp {pp} × dp {dp}{with_cp} = {tp * pp * dp * cp}; "
                            "make them agree or leave one out")
        return cls(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, **rest)

    @property
    def attention_dp(self) -> bool:
        """Whether the replicas are data-parallel attention over shared experts: dp > 1 and the experts span more
        GPUs than a replica has (ep > tp; ep > 1 is a MoE, Layout.check), so every MoE layer is a collective over
        all of them and the replicas step together (SGLang's --enable-dp-attention)."""
        return self.dp > 1 and self.ep > self.tp

    @property
    def stages_given(self) -> bool:
        """Whether the first or last stage's layers are given."""
        return self.first_stage_layers is not None or self.last_stage_layers is not None

    @property
    def balanced(self) -> bool:
        """Whether the stages are the default even split of layers the time takes as equal: no stage's layers
        given and no edge counted as a layer (the layers are checked to divide by pp where this is read)."""
        return (not self.stages_given and not self.embedding_in_split and not self.loss_in_split
                and self.pp_layout is None)

    @property
    def layout_chunks(self) -> Chunks:
        """The model chunks `pp_layout` gives (pipeline_layout.parse_layout)."""
        return parse_layout(self.pp_layout)

    def stage_layers(self, n_layers: int) -> list[int]:
        """Layers of each pipeline stage, first to last. Given first and/or last stages (Megatron's
        --decoder-first/last-pipeline-num-layers) hold what they are given and the other stages share the rest
        evenly; by default each holds n_layers // pp and the first n_layers mod pp stages one more. A UserError
        names the field when the split cannot be made."""
        pp, first, last = self.pp, self.first_stage_layers, self.last_stage_layers
        if pp == 1:
            return [n_layers]
        if self.embedding_in_split or self.loss_in_split or self.pp_layout is not None:
            return [sum(b - a for a, b in chunks) for chunks in self.stage_chunks(n_layers)]
        if first is None and last is None:
            base, extra = divmod(n_layers, pp)
            if base == 0:
                raise UserError(f"`pp`: {pp} stages for {n_layers} layers leave a stage empty; use at most {n_layers}")
            return [base + (s < extra) for s in range(pp)]
        given = (first or 0) + (last or 0)
        middle = pp - (first is not None) - (last is not None)
        rest = n_layers - given
        name = "first_stage_layers" if first is not None else "last_stage_layers"
        if middle and rest < middle:
            raise UserError(f"`{name}`: the given stages hold {given} of the model's {n_layers} layers, leaving "
                            f"{max(rest, 0)} for the other {middle} stage(s); give at most {n_layers - middle} "
                            "layers to the given stages")
        if (middle == 0 and rest != 0) or (middle and rest % middle):
            what = (f"the first and last stages' {given} layers are not the {n_layers} layers" if middle == 0 else
                    f"the {rest} layers left do not split evenly over the other {middle} stage(s)")
            fix = (f"give first and last stages that sum to {n_layers}" if middle == 0 else
                   f"give stage layers that leave a multiple of {middle} layers, at least {middle}")
            raise UserError(f"`{name}`: {what}; {fix}")
        each = rest // middle if middle else 0
        return [first if s == 0 and first is not None else last if s == pp - 1 and last is not None else each
                for s in range(pp)]

    def stage_chunks(self, n_layers: int) -> list[list[tuple[int, int]]]:
        """The layer ranges [start, stop) of each pipeline stage's model chunks, first stage to last. Chunk j of
        stage r is the (j · pp + r)-th run of layers (Megatron's interleaved order); without vpp a stage is one
        chunk (stage_layers). Counting the embedding and the loss as layers (embedding_in_split, loss_in_split),
        the L + e + l layers split evenly into pp · vpp chunks and the first chunk holds e fewer real layers, the
        last l fewer (a chunk of one may hold the embedding alone); given stages split into vpp equal chunks
        each."""
        pp, v, e, ls = self.pp, self.vpp, int(self.embedding_in_split), int(self.loss_in_split)
        if self.pp_layout is not None:
            layers = self.layout_chunks.layers
            if sum(layers) != n_layers:
                raise UserError(f"`pp_layout`: its {sum(layers)} layers (t) are not the model's {n_layers}; give "
                                f"{n_layers}")
            sizes = {(j, r): layers[j * pp + r] for j in range(v) for r in range(pp)}
        elif e or ls:
            total = n_layers + e + ls
            if total % (pp * v):
                name = "embedding_in_split" if e else "loss_in_split"
                raise UserError(f"`{name}`: {n_layers} layers and {e + ls} edge(s) counted as layers make {total}, "
                                f"which pp {pp} × vpp {v} = {pp * v} model chunks do not split evenly; give a pp "
                                f"and vpp whose product divides {total}")
            per = total // (pp * v)
            sizes = {(j, r): per - e * (j == 0 and r == 0) - ls * (j == v - 1 and r == pp - 1)
                     for j in range(v) for r in range(pp)}
        else:
            layers = self.stage_layers(n_layers)
            if v > 1 and any(n % v for n in layers):
                name = ("first_stage_layers" if self.first_stage_layers is not None else
                        "last_stage_layers" if self.last_stage_layers is not None else "vpp")
                raise UserError(f"`{name}`: stages of {'+'.join(map(str, layers))} layers do not split into vpp {v} "
                                f"model chunks each; give stage layers that are multiples of {v}")
            sizes = {(j, r): layers[r] // v for j in range(v) for r in range(pp)}
        out: list[list[tuple[int, int]]] = [[] for _ in range(pp)]
        start = 0
        for j in range(v):
            for r in range(pp):
                out[r].append((start, start + sizes[j, r]))
                start += sizes[j, r]
        return out

    def split_note(self, n_layers: int) -> str | None:
        """How the layers split over uneven pipeline stages, as a note; None when every stage holds n_layers / pp."""
        layers = self.stage_layers(n_layers)
        if self.pp == 1 or len(set(layers)) == 1 and self.balanced:
            return None
        split = "+".join(map(str, layers))
        if self.pp_layout is not None:
            why = f"`pp_layout` {self.pp_layout}, {self.pp * self.vpp} model chunks"
        elif self.embedding_in_split or self.loss_in_split:
            edges = " and ".join(k for k, on in (("the embedding", self.embedding_in_split),
                                                 ("the loss", self.loss_in_split)) if on)
            why = f"{edges} counted as a layer each, {self.pp * self.vpp} model chunks"
        elif self.balanced:
            extra = n_layers % self.pp
            why = (f"`pp` {self.pp} does not divide the {n_layers} layers: the first {extra} stage(s) hold one layer "
                   "more; give `first_stage_layers` and `last_stage_layers` for another split")
        else:
            given = [f"`{k}` {getattr(self, k)}" for k in ("first_stage_layers", "last_stage_layers")
                     if getattr(self, k) is not None]
            why = " and ".join(given) + ", the other stages sharing the rest evenly"
        return f"pipeline stages of {split} layers: {why}"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    def check(self, spec: ModelSpec, batch: int, uneven: bool = False) -> None:
        """The layout must divide the model and the batch: heads and FFN width by tp, layers by pp (`uneven`,
        training: any split stage_layers makes, given stages or not; interleaved: pp · vpp chunks that divide),
        experts by ep, the batch by dp."""
        attn, tp, group = spec.attention, self.tp, self.tp * self.dp * self.cp
        if group % self.ep:
            what = "tp · dp · cp" if self.cp > 1 else "tp · dp"
            raise UserError(f"`ep`: {self.ep} must divide {what} = {group}; use a divisor of it")
        if attn.heads % tp:
            raise UserError(f"`tp`: {tp} does not divide the {attn.heads} attention heads; use a divisor of {attn.heads}")
        kv_heads = attn.cache_heads
        if kv_heads and kv_heads % tp and tp % kv_heads:
            raise UserError(f"`tp`: {tp} and the {kv_heads} kv heads do not divide one another; "
                            f"use a divisor or multiple of {kv_heads}")
        for g in spec.layer_groups():
            width = g.ffn.tp_width(self.ep)
            if width and width % tp:
                raise UserError(f"`tp`: {tp} does not divide the FFN width {width}; use a divisor of it")
        if not uneven and not self.balanced:
            name = next(k for k in ("first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split",
                                    "pp_layout") if getattr(self, k) not in (None, False))
            raise UserError(f"`{name}`: uneven pipeline stages are modelled in training only; drop `{name}`")
        if self.pp_layout is not None and self.layout_chunks.mtp not in (0, spec.mtp_modules):
            has = f"its {spec.mtp_modules} MTP module(s)" if spec.mtp_modules else "no MTP module"
            raise UserError(f"`pp_layout`: {self.layout_chunks.mtp} MTP layer(s) (m), and {spec.name} has {has}; give "
                            f"{spec.mtp_modules or 'no'} m")
        if uneven and (self.vpp == 1 or not self.balanced):
            self.stage_chunks(spec.n_layers)  # its own refusals
        elif spec.n_layers % self.pp:
            what = ("; a training step splits them unevenly (`vpp` 1), or count the embedding and loss as layers "
                    "(`embedding_in_split`, `loss_in_split`), or place every chunk's layers (`pp_layout`)"
                    ) if uneven else ""
            raise UserError(f"`pp`: {self.pp} does not divide the {spec.n_layers} layers; use a divisor of "
                            f"{spec.n_layers}{what}")
        if self.vpp > 1 and self.balanced and spec.n_layers % (self.pp * self.vpp):
            raise UserError(f"`vpp`: pp {self.pp} × vpp {self.vpp} = {self.pp * self.vpp} model chunks do not divide "
                            f"the {spec.n_layers} layers; use a vpp that makes them divide, or count the embedding "
                            "and loss as layers (`embedding_in_split`, `loss_in_split`)")
        if self.ep > 1:
            experts = spec.ffn.routed_experts
            if not experts:
                raise UserError(f"`ep`: {spec.name} has no experts; drop `ep`")
            if experts % self.ep:
                raise UserError(f"`ep`: {self.ep} does not divide the {experts} experts; use a divisor")
        if batch % self.dp:
            raise UserError(f"`batch`: {batch} sequences do not split over `dp` {self.dp}; use a multiple of {self.dp}")


class Workload(Frozen):
    """How the model is run: `batch` sequences of `seq` prompt tokens, then `gen` generated ones, in these
    dtypes, counted under these conventions (docs/formulas.md, FLOPs and Memory), on this layout. Each estimator
    reads the fields it needs: kv the batch, seq and kv_dtype; latency nearly all of them."""

    batch: Whole = 1
    """Sequences in the batch, in all (over every data-parallel replica); training: the global batch."""
    seq: Whole = 4096
    """Tokens per sequence: the prompt, or the context a decode step attends to."""
    gen: Whole = 1
    """Tokens generated after the prompt (flops: decode steps; latency: the first comes from the prefill)."""
    encoder_seq: Whole | None = None
    """An encoder-decoder's encoder input per sequence, in tokens (frames for Whisper, fixed by its audio
    window); None: `seq` (T5, BART), or the model's fixed length. Refused on other stacks."""

    weights_dtype: StorageDtype = "bf16"
    kv_dtype: StorageDtype = "bf16"
    act_dtype: Literal["fp32", "bf16", "fp16"] = "bf16"
    compute_dtype: ComputeDtype = "bf16"
    """The matmuls' type, which sets the GPU's peak (weight-only quantization still computes in bf16)."""
    attention_dtype: Literal["fp32", "bf16", "fp16", "fp8"] | None = None
    """The attention core's type; None: the compute dtype, but bf16 under fp8 or int8 matmuls."""
    group_size: Whole = 128
    """int4: weights per fp16 scale along each matrix's input."""
    weights_format: Annotated[object, Deferred("llmcalc.model.formats", "WeightFormats")] = None
    """Each component's weight format (llmcalc/model/formats.py `WeightFormats`); None: a quantised checkpoint's own
    formats (the spec's `checkpoint`) unless `weights_dtype` is given, else `weights_dtype`."""

    attention_core: Literal["causal", "causal-half", "dense"] = "causal"
    """Attention-core FLOPs: causal counts the unmasked (query, key) pairs only, S(S+1)/2 per full layer;
    causal-half the area under the mask, S²/2 (Megatron-LM, FlashAttention's benchmarks); dense the full S × S."""

    @property
    def step_attention(self) -> str:
        """The convention of decode steps and chunks (new tokens over a cache): causal-half stays causal-half,
        dense is causal there (a query over cached keys has no masked key)."""
        return "causal-half" if self.attention_core == "causal-half" else "causal"
    logits: Literal["last", "all"] = "last"
    """Prefill logits of the last position (inference) or of every position (scoring)."""
    mla_decode: Literal["absorbed", "decompress"] = "absorbed"
    """MLA decode in the latent space (up-projections absorbed), or re-projecting every cached latent."""
    mtp: bool = False
    """Count DeepSeek's multi-token-prediction module."""
    enforce_eager: bool = False
    """Inference without CUDA graphs (vLLM's --enforce-eager, TensorRT-LLM's PyTorch flow with use_cuda_graph off):
    the host launches each step's kernels one by one, so a step lasts at least its launches times the time model's
    launch_s; False: decode steps replayed from CUDA graphs, no such floor."""
    flash: bool = True
    """Flash attention: no S × S scores are held."""
    elementwise: bool = False
    """Count the element-wise FLOPs (norms, softmax, activations, residual adds, positions) as FLOPs rows."""
    embedding_matmul: bool = False
    """Count the input embedding as a one-hot matmul, 2·V·d per token (Kaplan et al. 2020, Hoffmann et al. 2022)."""

    train: bool = False
    """A training step (weights, gradients, optimizer states, activations) instead of inference."""
    optimizer: Literal["adamw", "adamw-8bit", "sgd"] = "adamw"
    recompute: Literal["none", "selective", "full"] = "none"
    """Training: activation recomputation (RECOMPUTE_MODES names the ops each redoes)."""
    recompute_ops: tuple[str, ...] | None = None
    """Training: a custom recompute policy, the ops redone in the backward pass (RECOMPUTE_OPS); None: those of
    `recompute`."""
    recompute_layers: Whole | None = None
    """Training's hardware FLOPs: how many layers, the first ones, redo the policy's ops (Megatron-LM's
    `--recompute-method block --recompute-num-layers`); None: every layer."""
    attention_kernel: Literal["flash", "eager"] = "flash"
    """Training's hardware FLOPs: flash recomputes the attention scores in its backward (2.5 × the core's forward),
    eager keeps them (2 ×)."""
    fusion: Literal["fused", "eager"] = "fused"
    """Training's element-wise passes (norms, activation, rotation): fused, one kernel each (Megatron, Transformer
    Engine, torch.compile), or eager, each PyTorch op its own kernel, moving more (llmcalc/costs/elementwise_traffic.py)
    and keeping more for the backward (llmcalc/costs/train_memory.py)."""
    dropout: bool = False
    """Training: dropout masks are kept (1 byte per element)."""
    zero: Literal[0, 1, 2, 3] = 0
    """Training: ZeRO stage, sharding optimizer states (1), + gradients (2), + weights (3) over dp (· cp, as
    Megatron's distributed optimizer shards over its data-parallel group with context parallelism)."""
    grad_dtype: Literal["fp32", "bf16", "fp16"] | None = None
    """Training: the gradients' type; None: the weights' (fp32: Megatron's main gradients, 18 bytes per
    parameter with Adam, 6 + 12 / dp with its distributed optimizer)."""
    micro_batch: Whole | None = None
    """Training: sequences one GPU runs at a time; None: its whole share, batch / dp."""
    lora_rank: Whole | None = None
    """Training: LoRA adapters of this rank on the `lora_targets` matrices, the base weights frozen; None: full
    training (docs/formulas.md#lora)."""
    lora_targets: tuple[str, ...] = TARGETS
    """Training with LoRA: the matrices adapted, by target name (q, k, v, o, gate, up, down; llmcalc/model/lora.py
    maps them onto each variant's matrices); default all seven, every linear of the layers, as QLoRA trains."""

    images: Annotated[int, Field(ge=0, le=MAX_SIZE, strict=True)] = 0
    """Images per sequence, each run through the model's vision tower; their image tokens are part of `seq`."""
    image_size: tuple[Whole, Whole] | None = None
    """One image's (height, width) in pixels before the processor resizes it; None: the tower's native size."""

    layout: Layout = Layout()
    reserve: float = 0.10
    """Share of GPU memory kept back for the CUDA context, allocator fragmentation and kernels' workspaces;
    0.10 matches vLLM's default gpu_memory_utilization of 0.9."""
    prefill_chunk: Whole = 8192
    """Tokens per prefill chunk, which sizes the activation workspace (vLLM: max_num_batched_tokens)."""
    expert_skew: float | None = None
    """Routed experts: the coefficient of variation of the experts' shares of the routed tokens in the traffic,
    which sets how much more the busiest expert-parallel rank computes and receives than the mean
    (llmcalc/costs/expert_balance.py); 0: uniform routing; None: EXPERT_SKEW for inference, 0 for training."""

    @model_validator(mode="before")
    @classmethod
    def _unset(cls, data):
        """A `weights_dtype`, `compute_dtype` or `group_size` of None is one not given: the checkpoint's formats,
        the matmul type each format runs in natively, int4's group of 128, then apply."""
        if isinstance(data, dict):
            data = {k: v for k, v in data.items()
                    if not (v is None and k in ("weights_dtype", "compute_dtype", "group_size"))}
        return data

    def shipped(self, spec: ModelSpec) -> bool:
        """Whether the checkpoint's own formats apply: it ships quantised, and neither `weights_format` nor
        `weights_dtype` is given (an unquantised checkpoint, fp32 or bf16, is run in `weights_dtype`)."""
        ckpt = spec.checkpoint
        return (self.weights_format is None and "weights_dtype" not in self.model_fields_set
                and ckpt is not None and ckpt.formats.quantized)

    def formats_given(self, spec: ModelSpec) -> bool:
        """Whether the weights come as formats (`weights_format`, or a quantised checkpoint's) rather than as
        `weights_dtype`."""
        return self.weights_format is not None or self.shipped(spec)

    def formats(self, spec: ModelSpec) -> "WeightFormats":
        """The weight format of every component: `weights_format`, else a quantised checkpoint's formats unless
        `weights_dtype` is given, else `weights_dtype` (WeightFormats.of_dtype; bf16 by default)."""
        if self.weights_format is not None:
            return self.weights_format
        if self.shipped(spec):
            return spec.checkpoint.formats
        from llmcalc.model.formats import WeightFormats

        return WeightFormats.of_dtype(self.weights_dtype, self.group_size)

    def absorbed(self, mixer, prefill: bool) -> bool:
        """Whether a step of `mixer` (an attention block, or None for a layer without one) runs MLA's absorbed
        decode: a latent cache, a decode (not a prefill) and `mla_decode` absorbed. The one place it is decided."""
        return mixer is not None and mixer.latent_cache and not prefill and self.mla_decode == "absorbed"

    def native_compute(self, spec: ModelSpec) -> bool:
        """Whether each matmul runs in its weights' native type (WeightFormat.compute) where the GPU has that unit:
        formats given (formats_given) and no `compute_dtype`."""
        return self.formats_given(spec) and "compute_dtype" not in self.model_fields_set

    @model_validator(mode="after")
    def _ranges(self) -> "Workload":
        require_sizes(batch=self.batch, seq=self.seq, gen=self.gen, encoder_seq=self.encoder_seq,
                      group_size=self.group_size,
                      micro_batch=self.micro_batch, prefill_chunk=self.prefill_chunk, lora_rank=self.lora_rank)
        if "weights_dtype" in self.model_fields_set and self.weights_format is not None:
            raise Unread("weights_dtype", "`weights_dtype` gives every weight one dtype, and `weights_format` names "
                         "each component's format, which sets it; give one of them")
        if "group_size" in self.model_fields_set and self.weights_format is not None:
            raise Unread("group_size", "`group_size` is the group of `weights_dtype` int4's scales; a format names "
                         "its own group (gptq-int4-g64), so leave it out beside `weights_format`")
        if "group_size" in self.model_fields_set and self.weights_dtype != "int4":
            raise Unread("group_size", "`group_size` is the group of `weights_dtype` int4's scales; give "
                         "`weights_dtype` int4, or leave it out (a format names its own group: gptq-int4-g64)")
        if "lora_targets" in self.model_fields_set and self.lora_rank is None:
            raise UserError("`lora_targets`: LoRA is off; add `lora_rank` (the adapters' rank), or drop the targets")
        unknown = [t for t in self.lora_targets if t not in TARGETS]
        if unknown or not self.lora_targets:
            what = f"unknown target {unknown[0]!r}" if unknown else "no target given"
            raise UserError(f"`lora_targets`: {what}; use a comma-separated list of {', '.join(TARGETS)}")
        for side in self.image_size or ():
            require_sizes(image_size=side)
        if self.recompute_ops is not None:
            unknown = [op for op in self.recompute_ops if op not in RECOMPUTE_OPS]
            if unknown:
                raise UserError(f"`recompute_ops`: unknown op {unknown[0]!r}; use a comma-separated list of "
                                f"{', '.join(RECOMPUTE_OPS)}")
            if self.recompute != "none":
                raise UserError(f"`recompute_ops`: a custom policy replaces `recompute` {self.recompute}; give one "
                                "of the two")
        if self.recompute_layers is not None:
            require_sizes(recompute_layers=self.recompute_layers)
        if self.recompute_layers is not None and not self.recomputed:
            raise UserError("`recompute_layers`: no op is recomputed; add `recompute` or `recompute_ops`, or drop "
                            "`recompute_layers`")
        if self.recompute_layers is not None and self.lora_rank is not None:
            raise UserError("`recompute_layers`: not modelled with LoRA adapters; recompute every layer (drop "
                            "`recompute_layers`) or drop `lora_rank`")
        if not 0 <= self.reserve < 1:
            raise UserError(f"`reserve`: {self.reserve} is not in [0, 1); give a share such as 0.1")
        if self.expert_skew is not None and not 0 <= self.expert_skew <= MAX_SKEW:
            raise UserError(f"`expert_skew`: {self.expert_skew} is not in [0, {MAX_SKEW:g}]; give a coefficient of "
                            f"variation such as {EXPERT_SKEW} (real traffic) or 0 (uniform routing)")
        return self

    @property
    def routing_skew(self) -> float:
        """The traffic's expert skew (`expert_skew`): as given, else EXPERT_SKEW for inference and 0 for training,
        whose router is balanced on the very batches it trains on (no published per-rank figure says otherwise)."""
        if self.expert_skew is not None:
            return self.expert_skew
        return 0.0 if self.train else EXPERT_SKEW

    @property
    def recomputed(self) -> frozenset[str]:
        """The ops redone in the backward pass: `recompute_ops`, else those of the `recompute` mode."""
        return frozenset(RECOMPUTE_MODES[self.recompute] if self.recompute_ops is None else self.recompute_ops)

    @property
    def recompute_label(self) -> str:
        """The policy as reports name it: the mode, or the custom ops comma-separated."""
        policy = self.recompute if self.recompute_ops is None else ",".join(self.recompute_ops) or "none"
        return policy if self.recompute_layers is None else f"{policy} in the first {self.recompute_layers} layers"

    @property
    def lora(self) -> frozenset[str] | None:
        """The LoRA targets when LoRA is on (`lora_rank` given), else None."""
        return frozenset(self.lora_targets) if self.lora_rank else None

    def check(self, spec: ModelSpec) -> None:
        """The layout must divide `spec` and the batch (Layout.check); images need a vision tower and fit in `seq`
        (check_images); `encoder_seq` needs an encoder-decoder (Stack.encoder_length)."""
        self.layout.check(spec, self.batch, uneven=self.train)
        self.check_images(spec)
        spec.stack.encoder_length(self.encoder_seq, self.seq)

    def image_pixels(self, spec: ModelSpec) -> tuple[int, int]:
        """(height, width) of one image: `image_size`, else the vision tower's native side squared."""
        if spec.vision is None:
            raise UserError(f"`image_size`: {spec.name} has no vision tower; drop `images` and `image_size`, or pick "
                            "a vision-language model")
        return self.image_size or (spec.vision.image_size, spec.vision.image_size)

    def image_tokens(self, spec: ModelSpec) -> int:
        """Image tokens in one sequence's prompt: `images` × the tower's tokens per image (0 without images, and 0
        for a tower whose tokens cross-attention reads instead: cross_image_tokens)."""
        if not self.images and (spec.vision is None or self.image_size is None):
            return 0
        if not spec.vision.in_prompt:
            return 0
        return self.all_image_tokens(spec)

    def cross_image_tokens(self, spec: ModelSpec) -> int:
        """Image tokens one sequence brings to cross-attention layers (Llama 3.2 Vision): `images` × tokens per
        image; 0 without images or for a tower whose tokens are in the prompt."""
        if not self.images or spec.vision is None or spec.vision.in_prompt:
            return 0
        return self.all_image_tokens(spec)

    def sized(self, spec: ModelSpec) -> ModelSpec:
        """`spec` as this workload runs it: its cross-attention layers sized for the workload's images
        (ModelSpec.for_images); unchanged without images, where the spec's own image_tokens stand (one image for
        the llama-3.2-11b-vision preset)."""
        tokens = self.cross_image_tokens(spec)
        return spec.for_images(tokens) if tokens else spec

    def all_image_tokens(self, spec: ModelSpec) -> int:
        """`images` × the tower's tokens per image of `image_size`."""
        try:
            return self.images * spec.vision.tokens(*self.image_pixels(spec))
        except ValueError as e:
            raise UserError(f"`image_size`: {e}") from None

    def check_images(self, spec: ModelSpec) -> None:
        """`images` need a vision tower, and their tokens must fit in the prompt of `seq` tokens."""
        if self.images and spec.vision is None:
            raise UserError(f"`images`: {spec.name} has no vision tower; drop `images`, or pick a vision-language "
                            "model (llava-1.5-7b, gemma3-4b, qwen2.5-vl-7b)")
        if self.images and spec.vision.check_images:
            spec.vision.check_images()
        tokens = self.image_tokens(spec)
        if tokens > self.seq:
            raise UserError(f"`images`: {self.images} images × {tokens // self.images:,} tokens = {tokens:,} image "
                            f"tokens exceed the {self.seq:,}-token prompt (`seq`); raise `seq` or use fewer images")
