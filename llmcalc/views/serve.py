"""`llmcalc serve`: a continuous-batching engine (vLLM, SGLang, TensorRT-LLM) simulated step by step under a
stream of requests. See docs/serving.md.

An engine is one replica of the layout (tp · pp · ep GPUs); pp stages run pp micro-batches at once, so a replica
is pp virtual engines, each with 1/pp of the KV memory; dp replicas are dp × pp engines in all, and requests go to
them in turn (round robin, in arrival order). Where the experts span the replicas (ep > tp: attention
data-parallel, the MoE layers over all the GPUs), the engines step together (drive): each step ends with the
slowest one's, an idle engine waiting in its idle forward. Each engine loops over steps, as vLLM's scheduler does:

  1. running requests first, oldest first: a decoding one schedules its next token (1 + k draft tokens under
     speculative decoding), one still in its prompt the rest of it, up to the step's token budget
     (max_batched_tokens: chunked prefill). A request whose new tokens need KV blocks the cache lacks takes them
     from the newest running request, which is preempted: its blocks are freed and it goes back to the front of
     the queue, to recompute its prompt and the tokens it has generated (vLLM's recompute preemption);
  2. then waiting requests that have arrived, first come first served, while the budget, max_seqs and the
     cache allow: each starts its prompt (a prefix-cache hit skips that share of it) with a chunk;
  3. the step's time is EngineStep's (llmcalc/costs/engine_step.py): one forward over every chunk and decode
     token, the weights read once; a request whose prompt completes emits its first token at the step's end, a
     decoding one its next (under speculative decoding, 1 + the draft tokens accepted).

Steps in which every running request decodes and nothing else happens run in one pass (_Sim.decode_stretch),
each still timed and counted as above: the report is the step-by-step loop's, without its scheduling per step.

Memory: the KV budget per GPU is capacity · gpu_memory_utilization − weights − the activation workspace of a
max_batched_tokens chunk; a request holds ⌈tokens / block_size⌉ blocks, each block's bytes as `llmcalc kv`
counts block_size tokens. Latencies: TTFT = first token − arrival, TPOT = (e2e − TTFT) / (output − 1),
queueing = first scheduled − arrival.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from llmcalc.costs.capacity import engine_pool, serving_kv_budget
from llmcalc.costs.engine_step import EngineStep
from llmcalc.costs.shard import kv_per_gpu
from llmcalc.costs.step_time import block_scaled_note, busiest_of, expert_parallel_note
from llmcalc.errors import UserError
from llmcalc.inputs.requests import MAX_ARRIVAL_S, Lengths, check_requests
from llmcalc.model.engine import Settings
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import TimeModel
from llmcalc.model.units import ceil_div
from llmcalc.reports.serve import ServedRequest, ServeReport, Spread
from llmcalc.workload import Workload

FORMULA = ("each step: one forward over the scheduled prompt chunks and decode tokens (EngineStep: weights read "
           "once, attention per sequence's context); TTFT = first token − arrival; TPOT = (e2e − TTFT) / "
           "(output − 1); throughput over first arrival … last token")


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding: k draft tokens per step, each accepted with probability `acceptance` while the ones
    before it were (so a step yields 1 + accepted tokens); the draft runs `draft` (an EngineStep) k times a step."""

    tokens: int
    acceptance: float
    draft: EngineStep
    label: str


def speculative(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel, tokens: int, acceptance: float,
                draft: ModelSpec | None, step_tokens: int) -> Speculative:
    """Speculative decoding of `spec` with the `draft` model on the same GPUs and layout, or (None) with the
    model's own MTP modules; a sequence verifies its 1 + `tokens` in one step of at most `step_tokens`."""
    if not 0 <= acceptance < 1:
        raise UserError(f"`acceptance`: {acceptance:g} is not in [0, 1); give a chance such as 0.7")
    if tokens < 1:
        raise UserError("`spec_tokens`: give at least 1 draft token per step")
    if tokens + 1 > step_tokens:
        raise UserError(f"`spec_tokens`: a sequence verifies its {tokens:,} draft tokens and one more in one step, "
                        f"beyond the engine's {step_tokens:,} tokens a step (`max_batched_tokens`); give fewer")
    if draft is None:
        if not spec.mtp_modules:
            raise UserError(f"`mtp`: {spec.name} has no MTP modules (mtp_modules 0); give a draft model with `draft`")
        return Speculative(tokens, acceptance, EngineStep(spec, gpu, w, tm, mtp=True),
                           f"MTP, {tokens} draft tokens, acceptance {acceptance:g}")
    if draft.vocab_size != spec.vocab_size:
        raise UserError(f"`draft`: {draft.name}'s vocabulary ({draft.vocab_size:,}) is not {spec.name}'s "
                        f"({spec.vocab_size:,}); a draft model must share the tokenizer")
    w.layout.check(draft, w.layout.dp)
    return Speculative(tokens, acceptance, EngineStep(draft, gpu, w, tm),
                       f"draft {draft.name}, {tokens} draft tokens, acceptance {acceptance:g}")


@dataclass(frozen=True)
class Load:
    """How requests arrive: `rate` requests/s (Poisson, or evenly spaced when `constant`; inf: all at once), or
    `concurrency` clients each sending its next request when its last finishes."""

    rate: float | None = None
    constant: bool = False
    concurrency: int | None = None

    def __post_init__(self) -> None:
        if self.rate is not None and not self.rate > 0:
            raise UserError(f"`rate`: {self.rate:g} is not a positive number of requests/s; give e.g. 4, or inf")
        if self.concurrency is not None and self.concurrency < 1:
            raise UserError("`concurrency`: give at least 1 client")

    @property
    def finite_rate(self) -> float | None:
        """The rate requests arrive at, when they arrive at one: None all at once, under a concurrency or a trace."""
        return self.rate if self.concurrency is None and self.rate not in (None, float("inf")) else None

    def __str__(self) -> str:
        if self.concurrency is not None:
            return f"concurrency {self.concurrency}"
        if self.rate == float("inf"):
            return "all at once"
        return f"{'constant' if self.constant else 'Poisson'} {self.rate:g} requests/s"


