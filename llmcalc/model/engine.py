"""A serving engine as data: what differs between vLLM, SGLang, TensorRT-LLM and the bundled reference model when
they run the same model on the same GPUs (presets/engines/<name>.yaml, every figure with its source). The
simulator (llmcalc/views/serve.py) runs its scheduler; its time model is the (GPU, engine) profile where one is
bundled, the GPU's otherwise (llmcalc/inputs/time_models.py). See docs/serving.md#engines.

  scheduler   decode-first: each step runs the running requests first (their next tokens, their prompt's next
              chunk), then new prompts in what is left of the token budget, one forward for all (vLLM V1,
              TensorRT-LLM's in-flight batching); prefill-first: while a new prompt waits and fits, a step runs
              new prompts alone and the decodes wait for it (SGLang, whose mixed chunks are off by default)
  graphs      a decode step of B sequences replays the CUDA graph captured for the smallest size ≥ B, so it is
              timed as that many sequences (the padding rows cost matmul rows and a little attention); above the
              largest size the step runs eagerly
  KV pool     of total: utilisation · memory − weights − the activations of one step's tokens (vLLM, SGLang);
              of free: utilisation · (memory − weights − activations) (TensorRT-LLM's free_gpu_memory_fraction);
              the utilisation a tier's share, or 1 − a reserve rule of the step budget, the CUDA graphs, the
              instance's GPUs and attention replicas over the memory (SGLang's mem_fraction_static)
  host        seconds a step adds on the host that the GPU does not hide (scheduling, sampling, detokenising);
              None keeps the time model's step_s
  block fp8   the share of the fp8 peak its matmuls over 128 × 128 block-scaled fp8 weights reach, per GPU
              architecture where a kernel benchmark gives it; elsewhere the time model's fp8 efficiency
  attention DP  whether its token budget per step is each replica's, the deployment's divided over the replicas
              (SGLang's chunked_prefill_size // dp_size under --enable-dp-attention), or half of it (SGLang 0.4's)
  KV dtype    the engine's default cache dtype: the KV quantisation the checkpoint states, where the engine takes
              that quantiser's (vLLM ModelOpt's fp8, TensorRT-LLM's), else the model's dtype
  overlap     whether the scheduler plans a step while the one before it runs (vLLM's async scheduling, SGLang's
              and TensorRT-LLM's overlap schedulers): a request that arrives while the engine is busy joins the
              step after the one already planned, so its first token waits one step more than without
  admission   a prompt starts when the pool could hold it and its output less what the running requests are
              expected to still write, at a ratio that decays as decodes run (SGLang's new_token_ratio)
"""

from typing import Annotated, Literal

from pydantic import Field, model_validator

from llmcalc.errors import UserError
from llmcalc.model.base import SHARE_MIN, Frozen, Name, PosInt
from llmcalc.model.gpu import GPU, Architecture

Share = Annotated[float, Field(ge=SHARE_MIN, le=1)]
"""A share of a GPU's memory or peak: at least a millionth (a quotient by it stays finite), at most all of it."""
MAX_GRAPH_SIZES = 4096
"""The most CUDA-graph batch sizes an engine file may list."""


