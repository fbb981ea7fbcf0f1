"""Typed results: What fits on the GPUs (`llmcalc fit`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Placement, Report


class FitLayout(Report):
    """A layout: gpus = tp · pp · dp, experts over ep of them."""

    gpus: int
    tp: int
    pp: int
    dp: int
    ep: int


class FitReport(Placement):
    """Whether a model and workload fit in the GPUs' memory, per GPU.

    usable = capacity · (1 − reserve); kv budget = usable − weights − activation workspace.
    max_batch: most sequences of `seq` tokens the budget holds (all replicas). max_seq: longest
    context for `batch` sequences, capped at the model's max_seq_len (max_seq_memory: uncapped,
    None when sliding-window layers make the cache stop growing).
    """

    printed_by: ClassVar[str] = "fit"

    weights_dtype: str
    kv_dtype: str
    batch: int
    seq: int
    capacity_bytes: int
    reserve: float
    usable_bytes: int
    weights_bytes: int
    activation_bytes: int
    kv_budget_bytes: int
    kv_bytes: int
    """KV cache of `batch` × `seq` on one GPU."""
    total_bytes: int
    """weights + activation workspace + kv_bytes on one GPU."""
    fits: bool
    max_batch: int
    max_seq: int
    max_seq_memory: int | None
    max_seq_limited_by: str
    engine: str | None = None
    """The serving engine whose KV pool the budget is (its reserve, workspace and memory rule); None: the plain
    rule usable − weights − workspace at `reserve`."""
    kv_pool_tokens: int | None = None
    """Tokens the engine's KV pool holds (per engine of a pipeline), in whole blocks, as the engine logs it."""
    kv_log: str | None = None
    """The engine's log line for that pool (vLLM: "GPU KV cache size: N tokens"), to check against your own."""
    smallest_fit: FitLayout | None = None
    """When it does not fit: the fewest GPUs of this kind that hold the workload (dp and ep kept), None
    when it fits or no layout of up to 4,096 GPUs does."""
    time_model: str
    """roofline (the physical bound) or calibrated (the GPU's profile): see `llmcalc latency`."""
    ttft_s: float | None
    """Seconds to the first token: the prefill of `batch` × `seq` (None when it does not fit)."""
    tpot_s: float | None
    """Seconds of one decode step of `batch` sequences at context `seq` (None when it does not fit)."""
    decode_tokens_per_s: float | None
    """Tokens per second all GPUs decode at `batch` × `seq`: batch / tpot (None when it does not fit)."""
    max_batch_tokens_per_s: float | None
    """Decode tokens per second at max_batch sequences of `seq`: the most this layout serves at this context
    (None when not one sequence fits)."""
    formula: str
    notes: list[str]
