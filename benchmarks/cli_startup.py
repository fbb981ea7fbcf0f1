"""Cold start-up of the CLI against the libraries it is built on (median wall time of N runs each).

Run: python benchmarks/cli_startup.py [N]   (N runs of each command, 15 unless given)

Times, in one interleaved run (every round runs each command once, in a rotating order, so load on a
shared machine falls on all of them alike):

  baseline  python -c "import typer, pydantic, yaml"
  json      llmcalc kv --preset llama2-7b --batch 64 --seq 32768 -f json
  table     llmcalc kv --preset llama2-7b --batch 64 --seq 32768
  version   llmcalc --version
  import    python -c "import llmcalc"
  api       python -c "import llmcalc; llmcalc.kv('llama2-7b', batch=64, seq=32768)"  (the Python API's json)

and prints both ratios to the baseline with their targets: json ≤ 1.5×, table ≤ 1.8×. Each run is a fresh
process ("cold": nothing of llmcalc in memory). The CLI runs as `python -m llmcalc` from the root of this
checkout, so the checkout's code is timed whatever is installed (the `llmcalc` script runs the same main()).
Bytecode is cached as an installed package has it: the children run with PYTHONPYCACHEPREFIX in a
temporary folder (PYTHONDONTWRITEBYTECODE dropped), filled by one warm-up run of each command, so no run
pays for compiling sources. Tables are rendered 80 columns wide (COLUMNS=80), as in a plain terminal.
This is a benchmark, not a test: it reports, it asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KV = ["kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768"]
COMMANDS = {
    "baseline": [sys.executable, "-c", "import typer, pydantic, yaml"],
    "json": [sys.executable, "-m", "llmcalc", *KV, "-f", "json"],
    "table": [sys.executable, "-m", "llmcalc", *KV],
    "version": [sys.executable, "-m", "llmcalc", "--version"],
    "import": [sys.executable, "-c", "import llmcalc"],
    "api": [sys.executable, "-c", "import llmcalc; llmcalc.kv('llama2-7b', batch=64, seq=32768)"],
}
TARGETS = {"json": 1.5, "table": 1.8}
"""Most each command may take, as a multiple of the baseline (the redesign issue's "fast start")."""


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of `cmd`; a failing run stops the benchmark."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{err}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    names = list(COMMANDS)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="llmcalc-bench-pyc-") as pyc:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.setdefault("PYTHONPYCACHEPREFIX", pyc)
        env["COLUMNS"] = "80"
        for n in names:  # warm-up: page cache and bytecode cache
            run_once(COMMANDS[n], env)
        for i in range(runs):
            for n in names[i % len(names):] + names[:i % len(names)]:
                w, c = run_once(COMMANDS[n], env)
                wall[n].append(w)
                cpu[n].append(c)
    med = {n: statistics.median(wall[n]) for n in names}
    med_cpu = {n: statistics.median(cpu[n]) for n in names}
    print(f"median of {runs} interleaved runs, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    for n in names:
        print(f"  {n:8} {med[n] * 1000:7.1f} ms wall  {med_cpu[n] * 1000:7.1f} ms cpu   {' '.join(COMMANDS[n][1:])}")
    for n, target in TARGETS.items():
        ratio, ratio_cpu = med[n] / med["baseline"], med_cpu[n] / med_cpu["baseline"]
        verdict = "ok" if ratio <= target else "over"
        print(f"  {n}/baseline = {ratio:.2f}× (target ≤ {target}×: {verdict}; by cpu time {ratio_cpu:.2f}×)")


if __name__ == "__main__":
    main()
