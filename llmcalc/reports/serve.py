"""Typed results: a continuous-batching engine simulated under a stream of requests (`llmcalc serve`)."""

from typing import ClassVar

from pydantic import ConfigDict

from llmcalc.reports.base import Placement, Report

FINITE = ConfigDict(allow_inf_nan=False)
"""Every figure of a serve report is finite: a NaN or an infinity is refused as the report is built, so none
reaches a table or the JSON (which has neither)."""


class Spread(Report):
    """A latency over the completed requests, in seconds."""

    model_config = FINITE

    mean: float
    p50: float
    p90: float
    p99: float


class ServedRequest(Report):
    """One request as the simulated engine served it."""

    model_config = FINITE

    arrival_s: float
    """When it arrived, seconds from the start."""
    prompt: int
    output: int
    queue_s: float
    """From its arrival to the step that first ran it."""
    ttft_s: float
    """From its arrival to its first output token (the end of its last prompt chunk)."""
    tpot_s: float | None
    """(e2e − ttft) / (output − 1): the mean time between its output tokens; None for one output token."""
    e2e_s: float
    """From its arrival to its last output token."""
    preempted: int
    """Times its KV blocks were taken back (it then recomputed its prompt and the tokens it had generated)."""


class ServeReport(Placement):
    """A serving engine on `gpus` GPUs (dp replicas × pp virtual engines, each a scheduler of its own with
    its share of the KV memory) run step by step over `requests` requests. Each step runs the prompt chunks and
    decode tokens the scheduler picked in one forward, its time from the step-cost form under `time_model`.
    Throughput is over the run's duration (first arrival to last token); latencies over completed requests."""

    printed_by: ClassVar[str] = "serve"

    model_config = FINITE

    time_model: str
    requests: int
    duration_s: float
    """First arrival to last output token."""
    steps: int
    """Engine steps, summed over the engines."""
    load: str
    """The arrival process: a Poisson or constant rate (requests/s), a fixed concurrency, or a trace."""
    rate: float | None
    """Requests/s of the arrival process; None when all arrive at once, under a concurrency or a trace."""
    prompt: str
    output: str
    engine: str
    """The serving engine simulated (presets/engines/<engine>.yaml, or a file's name)."""
    engine_policy: str
    """decode-first: a step runs the running requests, then new prompts, together; prefill-first: new prompts in
    steps of their own while they wait."""
    overlap_scheduling: bool
    """Whether the engine plans each step while the one before runs, so that a request arriving while it is busy
    joins the step after the one already planned (docs/serving.md#overlap-scheduling)."""
    max_seqs: int
    max_batched_tokens: int
    block_size: int
    gpu_memory_utilization: float
    graph_max: int
    """The largest decode batch replayed from a CUDA graph (a smaller one is padded to the next captured size)."""
    prefix_hit: float
    speculative: str | None
    """Draft tokens per step and their acceptance rate, and the draft model or MTP; None without."""
    kv_blocks: int
    """KV blocks of `block_size` tokens one engine holds (a block's bytes: kv_bytes_per_block)."""
    kv_bytes_per_block: int
    """Bytes of one block of `block_size` tokens on one GPU."""
    kv_tokens: int
    """Tokens one engine's KV cache holds, kv_blocks × block_size: the figure a serving engine logs at start-up,
    to check against one's own log."""
    kv_log: str
    """kv_tokens as the engine's start-up log line words it (vLLM: "GPU KV cache size: N tokens")."""
    busiest_rank: float | None = None
    """Expert parallelism: the busiest rank's routed tokens over the mean rank's, which every step's routed experts
    and all-to-alls are timed at (as latency's); None without expert parallelism."""
    expert_skew: float | None = None
    """Expert parallelism: the traffic's skew it was computed at; None without it."""
    requests_per_s: float
    output_tokens_per_s: float
    requests_per_s_per_gpu: float
    output_tokens_per_s_per_gpu: float
    goodput_requests_per_s: float | None
    """Requests/s that met every given SLO (ttft ≤ slo_ttft_s and tpot ≤ slo_tpot_s); None without an SLO."""
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    ttft_s: Spread
    tpot_s: Spread
    ttft_s_range: list[float] | None = None
    """With --interval: [low, high], the range a measured median TTFT fell in on published runs of the engine
    (docs/intervals.md); None without it, or where no band exists."""
    tpot_s_range: list[float] | None = None
    """The same for the median TPOT."""
    output_tokens_per_s_range: list[float] | None = None
    """The same for output_tokens_per_s."""
    """Per request (e2e − ttft) / (output − 1), over requests with more than one output token."""
    e2e_s: Spread
    queue_s: Spread
    mean_concurrency: float
    """Time-average of the requests in the system (arrived, not finished), integrated step by step."""
    little_concurrency: float
    """Little's law: requests_per_s × mean e2e latency; equals mean_concurrency up to the step granularity."""
    mean_running: float
    """Time-average of the requests an engine runs in a step (decode or prefill), summed over engines."""
    kv_utilization: float
    """Time-average share of the KV blocks in use."""
    kv_peak_utilization: float
    preemptions: int
    """Requests whose blocks were taken back because the cache was full (recompute preemption)."""
    tokens_per_step: float | None
    """Mean output tokens per sequence per decode step under speculative decoding; None without."""
    timeline: list[ServedRequest]
    """Every request in arrival order."""
    formula: str
    notes: list[str]
