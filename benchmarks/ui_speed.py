"""The page's speed: its first load in a browser, and each view's answer from the server.

Run: python benchmarks/ui_speed.py [N]   (N repetitions of each, 20 unless given; needs the [ui] extra, and
Playwright with the system's Chromium for the first load)

- first load: a fresh headless Chromium tab opens the page of one view (its URL holding the view) and waits
  until the first answer is drawn (body[data-state=answered]); the time from navigation to then, median of N.
  Targets: ≤ 1 s.
- answer: POST /api/answer of each view's question, timed by the client over loopback (the server's whole work:
  parsing, the command's own parser and function, the JSON), median and p90 of N after one warm-up. Target
  ≤ 200 ms for the analytical views (params, kv, memory, flops, latency, fit, compare, sweep, explain); serve,
  plan and train simulate or search and are reported beside them without a target.

The server runs as `python -m llmcalc ui` from this checkout on a free port. This is a benchmark, not a test: it
reports, it asserts nothing.
"""

from __future__ import annotations

import json
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = {
    "params": ["params", "--preset", "deepseek-v3"],
    "kv": ["kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768"],
    "memory": ["memory", "--preset", "llama3.1-70b", "--batch", "8", "--seq", "8k", "--train"],
    "flops": ["flops", "--preset", "qwen3-30b-a3b", "--seq", "8k"],
    "latency": ["latency", "--preset", "llama3-8b", "--gpu", "h100-sxm", "--batch", "8"],
    "fit": ["fit", "--preset", "gpt-oss-20b", "--gpu", "h100-sxm", "--seq", "32k"],
    "compare": ["compare", "gqa", "mla", "--preset", "llama2-7b", "--gpu", "h100-sxm"],
    "sweep": ["sweep", "--preset", "llama3-8b", "--gpu", "h100-sxm"],
    "explain": ["explain", "memory", "--preset", "llama3-8b"],
    "serve (200 requests)": ["serve", "--preset", "llama3-8b", "--gpu", "h100-sxm", "--requests", "200",
                             "--rate", "5"],
    "plan (200 requests)": ["plan", "--preset", "llama3-8b", "--gpu", "h100-sxm", "--max-gpus", "8", "--rate", "5",
                            "--slo-ttft", "2", "--slo-tpot", "0.05", "--requests", "200"],
    "train": ["train", "--preset", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--zero", "1",
              "--micro-batch", "1"],
}
ANALYTICAL = ("params", "kv", "memory", "flops", "latency", "fit", "compare", "sweep", "explain")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-m", "llmcalc", "ui", "--port", str(port)], cwd=ROOT,
                         stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{base}/api/health", timeout=2).read()
            return p, base
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise SystemExit("the server did not start")


def answer_times(base: str, argv: list[str], n: int) -> list[float]:
    body = json.dumps({"argv": argv}).encode()
    times = []
    for i in range(n + 1):
        request = urllib.request.Request(f"{base}/api/answer", data=body,
                                         headers={"Content-Type": "application/json"})
        t = time.perf_counter()
        data = json.loads(urllib.request.urlopen(request, timeout=120).read())
        if i:  # the first is a warm-up (the command's modules imported)
            times.append(time.perf_counter() - t)
        if data.get("code") != 0:
            raise SystemExit(f"{argv}: {data.get('error')}")
    return times


def first_loads(base: str, n: int) -> list[float] | None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(chromium).exists():
        return None
    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=FLAGS)
        for i in range(n + 1):
            context = browser.new_context()  # an empty cache each time: a first load
            tab = context.new_page()
            t = time.perf_counter()
            tab.goto(f"{base}/?view=kv&preset=llama2-7b&batch=64&seq=32768")
            tab.wait_for_selector("body[data-state=answered]", timeout=60_000)
            if i:
                times.append(time.perf_counter() - t)
            context.close()
        browser.close()
    return times


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    server, base = start_server()
    try:
        loads = first_loads(base, n)
        print(f"first load (kv view, to its first answer drawn), median of {n}: "
              + (f"{statistics.median(loads) * 1000:.0f} ms (target ≤ 1000 ms)" if loads else
                 "not measured (no Playwright or Chromium)"))
        print(f"\n{'view':<22} {'median':>9} {'p90':>9}  target")
        for name, argv in QUESTIONS.items():
            times = sorted(answer_times(base, argv, n))
            p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
            target = "≤ 200 ms" if name in ANALYTICAL else "—"
            print(f"{name:<22} {statistics.median(times) * 1000:>7.1f}ms {p90 * 1000:>7.1f}ms  {target}")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
