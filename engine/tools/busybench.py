"""`python -m engine bench --busy`: the same demo-model draft alone and beside a CPU hog on every core.

Why: a writer's laptop is never idle. This measures what the CPU thread policy (`engine.threads`) is for: how
much slower a draft gets when every core is busy with another program, for the default policy, for torch's own
default (one spinning OpenMP thread per core, what Letterpress did before the policy) and for 1, 2 and N
threads.

Every configuration runs in a fresh child process (OpenMP reads its wait policy once, when torch loads), which
alternates a draft on the quiet machine with the same draft beside a hog (one bounded busy-loop process per
usable core, started before and stopped after each busy draft by the bench itself; each also ends on its own
after `--hog-limit` seconds, so nothing outlives a killed bench). Alternating keeps a change in the machine's
own load from landing on one side only. Prints a
table with the median seconds per draft, quiet and busy, and the ratio busy/quiet; `--json` prints the
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DRAFT_TEXT = "The harbour was quiet in the morning. "
# ends after argv[1] seconds, or as soon as the bench that started it is gone (killed, even with -9)
HOG_CODE = (
    "import os, sys, time\n"
    "end = time.monotonic() + float(sys.argv[1])\n"
    "parent = os.getppid()\n"
    "while time.monotonic() < end and os.getppid() == parent:\n"
    "    pass\n"
)


def _exit_cleanly_on_termination() -> None:
    """SIGTERM / SIGHUP end the bench through its `finally`s (hogs stopped, the child process killed) instead
    of at once: a `kill` of the bench left its child running drafts beside fresh hogs, and a killed child left
    its hogs spinning for `--hog-limit` (600 s)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, stop)


def _child(args: argparse.Namespace) -> int:
    """Run in a fresh process: load the model with the configured policy and time `repeats` drafts."""
    legacy = os.environ.get("LETTERPRESS_THREADS", "") == "torch"
    if not legacy:
        from engine.threads import prepare_openmp

        prepare_openmp()
    else:  # what Letterpress did before the policy: OpenMP's default (spinning) wait
        os.environ.pop("OMP_WAIT_POLICY", None)
    from engine.api import DenoiseSettings, DraftRequest
    from engine.session import Session

    session = Session()
    session.load(args.model, device="cpu")
    request = DraftRequest(
        before=DRAFT_TEXT,
        max_new_tokens=args.tokens,
        settings=DenoiseSettings(max_steps=args.steps, candidates=args.candidates, seed=0),
    )
    warm = DraftRequest(before=DRAFT_TEXT, max_new_tokens=8, settings=DenoiseSettings(max_steps=2, seed=0))
    session.run(warm)  # warm-up (first-call allocations, lazy imports), short: under a hog it is slow too
    quiet: list[float] = []
    busy: list[float] = []
    plans: list[Any] = []
    began = time.perf_counter()
    parent = os.getppid()
    for _ in range(
        args.repeats
    ):  # quiet and busy alternate, so a change in the machine's load hits both alike
        if os.getppid() != parent:
            raise SystemExit("the bench that started this run is gone")  # killed with -9: no orphaned drafts
        for seconds, hogs in ((quiet, 0), (busy, args.hogs)):
            running = _start_hogs(hogs, args.hog_limit)
            try:
                if running:
                    time.sleep(0.3)  # the hogs reach their cores
                start = time.perf_counter()
                result = session.run(request)
                seconds.append(time.perf_counter() - start)
                plans.append(session.threads.plan if session.threads is not None else None)
            finally:
                _stop_hogs(running)
        if time.perf_counter() - began > args.budget:
            break
    import torch

    plan = plans[-1] if plans else None
    print(
        json.dumps(
            {
                "quiet": quiet,
                "busy": busy,
                "threads": torch.get_num_threads(),
                "steps": result.stats.steps,
                "reason": plan.reason if plan else "",
                "busy_cores_seen": [round(p.busy, 2) if p and p.busy is not None else None for p in plans],
                "hog_pids": _HOG_PIDS,
            }
        )
    )
    return 0


_HOG_PIDS: list[int] = []  # every hog this process started (reported, so a test can check none outlived it)


def _start_hogs(count: int, limit: float) -> list[subprocess.Popen[bytes]]:
    hogs = [subprocess.Popen([sys.executable, "-c", HOG_CODE, str(limit)]) for _ in range(count)]
    _HOG_PIDS.extend(h.pid for h in hogs)
    return hogs


def _stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for hog in hogs:
        hog.kill()
    for hog in hogs:
        hog.wait()