@dataclass(frozen=True)
class SLO:
    """Latency targets a request must meet to count in goodput (None: no target)."""

    ttft_s: float | None = None
    tpot_s: float | None = None

    def __post_init__(self) -> None:
        for name, target in (("slo_ttft", self.ttft_s), ("slo_tpot", self.tpot_s)):
            if target is not None and not 0 < target < float("inf"):
                raise UserError(f"`{name}`: {target:g} is not a finite time above 0; give seconds, e.g. 0.5")


class Request:
    """A request's state in the engine."""

    __slots__ = ("arrival", "ready", "prompt", "output", "hit", "computed", "generated", "held", "blocks",
                 "scheduled", "first", "finish", "preempted")

    def __init__(self, arrival: float, prompt: int, output: int, hit: int):
        self.arrival, self.prompt, self.output, self.hit = arrival, prompt, output, hit
        self.ready = arrival  # when the scheduler sees it: arrival + the host's request_s (_Sim.run)
        self.computed = 0  # tokens whose KV the engine holds
        self.generated = 0  # output tokens emitted
        self.held, self.blocks = 0, 0  # KV bytes and blocks allocated
        self.scheduled = self.first = self.finish = None
        self.preempted = 0

    @property
    def known(self) -> int:
        """Tokens the request has: its prompt and the output so far."""
        return self.prompt + self.generated


def make_requests(n: int, prompt: Lengths, output: Lengths, load: Load, seed: int) -> list[tuple[float, int, int]]:
    """n (arrival, prompt, output) rows, deterministic for `seed`; n at most MAX_REQUESTS, arrivals at most
    MAX_ARRIVAL_S. Under `concurrency`, arrivals are 0: the clients release them (simulate)."""
    check_requests(n)
    rng = random.Random(seed)
    rows, t, rate = [], 0.0, load.finite_rate
    for _ in range(n):
        if rate is not None:
            t += 1 / rate if load.constant else rng.expovariate(rate)
            if not t <= MAX_ARRIVAL_S:
                raise UserError(f"`rate`: {rate:g} requests/s spreads {n:,} requests past {MAX_ARRIVAL_S:g} s; give "
                                "a higher rate or fewer requests")
        rows.append((t, prompt.draw(rng), output.draw(rng)))
    return rows


MAX_OUTPUT_TOKENS = 1 << 25
"""Most output tokens a run simulates (33.6 M), a plan's simulations in all: each is a unit of the step loop's
work, about 400,000 a second on this project's 2-core CI machine (8 M in 19 s), so a run stays within a minute or
two."""
MAX_STEPS = 1 << 23
"""Most steps a run's engines take in all (8.4 M): a step is a pass of the loop, about 100,000 a second there at one
sequence or a one-token budget (2 M in 23 s). A run that must take more even with every token batched is refused
before it starts (check_work); one whose requests share fewer steps, when it passes the bound (drive)."""


def check_work(rows: list[tuple[float, int, int]], engine: Settings, clients: int | None, draft_k: int,
               lockstep: int = 1) -> None:
    """Refuse a run whose work is past the bounds above, before it starts, naming the input that sets it: its
    output tokens; the steps its engines need at the least, in all (every token within a step's budget, every
    output token in a step of at most max_seqs sequences or clients, 1 + draft_k each, and the longest output
    one step after another, times the `lockstep` replicas that take each of those steps together)."""
    output = sum(o for _, _, o in rows)
    if output > MAX_OUTPUT_TOKENS:
        raise UserError(f"`requests`: {len(rows):,} requests hold {output:,} output tokens, more than the "
                        f"{MAX_OUTPUT_TOKENS:,} a run simulates; give fewer requests or shorter `output`")
    per_step = min(engine.max_seqs, engine.max_batched_tokens)
    seqs = "concurrency" if clients is not None and clients < per_step else "max_seqs"
    tokens = sum(p + o for _, p, o in rows)
    need = {"max_batched_tokens": tokens / engine.max_batched_tokens,
            seqs: output / (min(per_step, clients or per_step) * (1 + draft_k)),
            "output": max(o for _, _, o in rows) / (1 + draft_k) * lockstep}
    field, steps = max(need.items(), key=lambda kv: kv[1])
    together = f" on each of {lockstep:,} replicas stepping together" if lockstep > 1 else ""
    if steps > MAX_STEPS:
        raise UserError(f"`{field}`: these {len(rows):,} requests need at least {steps:,.0f} engine steps, more than "
                        f"the {MAX_STEPS:,} a run may take; give a larger `{field}`" if field != "output" else
                        f"`output`: an output of {steps / lockstep * (1 + draft_k):,.0f} tokens takes "
                        f"{steps / lockstep:,.0f} steps{together}, more than the {MAX_STEPS:,} a run may take; give "
                        "a shorter one" + (" or fewer replicas (`dp`)" if together else ""))


def check_kv_work(rows: list[tuple[float, int, int]], held: Callable[[int], int], budget: int, draft_k: int) -> None:
    """Refuse, before it starts, a run whose KV cache holds so few of its requests at once that its engines need
    more than MAX_STEPS steps in all (least_kv_steps); not counted where every output token held at the longest
    request's KV stays within the bound (most runs: a moment saved)."""
    if sum(o for _, _, o in rows) * held(max(p + o for _, p, o in rows)) <= MAX_STEPS * budget:
        return
    steps = least_kv_steps(rows, held, budget, draft_k)
    if steps > MAX_STEPS:
        raise UserError(f"`requests`: the KV cache ({budget / 1e9:.2f} GB per GPU) holds so few of these "
                        f"{len(rows):,} requests at once that their decodes need at least {steps:,.0f} engine steps, "
                        f"more than the {MAX_STEPS:,} a run may take; give fewer or shorter requests, more GPUs "
                        "(`tp`) or a smaller `kv_dtype`")


