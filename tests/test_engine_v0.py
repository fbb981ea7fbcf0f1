"""vLLM's V0 engine (presets/engines/vllm-v0.yaml): its step budget covers the model's context, so a prompt is
never chunked; a budget the user gives wins; its KV line is in blocks; `serve --engine vllm-v0` runs a round of
prompts that arrive together in one step."""

from __future__ import annotations

import json
import subprocess
import sys

from llmcalc.inputs.engines import load_engine
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset


def test_the_budget_is_the_context_unless_given():
    v0, v1, gpu = load_engine("vllm-v0"), load_engine("vllm"), load_gpu("h100-sxm")
    context = load_preset("deepseek-v3").max_seq_len
    assert context == 163840  # deepseek-ai/DeepSeek-V3 config.json max_position_embeddings
    assert v0.settings(gpu, context=context).max_batched_tokens == context
    assert v0.settings(gpu, context=1024).max_batched_tokens == 2048  # max(max_model_len, 2048)
    assert v0.settings(gpu, context=context, max_batched_tokens=4096).max_batched_tokens == 4096
    assert v1.settings(gpu, context=context).max_batched_tokens == v1.settings(gpu).max_batched_tokens == 8192


def test_its_log_line_counts_blocks():
    settings = load_engine("vllm-v0").settings(load_gpu("h100-sxm"), context=4096)
    assert settings.kv_log(16 * 1000) == "# cuda blocks: 1000"


def serve(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "llmcalc", "serve", "--preset", "deepseek-v2-lite", "--gpu", "h100-sxm",
                          "--format", "json", *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_serve_runs_a_round_of_prompts_in_one_step():
    """16 prompts of 1,000 tokens sent at once to deepseek-v2-lite (MLA): V0 prefills them in one step (its budget
    is the model's 163,840-token context), so they share one TTFT; vLLM V1's 8,192-token steps of prompts and
    decodes give them different ones."""
    args = ("--rate", "inf", "--requests", "16", "--prompt", "1000", "--output", "16")
    v0, v1 = serve("--engine", "vllm-v0", *args), serve(*args)
    assert len({r["ttft_s"] for r in v0["timeline"]}) == 1
    assert len({r["ttft_s"] for r in v1["timeline"]}) > 1
    assert v0["kv_log"] == f"# cuda blocks: {v0['kv_tokens'] // 16}"