class Tier(Frozen):
    """The defaults an engine picks for a GPU of at least `min_gib` GiB of memory (engines size their batch, step
    budget, memory share and CUDA graphs by the GPU's memory)."""

    min_gib: Annotated[float, Field(ge=0, le=1e6)]
    not_gpus: list[str] = []
    """GPU presets this tier leaves out although their memory reaches min_gib (vLLM keeps the A100 in its small
    tier)."""
    max_num_seqs: PosInt
    """Most sequences in a step (vLLM max_num_seqs, SGLang max_running_requests, TensorRT-LLM max_batch_size)."""
    max_num_batched_tokens: PosInt
    """Most tokens in a step (vLLM max_num_batched_tokens, SGLang chunked_prefill_size, TensorRT-LLM
    max_num_tokens)."""
    memory_utilization: Share | None = None
    """vLLM gpu_memory_utilization, TensorRT-LLM free_gpu_memory_fraction, SGLang 0.4's mem_fraction_static; None:
    the engine's reserve rule."""
    memory_utilization_from_tp: dict[PosInt, Share] = {}
    """Tensor-parallel degree → the memory share from that degree on (SGLang 0.4 keeps more back at a larger
    tp_size); below every key, memory_utilization."""
    graph_max: Annotated[int, Field(ge=0, le=2**20, strict=True)]
    """The largest decode batch captured in a CUDA graph (0: none)."""
    graph_max_from_tp: dict[PosInt, Annotated[int, Field(ge=0, le=2**20, strict=True)]] = {}
    """Tensor-parallel degree → the largest captured decode batch from that degree on (SGLang captures more at
    tp ≥ 4); below every key, graph_max."""

    def memory_utilization_at(self, tp: int) -> float | None:
        """The memory share of an engine instance over `tp` tensor-parallel GPUs (None: the reserve rule's)."""
        wide = [u for t, u in sorted(self.memory_utilization_from_tp.items()) if tp >= t]
        return wide[-1] if wide else self.memory_utilization

    def graph_max_at(self, tp: int) -> int:
        """The largest captured decode batch of an engine instance over `tp` tensor-parallel GPUs."""
        wide = [n for t, n in sorted(self.graph_max_from_tp.items()) if tp >= t]
        return wide[-1] if wide else self.graph_max


class Reserve(Frozen):
    """MiB an engine keeps back from each GPU's memory for activations and CUDA graphs, as a rule of its settings
    and layout (SGLang's mem_fraction_static = 1 − reserve / memory, server_args.py _handle_gpu_memory_settings):
    base + per_step_token · max(max_batched_tokens, min_step_tokens) + per_graph_batch · graph_max + per_gpu ·
    tp · pp, and under data-parallel attention dp_attention · graph_max · dp (plus dp_attention_large · graph_max
    · dp where graph_max > large_graph); at least floor on a GPU of more than floor_above_gib. tp is the engine
    instance's tensor-parallel GPUs (its attention replicas' included), max_batched_tokens the whole instance's
    step budget."""

    base_mib: Annotated[float, Field(ge=0, le=2**30)]
    per_step_token_mib: Annotated[float, Field(ge=0, le=2**20)]
    min_step_tokens: Annotated[int, Field(ge=0, le=2**40, strict=True)]
    per_graph_batch_mib: Annotated[float, Field(ge=0, le=2**20)]
    per_gpu_mib: Annotated[float, Field(ge=0, le=2**30)]
    dp_attention_mib: Annotated[float, Field(ge=0, le=2**20)] = 0.0
    dp_attention_large_mib: Annotated[float, Field(ge=0, le=2**20)] = 0.0
    large_graph: Annotated[int, Field(ge=0, le=2**20, strict=True)] = 0
    floor_mib: Annotated[float, Field(ge=0, le=2**30)] = 0.0
    floor_above_gib: Annotated[float, Field(ge=0, le=1e6)] = 0.0

    def mib(self, memory_bytes: int, max_batched_tokens: int, graph_max: int, tp: int, pp: int,
            attention_dp: int) -> float:
        """The MiB kept back on a GPU of `memory_bytes`, the instance over tp · pp GPUs with `attention_dp` attention
        replicas (0: no data-parallel attention)."""
        mib = (self.base_mib + self.per_step_token_mib * max(max_batched_tokens, self.min_step_tokens)
               + self.per_graph_batch_mib * graph_max + self.per_gpu_mib * tp * pp)
        if attention_dp:
            mib += self.dp_attention_mib * graph_max * attention_dp
            if graph_max > self.large_graph:
                mib += self.dp_attention_large_mib * graph_max * attention_dp
        if memory_bytes > self.floor_above_gib * 2**30:
            mib = max(mib, self.floor_mib)
        return mib