KV_RUNS = 16
"""Runs of equal length a request's decode steps are split into by least_kv_steps, each counted at the KV its first
step holds (at most 1/KV_RUNS of the bound is lost)."""


def least_kv_steps(rows: list[tuple[float, int, int]], held: Callable[[int], int], budget: int,
                   draft_k: int) -> float:
    """The fewest steps the engines of a run can take, counted by KV memory: a request's s-th decode step holds at
    least its prompt + s tokens (each step adds at least one), `held(tokens)` bytes on a GPU (non-decreasing in
    tokens), it has at least ⌈(output − 1) / (1 + draft_k)⌉ of them, and the requests of one step hold at most
    `budget` bytes; so the steps of all engines number at least Σ bytes held over every request's decode steps /
    budget. Each request is counted in KV_RUNS runs of steps at their first step's tokens, read off a grid below
    them (64 points per doubling) so that `held` is asked once per grid point; a lower bound still."""
    seen: dict[int, int] = {}

    def at_least(tokens: int) -> int:
        grid = tokens >> max(0, tokens.bit_length() - 7) << max(0, tokens.bit_length() - 7)
        b = seen.get(grid)
        if b is None:
            b = seen[grid] = held(grid)
        return b

    total = 0
    for _, p, o in rows:
        m = ceil_div(o - 1, 1 + draft_k)
        runs = min(KV_RUNS, m)
        for g in range(runs):
            first, last = g * m // runs, (g + 1) * m // runs  # steps first + 1 … last
            total += (last - first) * at_least(p + first + 1)
    return total / budget


MAX_VISITS = 1 << 26
"""Most running requests a run's schedulers pass over, step by step (67 M; a step of 1,000 running requests is
1,000): about 1 M a second there, where a step budget of a few tokens makes a step per prompt token, each passing
over every request running (SGLang's prefill-first loop at --max-batched-tokens 1 passed 2,000 requests' worth
for minutes). A run's decodes visit each request once per output token, at most MAX_OUTPUT_TOKENS in all: twice
that leaves room for its prompt steps and preemptions."""
STEPS_PER_TOKEN = 20
"""The most steps an engine may run per prompt and output token of its requests: a bound on a run's work that a
cache preempting its requests in turn would otherwise not have (a step makes at least one token's progress unless
it preempts)."""


