"""Typed results: deployments of a model ranked under a load and latency targets (`llmcalc plan`)."""

from typing import ClassVar

from pydantic import model_serializer

from llmcalc.reports.base import Report


class PrefillPool(Report):
    """The prefill GPUs of a disaggregated deployment (its decode GPUs are the candidate's tp/pp/ep/dp)."""

    gpus: int
    tp: int
    dp: int
    kv_transfer_s: float
    """One mean prompt's KV cache sent to the decode pool: bytes / (link · comm efficiency) + the link's latency."""


class PlanCandidate(Report):
    """One deployment: a layout of one GPU kind, the weights' dtype and the engine's max_seqs."""

    gpu: str
    gpus: int
    """GPUs in all (a disaggregated deployment: prefill and decode)."""
    tp: int
    pp: int
    ep: int
    dp: int
    weights_dtype: str
    """bf16 or fp8 (the matmuls in that type); a checkpoint that ships quantised, the formats it quantises in
    (fp8-block, gptq-int4-g128, experts mxfp4): its weights as shipped (`shipped`)."""
    shipped: bool
    """The weights as the checkpoint ships them, quantised: the only way a plan runs such a checkpoint."""
    kv_dtype: str
    """The KV cache's dtype: the weights' (bf16, fp8); for a shipped checkpoint, the engine's default (the dtype the
    checkpoint states where the engine takes it, else bf16)."""
    max_seqs: int
    disaggregated: bool
    prefill: PrefillPool | None
    meets_slo: bool
    """p99 TTFT and p99 TPOT within the targets: simulated when `simulated`, else estimated in closed form."""
    simulated: bool
    """Whether `llmcalc serve`'s simulator confirmed the figures (the finalists), or they are the closed-form
    first pass."""
    output_tokens_per_s_per_gpu: float
    """Output tokens/s the deployment delivers at the load, over its GPUs: the offered load's, whatever the
    deployment (rate · mean output / gpus)."""
    full_batch: int
    """Sequences one engine (a dp replica's pp virtual engines each) runs when full: max_seqs, or fewer where its KV
    memory holds fewer requests at the full mean length (prompt + output)."""
    kv_tokens: int
    """Tokens one (decode) engine's KV cache holds, as `serve` reports it and the engine logs it at start-up."""
    saturation_tokens_per_s: float
    """Output tokens/s the deployment sustains with every engine full: dp · pp · full_batch / t_decode(full_batch)
    at context prompt + output/2, decode steps alone (prompts not counted: an upper bound). Disaggregated: the decode
    pool's, times output / (output − 1) (the prefill pool makes each request's first token), and at most the prefill
    pool's dp / t_prefill(prompt) requests/s · output."""
    headroom: float
    """saturation_tokens_per_s over the offered output tokens/s (rate · mean output): how many times the load the
    deployment could take; at least 1 for a deployment that keeps up."""
    usd_per_million_tokens: float | None
    """GPUs · price_per_hour / (output tokens per hour) · 10⁶; None without a price."""
    ttft_p99_s: float
    tpot_p99_s: float
    utilization: float
    """Share of the engines' time the load keeps busy (closed form): prefill and decode steps."""


class ShellCommand(Report):
    """A command as its words and as one shell-quoted line."""

    argv: list[str]
    line: str
    """The words joined for a POSIX shell (shlex.join)."""


class EmittedCommands(Report):
    """The engine's commands for one listed deployment (`llmcalc plan --emit`): its server with every setting the
    plan depends on, and the engine's own serving benchmark at the plan's load. Both are None, and `unsupported`
    says why in one line, where the deployment cannot be expressed on the engine."""

    engine: str
    candidate: int
    """The deployment's rank in `candidates`, from 1."""
    model: str
    """The Hugging Face repo id the model preset's source names, or a placeholder to replace (`model_placeholder`)."""
    model_placeholder: bool
    launch: ShellCommand | None
    benchmark: ShellCommand | None
    result_file: str | None
    """The file the benchmark writes its results to (JSON), in the directory it runs in."""
    unsupported: str | None
    notes: list[str]


class PlanReport(Report):
    """Deployments that meet the targets, best first: the cheapest per million output tokens (then the most output
    tokens/s per GPU). A closed-form pass over every candidate prunes; the simulator confirms the finalists."""

    printed_by: ClassVar[str] = "plan"

    model: str
    gpus: list[str]
    max_gpus: int
    rate: float
    """Requests/s offered (Poisson)."""
    prompt: str
    output: str
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    searched: int
    """Candidates the closed-form pass evaluated."""
    feasible: int
    """Candidates whose engines keep up with the load and whose estimates meet the targets."""
    simulated: int
    search_s: float | None = None
    """Seconds the closed-form pass took: wall-clock, so present only when asked for (`llmcalc plan --timings`);
    without it the output is the same bytes on every run."""
    candidates: list[PlanCandidate]
    formula: str
    notes: list[str]
    emit: EmittedCommands | None = None
    """The engine's launch and benchmark commands for one deployment: present only when asked for (`llmcalc plan
    --emit`)."""

    @model_serializer(mode="wrap")
    def _timings_only_when_asked(self, handler):
        data = handler(self)
        if self.search_s is None:
            data.pop("search_s", None)
        if self.emit is None:
            data.pop("emit", None)
        return data
