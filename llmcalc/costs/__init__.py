"""Costs: pure functions of (spec, workload[, gpu]) that return typed reports — params, kv, flops, memory,
per-GPU shards and layouts, latency, fit, moe. They never print and never speak of CLI flags."""