def _run_config(args: argparse.Namespace, threads: str, cores: int) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)  # the configuration decides, not the caller's shell
    env.pop("LETTERPRESS_THREADS", None)
    if threads != "default":
        env["LETTERPRESS_THREADS"] = threads
    cmd = [
        sys.executable,
        "-m",
        "engine.tools.busybench",
        "--child",
        "--model",
        str(args.model),
        "--repeats",
        str(args.repeats),
        "--steps",
        str(args.steps),
        "--tokens",
        str(args.tokens),
        "--candidates",
        str(args.candidates),
        "--budget",
        str(args.budget),
        "--hogs",
        str(cores),
        "--hog-limit",
        str(args.hog_limit),
    ]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.hog_limit + 60)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {args.hog_limit:.0f} s"}
    if out.returncode != 0:
        return {
            "error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
        }
    data: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    data["quiet_median"] = statistics.median(data["quiet"])
    data["busy_median"] = statistics.median(data["busy"])
    return data


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def run_busy_bench(args: argparse.Namespace, log: Any = None) -> dict[str, Any]:
    """Every configuration quiet then busy; returns the report (also streamed to `log` line by line)."""
    from engine.threads import usable_cores

    cores = usable_cores()
    configs = [c.strip() for c in args.threads.split(",") if c.strip()]
    configs = [str(cores) if c == "N" else c for c in configs]
    configs = list(dict.fromkeys(configs))
    rows = []
    for threads in configs:
        row: dict[str, Any] = {"config": threads, **_run_config(args, threads, cores)}
        if "quiet_median" in row:
            row["ratio"] = row["busy_median"] / row["quiet_median"]
        rows.append(row)
        if log:
            log(_format_row(row))
    return {
        "model": str(args.model),
        "cores": cores,
        "loadavg_after": _loadavg(),
        "steps": args.steps,
        "tokens": args.tokens,
        "candidates": args.candidates,
        "rows": rows,
    }


HEADER = f"{'configuration':<24} {'quiet':>10} {'busy':>10} {'busy/quiet':>8}  (median seconds per draft)"
LABELS = {"default": "default policy", "torch": "torch default (before)"}


def _format_row(row: dict[str, Any]) -> str:
    label = LABELS.get(row["config"], f"{row['config']} thread(s)")
    if "ratio" not in row:
        return f"{label:<24} error: {row.get('error', '?')}"
    threads = f"({row['threads']}t)" if row["threads"] else ""
    return (
        f"{label:<24} {row['quiet_median']:8.2f} s {row['busy_median']:8.2f} s {row['ratio']:8.1f}  "
        f"{threads} n={len(row['quiet'])}"
    )


def format_report(report: dict[str, Any]) -> str:
    used = sorted({r["steps"] for r in report["rows"] if "steps" in r})
    head = (
        f"demo draft ({report['tokens']} tokens, {report['candidates']} alternatives, "
        f"{'/'.join(map(str, used))} steps of <= {report['steps']}) on {report['cores']} core(s); hog: one "
        f"busy loop per core; load after: {report['loadavg_after']}"
    )
    lines = [head, HEADER]
    lines += [_format_row(r) for r in report["rows"]]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    from engine.__main__ import default_model_dir

    parser = argparse.ArgumentParser(prog="python -m engine bench --busy", description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=default_model_dir())
    parser.add_argument(
        "--threads",
        default="default,torch,1,2,N",
        help="configurations: default (the policy), torch (torch's own default), or counts; N = "
        "every usable core",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=48, help="max denoising steps (the app's default)")
    parser.add_argument("--tokens", type=int, default=64, help="draft length (the app's default)")
    parser.add_argument("--candidates", type=int, default=3, help="alternatives (the app's default)")
    parser.add_argument(
        "--budget", type=float, default=60.0, help="stop repeating a configuration after this"
    )
    parser.add_argument(
        "--hog-limit", type=float, default=600.0, help="seconds after which a hog ends by itself"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hogs", type=int, default=0, help=argparse.SUPPRESS)
    return parser


def main_busy(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    _exit_cleanly_on_termination()
    if args.child:
        return _child(args)
    if args.json:
        print(json.dumps(run_busy_bench(args)))
        return 0
    print(HEADER, flush=True)
    report = run_busy_bench(args, log=lambda line: print(line, flush=True))
    print(format_report(report).splitlines()[0])  # the conditions, once every row is in
    return 0


if __name__ == "__main__":
    sys.exit(main_busy(sys.argv[1:]))