class Admission(Frozen):
    """How a scheduler admits a prompt against its KV pool by expected use (SGLang's PrefillAdder): a waiting request
    starts only if its input (still to compute) plus its output still to write, at most clip_tokens of it, is below
    the pool's free tokens less a reserve: each running request's output still to write (at most clip_tokens) ×
    the ratio, and each request this step already admitted in whole, its input and output (at most clip_tokens).
    The ratio starts at init_ratio (× dp_attention_factor under data-parallel attention, at most 1), falls by
    (init − init · min_factor) / decay_steps each decode step to init · min_factor, returns to init when the
    engine is idle, and after a preemption is re-estimated from the running requests as (tokens they decoded +
    retract_steps · their number) / (their outputs + 1), at most 1."""

    init_ratio: Share
    min_factor: Share
    decay_steps: PosInt
    clip_tokens: PosInt
    retract_steps: Annotated[int, Field(ge=0, le=2**20, strict=True)]
    dp_attention_factor: Share = 1.0

    def initial(self, attention_dp: bool) -> float:
        """The ratio an engine starts with, and returns to when idle."""
        return min(1.0, self.init_ratio * (self.dp_attention_factor if attention_dp else 1.0))


class Engine(Frozen):
    """A serving engine: its scheduler, CUDA graphs, KV pool, host cost, kernels and fusions, each sourced."""

    name: Name
    label: str
    version: str
    """The engine version the defaults were read from."""
    policy: Literal["decode-first", "prefill-first"]
    """decode-first: running requests, then new prompts in the leftover budget, in one step; prefill-first: new
    prompts in a step of their own whenever one waits and fits."""
    chunked_prefill: bool
    """Whether a prompt longer than the step's token budget is split over steps; if not, the budget must hold the
    longest prompt."""
    budget_covers_context: bool = False
    """Whether the default step budget is at least the longest sequence the engine is launched for (its
    max_model_len), so that an unchunked prompt always fits a step (vLLM V0: max(max_model_len, 2048))."""
    tiers: list[Tier]
    """Defaults by GPU memory, largest min_gib first; the last has min_gib 0."""
    graph_sizes: list[PosInt]
    """Decode batch sizes the engine may capture, ascending; those up to the tier's graph_max are captured."""
    reserve: Reserve | None = None
    """The rule of the memory the engine keeps back (SGLang's), where its tiers give no memory_utilization."""
    memory_of: Literal["total", "free"]
    """The memory share is of the GPU's memory (weights inside it), or of what weights and activations leave."""
    profiles_activations: bool
    """Whether the engine measures one step's activations and keeps them from the KV pool (vLLM, TensorRT-LLM);
    if not, its share already leaves room for them (SGLang)."""
    admits_whole_prompt: bool
    """Whether a waiting request starts only when the cache could hold its whole prompt, not only its first chunk
    (vLLM's scheduler_reserve_full_isl, SGLang's prefill adder)."""
    reserves_whole_request: bool
    """Whether a request is admitted only when the blocks of its whole length (prompt and every output token) can
    be reserved, so that none is ever preempted (TensorRT-LLM's GUARANTEED_NO_EVICT)."""
    admission: Admission | None = None
    """The rule by which a prompt is admitted against the pool's expected use (SGLang's); None: by what the pool
    holds now (and admits_whole_prompt, reserves_whole_request)."""
    graph_padding: bool
    """Whether a decode batch is padded up to the next captured size; if not, a size not captured runs eagerly."""
    block_size: PosInt
    """Tokens per KV block (page)."""
    kv_log: str
    """The engine's log line with its KV capacity, `{tokens}` (or `{tokens:,}`) where the number stands, or
    `{blocks}` where it logs blocks of block_size tokens."""
    step_s: Annotated[float, Field(ge=0, lt=1)] | None = None
    """Host seconds per step the GPU does not hide; None: the time model's step_s."""
    request_s: Annotated[float, Field(ge=0, lt=1)] | None = None
    """Host seconds per request before the scheduler sees it (parsing, chat template, tokenising); None: the time
    model's request_s."""
    fp8: dict[Architecture, Share] = {}
    """Architecture → the share of the fp8 dense peak the engine's matmuls over fp8 weights with one scale per tensor
    (or per channel) reach: the time model's fp8_efficiency on a GPU of that architecture, which also times int8 and
    fp4 matmuls; none stated: the profile's."""
    block_fp8: dict[Architecture, Share] = {}
    """Architecture → the share of the fp8 peak the engine's matmuls over fp8 weights with a scale per 128 × 128
    block reach (the time model's block_fp8_efficiency on a GPU of that architecture); none stated: the time
    model's fp8_efficiency."""
    checkpoint_kv: list[Literal["modelopt fp8", "modelopt int8", "compressed-tensors fp8",
                                "compressed-tensors int8"]] = []
    """The KV quantisations a checkpoint may state (its quantiser and dtype: Checkpoint.kv_quantizer, kv_dtype)
    that the engine's default cache dtype ("auto") takes; for any other, and a checkpoint that states none, the
    model's dtype."""
    dp_attention_budget: Literal["per_replica", "divided", "halved"] = "per_replica"
    """Under data-parallel attention (Layout.attention_dp: replicas whose MoE layers span them), whether each
    replica's scheduler takes the whole max_batched_tokens a step, that budget divided over the dp replicas
    (SGLang: the whole deployment's), or half of it (SGLang 0.4: chunked_prefill_size // 2, each replica's)."""
    overlap_scheduling: bool = False
    """Whether the scheduler plans step k + 1 while step k runs on the GPU (vLLM's async scheduling, SGLang's and
    TensorRT-LLM's overlap schedulers): step k + 1 takes the requests that reached the scheduler by step k's
    start, so one arriving while the engine is busy waits for the step in flight and the one already planned;
    an idle engine takes a request at once."""
    overlap_off_under_pp: bool = False
    """Whether the engine turns its overlap scheduling off under pipeline parallelism (SGLang)."""
    fuses: list[str]
    """Element-wise passes fused into a neighbouring kernel (norm_residual, activation, rope, quant); the reference
    engine fuses none."""
    kernels: dict[str, str]
    """Which kernels run attention (prefill, decode, MLA) and the routed experts, by name."""
    sources: dict[str, str]
    """Where each figure comes from."""

    @model_validator(mode="after")
    def _check(self) -> "Engine":
        sizes = self.graph_sizes
        if len(sizes) > MAX_GRAPH_SIZES:
            raise UserError(f"`graph_sizes`: {len(sizes):,} sizes; give at most {MAX_GRAPH_SIZES:,}")
        if any(b <= a for a, b in zip(sizes, sizes[1:])):
            raise UserError("`graph_sizes`: give the captured batch sizes in ascending order, each once")
        if not self.tiers or self.tiers[-1].min_gib != 0 or self.tiers[-1].not_gpus:
            raise UserError("`tiers`: end with a tier of min_gib 0 and no not_gpus, the defaults of any GPU")
        if any(b.min_gib > a.min_gib for a, b in zip(self.tiers, self.tiers[1:])):
            raise UserError("`tiers`: give them largest min_gib first")
        if any((t.memory_utilization is None) == (self.reserve is None) for t in self.tiers):
            raise UserError("`tiers`: give each tier a memory_utilization, or the engine a `reserve` rule and no "
                            "tier one")
        if any(t.memory_utilization_from_tp and t.memory_utilization is None for t in self.tiers):
            raise UserError("`tiers`: a memory_utilization_from_tp needs the tier's memory_utilization, its share "
                            "below every degree it names")
        fields = self.kv_log.replace("{tokens:,}", "{tokens}").replace("{blocks:,}", "{blocks}")
        stands = fields.count("{tokens}") + fields.count("{blocks}")
        if stands != 1 or fields.count("{") != 1 or fields.count("}") != 1:
            raise UserError("`kv_log`: give the engine's log line with {tokens} (or {tokens:,} for thousands "
                            "separators) where the token count stands, or {blocks} where it logs blocks, and no "
                            "other braces")
        return self

    def stated_kv_dtype(self, checkpoint) -> str | None:
        """The KV dtype the engine runs a model with by default when it differs from the model's: the one
        `checkpoint` (a Checkpoint, or None) states, where the engine's default follows it; else None."""
        stated = getattr(checkpoint, "kv_dtype", None)
        return stated if f"{getattr(checkpoint, 'kv_quantizer', None)} {stated}" in self.checkpoint_kv else None

    def settings(self, gpu: GPU, layout=None, eager: bool = False, context: int | None = None,
                 overlap: bool = True,
                 named: tuple[str, str | None] = ("max_batched_tokens", "gpu_memory_utilization"),
                 **given: float | int | None) -> "Settings":
        """What the engine runs with on `gpu`: its tier's defaults, each value in `given` (not None) in place of the
        engine's. `layout` (a Layout; None: one GPU) is the deployment an engine instance serves: its
        tensor-parallel GPUs (an attention-DP instance's replicas included) and stages set the CUDA graphs and
        reserve of an engine whose defaults depend on them. `eager`: launched without CUDA graphs (vLLM's
        --enforce-eager): none captured, none padded to, none reserved. `context`: the longest sequence the
        engine is launched for (its max_model_len), the step budget's floor where budget_covers_context.
        `overlap`: False where the launch turns the engine's overlap scheduling off (SGLang's
        --disable-overlap-schedule, vLLM's --no-async-scheduling). `named`: the fields an error names for the step
        budget and the memory share (`fit` gives them as prefill_chunk and reserve; `plan`, which takes neither,
        as the engine and None)."""
        tier = next(t for t in self.tiers if gpu.memory_bytes >= t.min_gib * 2**30 and gpu.name not in t.not_gpus)
        tp, pp, replicas = 1, 1, 0
        if layout is not None:
            replicas = layout.dp if layout.attention_dp else 0
            tp, pp = layout.tp * max(replicas, 1), layout.pp
        budget = tier.max_num_batched_tokens
        if self.budget_covers_context and context is not None:
            budget = max(budget, context)
        values = dict(max_seqs=tier.max_num_seqs, max_batched_tokens=budget, block_size=self.block_size)
        values |= {k: v for k, v in given.items() if v is not None}
        for name in ("max_seqs", "max_batched_tokens", "block_size"):
            if not 1 <= values[name] <= 2**40:
                raise UserError(f"`{name}`: {values[name]:,} is out of range; give at least 1")
        graph_max = 0 if eager else tier.graph_max_at(tp)
        if "gpu_memory_utilization" not in values:
            if tier.memory_utilization is not None:
                values["gpu_memory_utilization"] = tier.memory_utilization_at(tp)
            else:
                kept = self.reserve.mib(gpu.memory_bytes, values["max_batched_tokens"], graph_max, tp, pp, replicas)
                values["gpu_memory_utilization"] = round(1 - kept * 2**20 / gpu.memory_bytes, 12)
                if values["gpu_memory_utilization"] < SHARE_MIN:
                    self._kept_too_much(gpu, values["max_batched_tokens"], kept, graph_max, tp, pp, replicas, named)
        if not SHARE_MIN <= values["gpu_memory_utilization"] <= 1:
            raise UserError(f"`gpu_memory_utilization`: {values['gpu_memory_utilization']!r} is not in (0, 1] (at "
                            "least a millionth); give a share such as 0.9")
        graph_max = min(graph_max, values["max_batched_tokens"])
        return Settings(engine=self, graphs=tuple(b for b in self.graph_sizes if b <= graph_max),
                        overlap=overlap and self.overlaps(pp), **values)

    def _kept_too_much(self, gpu: GPU, budget: int, kept: float, graph_max: int, tp: int, pp: int, replicas: int,
                       named: tuple[str, str | None]) -> None:
        """The reserve rule keeps back more than the GPU: the step budget's error where a one-token step would
        leave room, else the engine's own."""
        mib = gpu.memory_bytes / 2**20
        least = self.reserve.mib(gpu.memory_bytes, 1, graph_max, tp, pp, replicas)
        if 1 - least / mib < SHARE_MIN:
            share = f"give `{named[1]}` in its place, or " if named[1] else "give "
            raise UserError(f"`engine`: {self.label}'s reserve rule keeps back {least:,.0f} MiB of each GPU even "
                            f"for a one-token step, more than {gpu.name}'s {mib:,.0f} MiB; {share}a smaller reserve "
                            "in the engine file")
        fix = ("give a smaller max_num_batched_tokens or reserve in the engine file" if named[0] == "engine" else
               "give a smaller step budget")
        raise UserError(f"`{named[0]}`: {self.label} keeps back {kept:,.0f} MiB of each GPU for a step of {budget:,} "
                        f"tokens (its reserve rule), more than {gpu.name}'s {mib:,.0f} MiB; {fix}")

    def overlaps(self, pp: int) -> bool:
        """Whether an instance over `pp` pipeline stages schedules with overlap (overlap_scheduling)."""
        return self.overlap_scheduling and not (self.overlap_off_under_pp and pp > 1)