class _Sim:
    """One engine's loop (module docstring)."""

    def __init__(self, step: EngineStep, engine: Settings, budget: int, block_bytes: dict[int, int],
                 spec_dec: Speculative | None, rng: random.Random):
        self.step, self.engine, self.budget, self.spec_dec, self.rng = step, engine, budget, spec_dec, rng
        self.block_bytes = block_bytes  # blocks → bytes on one GPU, filled as needed
        self.kv_of: Callable[[int], int] = lambda blocks: 0
        self.used = 0
        self.now = 0.0
        self.steps = self.preemptions = 0
        self.visits = 0  # running requests its scheduler passed over, step by step (MAX_VISITS)
        self.area = self.running_area = self.kv_area = 0.0  # ∫ requests in system, ∫ running, ∫ KV share
        self.kv_peak = 0.0
        self.accepted = self.verified = 0
        self.ratio = engine.admission_ratio  # the admission rule's current ratio (Admission), None without one

    def blocks_bytes(self, blocks: int) -> int:
        b = self.block_bytes.get(blocks)
        if b is None:
            b = self.block_bytes[blocks] = self.kv_of(blocks)
        return b

    def grow(self, r: Request, tokens: int) -> bool:
        """Allocate blocks so `r` holds `tokens` tokens; False if the cache lacks them."""
        blocks = ceil_div(tokens, self.engine.block_size)
        if blocks <= r.blocks:
            return True
        need = self.blocks_bytes(blocks)
        if self.used - r.held + need > self.budget:
            return False
        self.used += need - r.held
        r.held, r.blocks = need, blocks
        return True

    def free_tokens(self) -> float:
        """Tokens the cache has room for now, at one block's bytes per block_size tokens."""
        return (self.budget - self.used) / self.blocks_bytes(1) * self.engine.block_size

    def admitted(self, running: list[Request], decoded: bool, preempted: bool) -> None:
        """The admission ratio after a step: re-estimated from the running requests after a preemption, else
        lowered by its decay after a step of decodes (Admission)."""
        rule, init = self.engine.engine.admission, self.engine.admission_ratio
        if rule is None:
            return
        if preempted:
            self.ratio = min(1.0, (sum(r.generated for r in running) + rule.retract_steps * len(running))
                             / (sum(r.output for r in running) + 1))
        elif decoded:
            low = init * rule.min_factor
            self.ratio = max(self.ratio - (init - low) / rule.decay_steps, low)

    def fits(self, r: Request, tokens: int) -> bool:
        """Whether the cache could hold `tokens` tokens of `r` now."""
        need = self.blocks_bytes(ceil_div(tokens, self.engine.block_size))
        return self.used - r.held + need <= self.budget

    def free(self, r: Request) -> None:
        self.used -= r.held
        r.held = r.blocks = 0

    def prompts_wait(self, running: list[Request], waiting: deque[Request]) -> bool:
        """Whether a prefill-first engine's next step is one of prompts: a running request is inside its prompt,
        or a waiting one has room to start."""
        return (bool(waiting) and len(running) < self.engine.max_seqs
                or any(r.known - r.computed > 1 or r.computed < r.prompt for r in running))

    def schedule(self, running: list[Request], waiting: deque[Request], prompts_only: bool | None) -> tuple:
        """One step's work: (chunks, decodes, verifies, scheduled, preempted). Running requests first, oldest
        first, then waiting ones while the token budget, max_seqs and the cache allow. `prompts_only` True: no
        decode token (a prefill-first engine's prompt step); False: no new prompt (its decode step); None both
        (one step of everything, decode-first). A request short of KV blocks takes the newest running request's,
        which is preempted (recomputed later)."""
        e, spec_dec = self.engine, self.spec_dec
        draft_k = spec_dec.tokens if spec_dec else 0
        budget = e.max_batched_tokens
        chunks, decodes, verify, scheduled = [], [], [], []
        preempted = False
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            need = r.known - r.computed
            decoding = need == 1 and r.computed >= r.prompt
            if decoding and prompts_only:
                i += 1
                continue
            n = 1 + min(draft_k, r.output - r.generated - 1) if decoding else min(need, budget)
            if n > budget:
                break
            if prompts_only and not self.grow(r, r.computed + n):
                i += 1  # a prompt step preempts no one: the chunk waits for a step with the decodes
                continue
            lost = False
            while not self.grow(r, r.computed + n):  # take the newest request's blocks
                victim = running.pop()
                self.free(victim)
                victim.computed, victim.preempted = 0, victim.preempted + 1
                waiting.appendleft(victim)
                self.preemptions += 1
                preempted = True
                if victim is r:
                    lost = True
                    break
            if lost:
                break
            if n == 1 and decoding:
                decodes.append(r.computed)
            elif decoding:
                verify.append((n, r.computed))
            else:
                chunks.append((n, r.computed))
            scheduled.append((r, n, decoding))
            budget -= n
            i += 1
        rule, room = e.engine.admission, 0.0
        if rule is not None and prompts_only is not False and waiting:
            room = self.free_tokens() - self.ratio * sum(min(r.output - r.generated, rule.clip_tokens)
                                                         for r in running)
        while prompts_only is not False and not preempted and waiting and budget > 0 and len(running) < e.max_seqs:
            r = waiting[0]
            start = min(r.hit, r.prompt - 1) if r.preempted == 0 else 0  # a prefix-cache hit is not recomputed
            n = min(r.known - start, budget)
            if n < r.known - start and scheduled and not e.engine.chunked_prefill:
                break  # an engine that does not chunk starts a prompt whole (alone when it fills the budget)
            if e.engine.admits_whole_prompt and not self.fits(r, r.known):
                break  # the cache must hold the whole prompt, not only its first chunk
            if rule is not None:  # and its output still to write, beside what the running ones are expected to
                if r.known - start + min(r.output - r.generated, rule.clip_tokens) >= room:
                    break
                room -= n + (min(r.output, rule.clip_tokens) if n == r.known - start else 0)
            if not self.grow(r, r.prompt + r.output if e.engine.reserves_whole_request else start + n):
                break
            waiting.popleft()
            r.computed = start
            if r.scheduled is None:
                r.scheduled = self.now
            running.append(r)
            chunks.append((n, start))
            scheduled.append((r, n, False))
            budget -= n
        return chunks, decodes, verify, scheduled, preempted

    def step_end(self, dt: float) -> float:
        """The end of a step of `dt` seconds from the clock; a step must move the clock on, or the run stops."""
        if not self.now < self.now + dt < float("inf"):
            raise UserError(f"`arrival`: a step of {dt:g} s does not move a clock at {self.now:g} s; give arrivals "
                            "in seconds from the start")
        return self.now + dt

    def close_step(self, end: float, in_system: int, scheduled: int) -> float:
        """Account a step ending at `end` (the requests in the system and the `scheduled` ones over it, the cache's
        share) and move the clock there: the `seen` of the next step, its start under overlap scheduling (the
        next step was planned as this one started), else its end."""
        dt = end - self.now
        self.area += in_system * dt
        self.running_area += scheduled * dt
        share = self.used / self.budget
        self.kv_area += share * dt
        self.kv_peak = max(self.kv_peak, share)
        seen = self.now if self.engine.overlap else end
        self.now = end
        self.steps += 1
        return seen

    def decode_stretch(self, running: list[Request], steps: int, ready_at: float, seen: float, in_system: int,
                       pad: int) -> tuple[int, float]:
        """Run up to `steps` steps in which every running request decodes one token and nothing else happens (none
        finishes, none arrives, no KV block is lacking), each timed and counted as run's loop does it, without
        scheduling each again: (steps run, the `seen` after the last). Stops before a step whose scheduler would see
        a request ready at `ready_at`; runs none where the cache could lack a block before the last."""
        size = self.engine.block_size
        extra = sum(max(0, self.blocks_bytes(ceil_div(r.computed + steps, size)) - r.held) for r in running)
        if self.used + extra > self.budget:  # the cache holds every block the steps add: none is preempted
            return 0, seen
        n = len(running)
        for j in range(steps):
            if j and ready_at <= seen:
                return j, seen
            contexts = []
            for r in running:
                if r.computed >= r.blocks * size:  # its next token starts a block
                    self.grow(r, r.computed + 1)
                contexts.append(r.computed)
            seen = self.close_step(self.step_end(self.step.time((), contexts, (), pad)), in_system, n)
            self.visits += n
            self.admitted(running, True, False)
            for r in running:
                r.computed += 1
                r.generated += 1
        return steps, seen

    def run(self, arrivals: list[Request], clients: int | None, progress: Callable[[int], None] | None,
            alone: bool = True):
        """Serve `arrivals` (sorted by arrival; under `clients`, each released when a client is free), one step
        at a time: a generator that proposes the clock's next value (its step's end, or the next ready request's
        time when it has nothing to run) and the steps it ran to get there, and is sent the clock's next value
        (drive: its own proposal, or under lock-step the engines' latest step end). A request reaches the
        scheduler the host's request_s after it arrives (its `ready` time), the GPU stepping the others meanwhile.
        A step takes the requests ready by `seen`: the clock, but under overlap scheduling (Settings.overlap) the
        start of the step before it, when it was planned, unless the engine was idle. `alone`: no lock-step, so
        a stretch of plain decode steps runs in one pass (decode_stretch) and is proposed once."""
        e, spec_dec, host = self.engine, self.spec_dec, self.step.request_s
        pending = deque(arrivals)
        entering: deque[Request] = deque()  # released by a client, on the host until `ready`
        waiting: deque[Request] = deque()
        running: list[Request] = []
        in_system = 0
        if clients is not None:  # the first `clients` requests arrive at once, each later one as one finishes
            for _ in range(min(clients, len(pending))):
                r = pending.popleft()
                r.arrival, r.ready = self.now, self.now + host
                entering.append(r)
            pending_arrivals = False
        else:
            for r in arrivals:
                r.ready = r.arrival + host
            pending_arrivals = True
        draft_k = spec_dec.tokens if spec_dec else 0
        limit = STEPS_PER_TOKEN * sum(r.prompt + r.output for r in arrivals) + 1000
        prefill_first, pads, padded = e.engine.policy == "prefill-first", bool(e.graphs), e.graph_batch
        seen = self.now  # requests ready by then are in the scheduler's hands for the next step
        done: list[int] = []  # the contexts of the requests the last step finished
        while pending or entering or waiting or running:
            for queue in (pending if pending_arrivals else (), entering):
                while queue and queue[0].ready <= seen:
                    r = queue.popleft()
                    self.area += self.now - r.arrival  # in the system from its arrival (the host, then the last step)
                    waiting.append(r)
                    in_system += 1
            if not running and not waiting:
                self.ratio = e.admission_ratio  # an idle engine's admission starts afresh
                upcoming = [q[0].ready for q in (pending if pending_arrivals else (), entering) if q]
                if not upcoming:
                    break
                if seen < self.now:  # overlap: the step planned as the last began runs the last decodes again, its
                    seen = self.now  # requests' end not yet known; then the scheduler takes what came meanwhile
                    if done:
                        end = yield (True, self.now + self.step.time([], done, [], padded(len(done)) - len(done)
                                                                     if pads else 0))
                        self.now, done = end, []
                        self.steps += 1
                    continue
                if not min(upcoming) > self.now:  # each pass admits, runs a step or moves the clock on
                    raise RuntimeError(f"serve: arrival {min(upcoming)!r} does not follow the clock {self.now!r}")
                # idle until the next request is ready (or the others' step)
                self.now = seen = yield (False, min(upcoming))
                continue
            if alone and not spec_dec and not waiting and len(running) <= e.max_batched_tokens:
                steps = min(r.output - r.generated for r in running) - 1  # none finishes in them
                steps = min(steps, limit - self.steps)
                if steps > 1 and all(r.generated and r.computed == r.known - 1 for r in running):
                    ready_at = min((q[0].ready for q in (pending if pending_arrivals else (), entering) if q),
                                   default=float("inf"))
                    pad = padded(len(running)) - len(running) if pads else 0
                    ran, seen = self.decode_stretch(running, steps, ready_at, seen, in_system, pad)
                    if ran:
                        yield (ran, self.now)
                        done = []
                        continue
            self.visits += len(running) + 1  # what this pass's scheduler looks over
            turns = (True, False) if prefill_first and self.prompts_wait(running, waiting) else (None,)
            for prompts_only in turns:  # prefill-first: a step of prompts, else (nothing fits) one of decodes
                chunks, decodes, verify, scheduled, preempted = self.schedule(running, waiting, prompts_only)
                if scheduled or preempted:
                    break
            if preempted:
                self.admitted(running, False, True)
            if not scheduled:
                if preempted:
                    continue
                raise UserError("`gpu_memory_utilization`: the KV cache cannot hold one request's tokens; "
                                "raise it, use more GPUs or shorter requests")
            pad = padded(len(decodes)) - len(decodes) if pads and decodes and not chunks and not verify else 0
            dt = self.step.time(chunks, decodes, verify, pad)
            if spec_dec and (decodes or verify):  # the draft proposes k tokens, one forward each
                dt += draft_k * spec_dec.draft.time([], decodes + [c for _, c in verify])
            end = yield (True, self.step_end(dt))  # under lock-step, the slowest engine's step end
            seen, done = self.close_step(end, in_system, len(scheduled)), []
            if not preempted:
                self.admitted(running, bool(decodes or verify), False)
            if self.steps > limit:
                raise UserError(f"`gpu_memory_utilization`: the engine ran {limit:,} steps without serving its "
                                f"{len(arrivals):,} requests (its KV cache preempts them in turn); give it more memory "
                                "or fewer, shorter requests")
            for r, n, decoding in scheduled:
                if decoding and n > 1:  # verify: the draft tokens accepted in a row, and one of the target's own
                    accepted = 0
                    while accepted < n - 1 and self.rng.random() < spec_dec.acceptance:
                        accepted += 1
                    r.computed += accepted + 1
                    r.generated += accepted + 1
                    self.accepted += accepted + 1
                    self.verified += 1
                else:
                    r.computed += n
                    if r.computed < r.known:
                        continue  # a prompt chunk, not its last
                    r.generated += 1
                    if decoding and draft_k:
                        self.accepted += 1
                        self.verified += 1
                if r.first is None:
                    r.first = self.now
                if r.generated >= r.output:
                    r.finish = self.now
                    done.append(r.computed)
                    running.remove(r)
                    self.free(r)
                    in_system -= 1
                    if progress:
                        progress(1)
                    if not pending_arrivals and pending:  # the client sends its next request
                        nxt = pending.popleft()
                        nxt.arrival, nxt.ready = self.now, self.now + host
                        entering.append(nxt)


