"""Whole-process wall time of analytical CLI commands (median of N runs).

Run: python benchmarks/cli_startup.py [N]. Also times a bare interpreter as the floor, since
python's own start-up (site, .pth hooks) is part of every run and outside llmcalc's control.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass (floor)": [sys.executable, "-c", "pass"],
    "python -c 'import llmcalc.cli'": [sys.executable, "-c", "import llmcalc.cli"],
    "llmcalc kv --preset llama2-7b --batch 64 --seq 32768": [
        "llmcalc", "kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768"],
    "llmcalc kv ... -f json": ["llmcalc", "kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768", "-f", "json"],
    "llmcalc params --preset llama2-7b": ["llmcalc", "params", "--preset", "llama2-7b"],
    "llmcalc params --preset llama2-7b -f json": ["llmcalc", "params", "--preset", "llama2-7b", "-f", "json"],
}


def median_seconds(cmd: list[str], runs: int) -> float:
    subprocess.run(cmd, check=True, capture_output=True)  # warm the page cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    if shutil.which("llmcalc") is None:
        sys.exit("llmcalc is not on PATH: pip install -e . first")
    for name, cmd in COMMANDS.items():
        print(f"{median_seconds(cmd, runs) * 1000:8.1f} ms  {name}  (median of {runs})")


if __name__ == "__main__":
    main()