class Settings(Frozen):
    """One engine's settings on one GPU: the knobs a run uses (vLLM's names), the user's where given."""

    engine: Engine
    max_seqs: PosInt
    max_batched_tokens: PosInt
    block_size: PosInt
    gpu_memory_utilization: Share
    graphs: tuple[int, ...]
    """The decode batch sizes captured in CUDA graphs, ascending."""
    overlap: bool = False
    """Whether the scheduler plans each step while the one before it runs (Engine.overlap_scheduling, on for this
    layout and launch)."""
    admission_ratio: float | None = None
    """The engine's admission ratio at the start and when idle (Admission.initial); None: no such rule."""

    def per_replica(self, layout) -> "Settings":
        """The settings each replica's scheduler runs with under `layout` (a Layout): these, but under data-parallel
        attention an engine that divides its token budget over the replicas gives each max_batched_tokens // dp,
        one that halves it max_batched_tokens // 2 (each at least 1), and an admission rule starts at its ratio
        for data-parallel attention."""
        update = {}
        if self.engine.admission is not None:
            update["admission_ratio"] = self.engine.admission.initial(bool(layout.attention_dp))
        if layout.attention_dp and self.engine.dp_attention_budget != "per_replica":
            share = layout.dp if self.engine.dp_attention_budget == "divided" else 2
            update["max_batched_tokens"] = max(1, self.max_batched_tokens // share)
        return self.model_copy(update=update) if update else self

    def graph_batch(self, batch: int) -> int:
        """The batch a decode step of `batch` sequences runs as: the smallest captured size ≥ batch where the engine
        pads; batch itself above the largest, without padding, or with no graphs (eager)."""
        from bisect import bisect_left

        i = bisect_left(self.graphs, batch)
        return self.graphs[i] if i < len(self.graphs) and self.engine.graph_padding else batch

    @property
    def reserve(self) -> float:
        """The share of GPU memory the engine leaves out of its pool: 1 − gpu_memory_utilization (to 12 places,
        so 0.92 leaves 0.08, not its binary neighbour)."""
        return round(1 - self.gpu_memory_utilization, 12)

    def kv_log(self, tokens: int) -> str:
        """The log line the engine prints for a KV pool of `tokens` tokens."""
        return self.engine.kv_log.format(tokens=tokens, blocks=tokens // self.block_size)