_SHARED_STEPS: ContextVar[list[int] | None] = ContextVar("shared_steps", default=None)
"""The engine steps and the scheduler's visits the runs under shared_steps have taken so far ([steps, visits]),
or None outside it."""


@contextmanager
def shared_steps():
    """Every run simulated inside draws on one budget of MAX_STEPS engine steps and MAX_VISITS visits: a command
    that simulates several (measured's runs, plan's finalists, a load curve) is bounded as one run is, not as
    many."""
    token = _SHARED_STEPS.set([0, 0])
    try:
        yield
    finally:
        _SHARED_STEPS.reset(token)


def drive(loops: list, lockstep: bool, sims: list | tuple = ()) -> None:
    """Run engine loops (_Sim.run generators) to their end: each on its own clock, or under `lockstep` on one,
    as data-parallel attention replicas whose MoE layers span them run: every step ends when the slowest
    engine's does, an engine with nothing to run waiting it out (its idle forward), and when none runs a step
    the clock moves to the earliest ready request. Past MAX_STEPS steps in all (with the runs before it under
    shared_steps; in lock-step a round is one step of each live replica, as each takes a pass) the run is refused:
    check_work's count is the least a run may take, and requests that arrive too far apart to share steps, or that
    a KV cache holds only a few of at once, take more. So is a run whose `sims` (the loops' _Sim) visit more than
    MAX_VISITS running requests in all."""
    shared = _SHARED_STEPS.get()
    steps, before = (shared[0], shared[1]) if shared is not None else (0, 0)

    def visited() -> int:
        visits = before + sum(sim.visits for sim in sims)
        if visits > MAX_VISITS:
            _too_many_visits(shared is not None)
        return visits

    if not lockstep:
        for loop in loops:
            proposal = next(loop, None)
            while proposal is not None:
                steps += proposal[0]
                if steps > MAX_STEPS:
                    _too_many_steps(shared is not None, False)
                visited()
                proposal = _send(loop, proposal[1])
    else:
        proposals = {k: next(loop, None) for k, loop in enumerate(loops)}
        while live := {k: p for k, p in proposals.items() if p is not None}:
            stepping = [t for runs, t in live.values() if runs]
            steps += len(live)  # every live replica takes this round's pass, stepping or waiting out its idle forward
            if steps > MAX_STEPS:
                _too_many_steps(shared is not None, True)
            visited()
            clock = max(stepping) if stepping else min(t for _, t in live.values())
            proposals = {k: _send(loops[k], clock) for k in live}
    if shared is not None:
        shared[0], shared[1] = steps, visited()


def _too_many_visits(shared: bool) -> None:
    runs = "these runs' schedulers passed" if shared else "the run's scheduler passed"
    raise UserError(f"`max_batched_tokens`: {runs} over {MAX_VISITS:,} running requests, step by step, the most a "
                    f"{'command simulates' if shared else 'run may take'} (a step budget of a few tokens takes one "
                    "step per few prompt tokens, each passing over every request running); give a larger step "
                    "budget, or fewer or shorter requests")


def _too_many_steps(shared: bool, lockstep: bool) -> None:
    replicas = ", fewer replicas stepping together (`dp`)" if lockstep else ""
    if shared:
        raise UserError(f"`requests`: these runs passed {MAX_STEPS:,} engine steps in all, the most one command "
                        f"simulates; give fewer runs or requests{replicas}, or arrivals closer together")
    raise UserError(f"`requests`: the run passed {MAX_STEPS:,} engine steps, the most a run may take (its requests "
                    "share too few steps: they arrive too far apart, or the KV cache holds few of them at once); give "
                    f"fewer or shorter requests{replicas}, arrivals closer together, or more GPUs")


def _send(loop, clock: float):
    """The loop's next proposal after the clock moves to `clock`; None when it has served its requests."""
    try:
        return loop.send(clock)
    except StopIteration:
        return None


def serve(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel, rows: list[tuple[float, int, int]],
          engine: Settings, load: Load, prompt: str, output: str, slo: SLO = SLO(), seed: int = 0,
          spec_dec: Speculative | None = None, progress: Callable[[int], None] | None = None,
          load_label: str | None = None, prefix_hit: float = 0.0) -> ServeReport:
    """Simulate the engines of the workload's layout over `rows` (arrival, prompt, output) on `engine`'s
    settings; `load_label` names the arrivals when they come from a trace; `prefix_hit`: the share of each prompt
    found in the prefix cache (not recomputed)."""
    if not 0 <= prefix_hit < 1:
        raise UserError(f"`prefix_hit`: {prefix_hit:g} is not in [0, 1); give a share such as 0.5")
    spec.stack.check_decoding("model")
    L = w.layout
    L.check(spec, L.dp)
    whole, engine = engine, engine.per_replica(L)  # each replica's scheduler's settings
    w, free, budget, block, _ = engine_pool(spec, gpu, w, engine)  # a pipeline's engines split the GPU's pool
    engines = L.dp * L.pp
    if budget < block:
        _, spare = serving_kv_budget(spec, gpu, w, engine.engine.memory_of == "free", False)
        if spare < block and spare >= kv_per_gpu(spec, 1, 1, w):  # a block of one token would fit
            raise UserError(f"`block_size`: a block of {engine.block_size:,} tokens is {block / 1e9:.3g} GB per GPU, "
                            f"more than the {max(spare, 0) / 1e9:.2f} GB the weights leave; give a smaller one")
        if spare >= block and engine.engine.profiles_activations:  # the step's activation workspace took the room
            own = engine.engine.settings(gpu, L, context=spec.max_seq_len)
            default = engine.max_batched_tokens == own.max_batched_tokens
            whose = f" ({engine.engine.label}'s default on {gpu.name})" if default else ""
            raise UserError(f"`max_batched_tokens`: the activations of a {engine.max_batched_tokens:,}-token step"
                            f"{whose} leave {max(free, 0) / 1e9:.2f} GB per GPU for the KV cache, less than one block; "
                            "give a smaller step budget")
        raise UserError(f"`gpu_memory_utilization`: {engine.gpu_memory_utilization:g} leaves "
                        f"{max(free, 0) / 1e9:.2f} GB per GPU for the KV cache after weights and workspace, less "
                        "than one block; raise it or use more GPUs (`tp`)")
    longest = max(p + o for _, p, o in rows)
    if kv_per_gpu(spec, 1, ceil_div(longest, engine.block_size) * engine.block_size, w) > budget:
        where = "`trace`" if load_label is not None else "`prompt` or `output`"  # a trace's row, or the lengths
        raise UserError(f"{where}: a request of {longest:,} tokens needs more KV memory than an engine "
                        f"holds ({budget / 1e9:.2f} GB per GPU); use more GPUs (`tp`, `pp`), a smaller `kv_dtype` or "
                        "shorter requests")
    # requests go to the engines in turn; under a concurrency, to those that have a client, clients split evenly;
    # an engine that would get no request is not built (a million replicas of ten requests are ten engines)
    active = min(engines if load.concurrency is None else min(engines, load.concurrency), len(rows))
    draft_k = spec_dec.tokens if spec_dec else 0
    check_work(rows, engine, load.concurrency, draft_k, active if L.attention_dp else 1)
    check_kv_work(rows, lambda tokens: kv_per_gpu(spec, 1, ceil_div(tokens, engine.block_size) * engine.block_size, w),
                  budget, draft_k)
    prompt_max = max(p for _, p, _ in rows)
    if not engine.engine.chunked_prefill and prompt_max > engine.max_batched_tokens:
        raise UserError(f"`max_batched_tokens`: {engine.max_batched_tokens:,} tokens per step is less than the "
                        f"longest prompt ({prompt_max:,} tokens) and {engine.engine.label} does not chunk prompts "
                        "by default; raise it above the longest prompt")
    notes = []
    if spec.max_seq_len < longest:
        notes.append(f"requests of up to {longest:,} tokens exceed {spec.name}'s max_seq_len {spec.max_seq_len:,}: "
                     "an extrapolation")
    if engine.max_batched_tokens != whole.max_batched_tokens:
        how = (f"divides its {whole.max_batched_tokens:,} tokens per step over the {L.dp}"
               if engine.engine.dp_attention_budget == "divided" else
               f"halves its {whole.max_batched_tokens:,} tokens per step under the {L.dp}")
        notes.append(f"{engine.engine.label} {how} data-parallel attention replicas: each schedules "
                     f"{engine.max_batched_tokens:,} a step (docs/serving.md#engines)")
    step = EngineStep(spec, gpu, w, tm)
    block_bytes: dict[int, int] = {}
    reqs = [Request(a, p, o, int(prefix_hit * p)) for a, p, o in rows]
    order = sorted(range(len(reqs)), key=lambda i: reqs[i].arrival)
    sims, loops = [], []
    for k in range(active):
        sim = _Sim(step, engine, budget, block_bytes, spec_dec, random.Random(f"{seed}/{k}"))
        sim.kv_of = lambda blocks: kv_per_gpu(spec, 1, blocks * engine.block_size, w)
        clients = None if load.concurrency is None else load.concurrency // active + (k < load.concurrency % active)
        loops.append(sim.run([reqs[i] for i in order[k::active]], clients, progress, not L.attention_dp))
        sims.append(sim)
    drive(loops, L.attention_dp, sims)
    if L.attention_dp:
        notes.append(f"the {L.dp} data-parallel replicas step together: their MoE layers span them (ep {L.ep} over "
                     f"tp {L.tp}), so every step lasts as long as the slowest replica's, a replica with nothing to "
                     "run waiting in its idle forward")
    return _report(spec, gpu, w, tm, reqs, sims, engine, load_label or str(load), prompt, output, slo, spec_dec,
                   block, budget, notes, engines, None if load_label else load.finite_rate, prefix_hit)


def spread(values: list[float]) -> Spread:
    """Mean and nearest-rank p50, p90, p99 of `values` (0 for none)."""
    if not values:
        return Spread(mean=0.0, p50=0.0, p90=0.0, p99=0.0)
    v = sorted(values)

    def at(q: float) -> float:
        return v[min(len(v) - 1, max(0, ceil_div(len(v) * q, 100) - 1))]

    return Spread(mean=sum(v) / len(v), p50=at(50), p90=at(90), p99=at(99))


def _report(spec, gpu, w, tm, reqs, sims, engine, load, prompt, output, slo, spec_dec, block, budget,
            notes, engines, rate, prefix_hit) -> ServeReport:
    L = w.layout
    t0 = min(r.arrival for r in reqs)
    duration = max(r.finish for r in reqs) - t0
    rows = [ServedRequest(arrival_s=r.arrival, prompt=r.prompt, output=r.output, queue_s=r.scheduled - r.arrival,
                          ttft_s=r.first - r.arrival, e2e_s=r.finish - r.arrival, preempted=r.preempted,
                          tpot_s=(r.finish - r.first) / (r.output - 1) if r.output > 1 else None)
            for r in sorted(reqs, key=lambda r: r.arrival)]
    n, out_tokens = len(rows), sum(r.output for r in rows)
    tpots = [r.tpot_s for r in rows if r.tpot_s is not None]
    if slo.ttft_s is None and slo.tpot_s is None:
        goodput = None
    else:
        good = sum(1 for r in rows if (slo.ttft_s is None or r.ttft_s <= slo.ttft_s)
                   and (slo.tpot_s is None or r.tpot_s is None or r.tpot_s <= slo.tpot_s))
        goodput = good / duration
    e2e = spread([r.e2e_s for r in rows])
    verified = sum(s.verified for s in sims)
    graphs = ("no CUDA graphs" if not engine.graphs else f"decode steps padded to CUDA-graph batch sizes up to "
              f"{engine.graphs[-1]}" if engine.engine.graph_padding else f"decode batches of a captured size up to "
              f"{engine.graphs[-1]} replayed from CUDA graphs")
    notes += [f"{len(sims)} engine(s): dp={L.dp} replicas × pp={L.pp} virtual engines, each with its own scheduler "
              "and share of the KV memory; requests go to them in turn",
              f"{engine.engine.label} {engine.engine.version}: {engine.engine.policy} steps, prefill "
              f"{'chunked' if engine.engine.chunked_prefill else 'not chunked'}, {graphs}, KV pool "
              f"{engine.gpu_memory_utilization:g} of the GPU's {'free ' if engine.engine.memory_of == 'free' else ''}"
              "memory; recompute preemption; prefix-cache hits skip that share of each prompt (their blocks are "
              "still counted per request)"]
    if engine.overlap:
        notes.append(f"{engine.engine.label} plans each step while the one before runs (overlap scheduling): a "
                     "request arriving while it is busy joins the step after the one already planned "
                     "(docs/serving.md#overlap-scheduling)")
    if engine.admission_ratio is not None:
        notes.append(f"{engine.engine.label} admits a prompt only with room for it and its output beside the running "
                     f"requests' remaining output × a ratio from {engine.admission_ratio:g}, falling as decodes run "
                     "(docs/serving.md#engines); each request's output stands for its max_new_tokens")
    if load.startswith("concurrency") and engines > 1:
        notes.append(f"the {load} is split evenly over {len(sims)} of the {engines} engines")
    if L.ep > 1:
        notes.append(expert_parallel_note(spec, w, tm))
    if scaled := block_scaled_note(spec, gpu, w, tm):
        notes.append(scaled)
    return ServeReport(
        model=spec.name, gpu=gpu.name, gpus=L.gpus, tp=L.tp, pp=L.pp, dp=L.dp, ep=L.ep, time_model=tm.name,
        requests=n, duration_s=duration, steps=sum(s.steps for s in sims), load=load, rate=rate, prompt=prompt,
        output=output, engine=engine.engine.name, engine_policy=engine.engine.policy,
        overlap_scheduling=engine.overlap, max_seqs=engine.max_seqs,
        max_batched_tokens=engine.max_batched_tokens, block_size=engine.block_size,
        gpu_memory_utilization=engine.gpu_memory_utilization, graph_max=engine.graphs[-1] if engine.graphs else 0,
        prefix_hit=prefix_hit, speculative=spec_dec.label if spec_dec else None,
        kv_blocks=budget // block, kv_bytes_per_block=block, kv_tokens=budget // block * engine.block_size,
        kv_log=engine.kv_log(budget // block * engine.block_size),
        busiest_rank=busiest_of(spec, w, tm),
        expert_skew=w.routing_skew if L.ep > 1 else None,
        requests_per_s=n / duration, output_tokens_per_s=out_tokens / duration,
        requests_per_s_per_gpu=n / duration / L.gpus, output_tokens_per_s_per_gpu=out_tokens / duration / L.gpus,
        goodput_requests_per_s=goodput, slo_ttft_s=slo.ttft_s, slo_tpot_s=slo.tpot_s,
        ttft_s=spread([r.ttft_s for r in rows]), tpot_s=spread(tpots), e2e_s=e2e,
        queue_s=spread([r.queue_s for r in rows]),
        mean_concurrency=sum(s.area for s in sims) / duration, little_concurrency=n / duration * e2e.mean,
        mean_running=sum(s.running_area for s in sims) / duration,
        kv_utilization=sum(s.kv_area for s in sims) / len(sims) / duration,
        kv_peak_utilization=max(s.kv_peak for s in sims), preemptions=sum(s.preemptions for s in sims),
        tokens_per_step=sum(s.accepted for s in sims) / verified if verified else None,
        timeline=rows, formula=FORMULA, notes=notes)


LOAD_STEPS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
"""Rates, as shares of the given one, that load_curve runs."""


def check_curve(n: int, output_lengths: Lengths, load: Load) -> None:
    """Refuse a load curve (load_curve) before any run of it: one at no finite rate, or whose runs in all (the
    given run and LOAD_STEPS more, n requests each) hold more output tokens, at the output's mean, than the
    MAX_OUTPUT_TOKENS one run may: the curve is bounded as one run is."""
    if load.finite_rate is None:
        raise UserError("`plot_vs`: load sweeps the arrival rate; give a finite `rate`")
    runs = 1 + len(LOAD_STEPS)
    tokens = runs * n * output_lengths.mean
    if tokens > MAX_OUTPUT_TOKENS:
        most = int(MAX_OUTPUT_TOKENS / (runs * output_lengths.mean))
        fix = f"give at most {most:,} requests or a shorter `output`" if most else "give a shorter `output`"
        raise UserError(f"`requests`: a load curve runs {runs} simulations of {n:,} requests, about {tokens:,.0f} "
                        f"output tokens in all, more than the {MAX_OUTPUT_TOKENS:,} of one run; {fix}")


def load_curve(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel, n: int, prompt_lengths: Lengths,
               output_lengths: Lengths, load: Load, seed: int = 0, **args) -> list[ServeReport]:
    """serve at LOAD_STEPS × the load's rate (same seed, same lengths): latency against load; the runs share one
    budget of engine steps (shared_steps)."""
    out = []
    with shared_steps():
        for share in LOAD_STEPS:
            at = Load(rate=load.rate * share, constant=load.constant)
            rows = make_requests(n, prompt_lengths, output_lengths, at, seed)
            out.append(serve(spec, gpu, w, tm, rows, load=at, seed=seed, **args))
    return out
