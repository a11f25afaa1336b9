"""`python -m engine gpu-check`: the one prepared run on a machine with a GPU, unattended, with a hard time
limit.

It answers what the CPU tests can only simulate, and writes one JSON report (`report.json`) and a summary
(`summary.txt`) into `--out`:

* preflight: the installed versions against what the engine needs (engine.tools.gpu_preflight), every missing
  piece named in one sentence before any model work (then the run stops);
* environment: torch/CUDA versions, the device, its compute capability, memory and shared memory per block,
  the kernels' launch configurations for it;
* kernels: the fused kernels timed against today's path and bitsandbytes (early: the most decisive figures);
* real-shape layers: a 1-layer checkpoint with the 26B-A4B's exact shapes is written, loaded in NF4 and
  stepped;
* real shape for real: the 30-layer model at vocabulary 262,144 built on the GPU (no download, no
  checkpoint), one canvas forward timed at 8K and 32K against the traffic model's prediction;
* CUDA tests: `pytest -m gpu tests/engine` (bounded by what is left of the time limit);
* syncs: one draft's decoder steps under `torch.cuda.set_sync_debug_mode("warn")`, syncs counted per step;
* step memory: `torch.cuda.max_memory_allocated` over a step vs the fit's step term, as bytes per cell;
* compile: `torch.compile` of the real-shape NF4 experts forward (the bitsandbytes fake-kernel fix);
* fast path: a draft with `LETTERPRESS_FASTPATH=1`;
* roofline: time per decoder forward vs the weight bytes read at the measured copy bandwidth.

Every check records its pass rule (`rule`) and is "ok" only when the rule held; a rule about the GPU is
measured but not judged in the dry run ("skipped"). `--prepare DIR` builds the folder to carry to the lent
machine (engine.tools.gpu_carry). Every check is bounded; the run as a whole stops at `--time-limit`
seconds (default 480, at most 480): a watchdog writes the report as it stands, marks the run "timed_out" and
exits with 124. The report is rewritten after every check, so a killed run still leaves the checks that
finished.

`--dry-run` runs every check on the CPU with stand-ins (the tiny checkpoint instead of the real-shape one, the
CPU sync audit instead of CUDA's debug mode, live tensor bytes instead of the CUDA allocator, the meta device
and `aot_eager` for the compile, the GPU tests only collected): everything but the device is exercised.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

MAX_SECONDS = 480
ALWAYS = {"preflight", "environment"}


class Report:
    """The report on disk, rewritten after each check (and by the watchdog)."""

    def __init__(self, out: Path, dry_run: bool, limit: float) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.data: dict[str, Any] = {
            "tool": "gpu-check",
            "dry_run": dry_run,
            "time_limit_s": limit,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "status": "running",
            "checks": {},
        }

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def record(self, name: str, result: dict[str, Any]) -> None:
        with self.lock:
            self.data["checks"][name] = result
            self._write()

    def finish(self, status: str) -> None:
        with self.lock:
            self.data["status"] = status
            self.data["elapsed_s"] = round(self.elapsed(), 1)
            self._write()

    def _write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / "report.json.tmp"
        tmp.write_text(json.dumps(self.data, indent=2, default=str), encoding="utf-8")
        os.replace(tmp, self.out / "report.json")
        (self.out / "summary.txt").write_text(summary(self.data), encoding="utf-8")


def summary(data: dict[str, Any]) -> str:
    lines = [
        f"gpu-check {'(dry run, CPU) ' if data['dry_run'] else ''}{data['status']} "
        f"after {data.get('elapsed_s', '?')} s (limit {data['time_limit_s']} s)"
    ]
    for name, result in data["checks"].items():
        verdict = "ok" if result.get("ok") else ("skipped" if result.get("skipped") else "FAILED")
        lines.append(f"  {name:<18} {verdict:<8} {result.get('line', result.get('error', ''))}")
        if result.get("rule"):
            lines.append(f"  {'':<18} {'rule':<8} {result['rule']}")
    return "\n".join(lines) + "\n"


def _preflight(ctx: dict[str, Any]) -> dict[str, Any]:
    """Versions first, before any model work: every missing or unusable piece named in one sentence."""
    from engine.tools.gpu_preflight import preflight

    return preflight(need_cuda=not ctx["dry_run"])


def _gpu_only(rule: str, measured: dict[str, Any], line: str) -> dict[str, Any]:
    """A check whose rule is about the GPU, run as a dry-run stand-in: measured and reported, not judged."""
    return {
        **measured,
        "rule": rule,
        "skipped": True,
        "ok": False,
        "line": f"{line} (rule judged on the GPU only)",
    }


def _env(ctx: dict[str, Any]) -> dict[str, Any]:
    import torch
    import transformers

    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
    }
    try:
        import bitsandbytes

        info["bitsandbytes"] = bitsandbytes.__version__
    except ImportError:
        info["bitsandbytes"] = None
    if ctx["device"] == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(
            device=props.name,
            capability=list(torch.cuda.get_device_capability(0)),
            memory_bytes=props.total_memory,
            cuda=torch.version.cuda,
        )
    else:
        info.update(device=platform.processor() or platform.machine(), capability=None)
    from engine.fastpath import grouped_mm_kind

    info["grouped_mm"] = grouped_mm_kind(torch.device(ctx["device"]))
    kernels_off = None
    if ctx["device"] == "cuda":
        from engine.kernels import configs

        shared, capability = configs.device_limits(torch.device("cuda"))
        kernels_off = configs.unavailable_reason(torch.device("cuda"))
        info["shared_memory_per_block_optin"] = shared
        info["kernel_configs"] = {
            key: vars(c) if (c := configs.select(key, shared, capability)) else None
            for key in configs.CONFIGS
        }
    info["kernels_off"] = kernels_off
    info["rule"] = "on a GPU: the fused kernels have a launch configuration that fits this device"
    info["ok"] = kernels_off is None
    info["line"] = (
        f"{info['device']} cc {info['capability']} torch {info['torch']} grouped_mm={info['grouped_mm']}"
        + (f"; kernels off: {kernels_off}" if kernels_off else "")
    )
    return info


def _model(ctx: dict[str, Any]) -> dict[str, Any]:
    """Write and load the checkpoint the other checks step: real-shape (GPU) or tiny (dry run)."""
    from engine.session import Session

    folder = Path(ctx["tmp"]) / "ckpt"
    t0 = time.perf_counter()
    if ctx["dry_run"]:
        from engine.tools.tiny import make_tiny

        make_tiny(folder, canvas_length=32)
        kind = "tiny (dry-run stand-in)"
    else:
        from engine.tools.real_shape import make_real_shape

        make_real_shape(folder, layers=1, vocab_size=4096)
        kind = "1 layer of 26B-A4B shapes, vocabulary 4096"
    written = time.perf_counter() - t0
    session = Session()
    session.load(folder, device=ctx["device"], quantization="nf4")
    ctx["session"] = session
    loaded = time.perf_counter() - t0 - written
    result = _draft(ctx, max_steps=4)
    return {
        "checkpoint": kind,
        "write_s": round(written, 1),
        "load_s": round(loaded, 1),
        **result,
        "rule": "the checkpoint loads in NF4 and a 4-step draft writes text",
        "ok": result["steps"] >= 1 and result["text_chars"] > 0,
        "line": f"{kind}: written {written:.1f} s, loaded {loaded:.1f} s, 4 steps {result['wall_s']:.2f} s",
    }


def _draft(ctx: dict[str, Any], max_steps: int, candidates: int = 1) -> dict[str, Any]:
    from engine.api import DenoiseSettings, DraftRequest

    session = ctx["session"]
    canvas = session.info.canvas_length
    t0 = time.perf_counter()
    result = session.run(
        DraftRequest(
            "In the morning the harbour was",
            max_new_tokens=canvas,
            settings=DenoiseSettings(seed=1, max_steps=max_steps, candidates=candidates),
        )
    )
    out = session.last_output
    return {
        "wall_s": round(time.perf_counter() - t0, 3),
        "steps": out.steps,
        "forwards": out.forwards,
        "text_chars": len(result.text),
    }


def _cuda_tests(ctx: dict[str, Any]) -> dict[str, Any]:
    left = max(10, int(ctx["deadline"] - time.monotonic() - 120))  # leave room for the checks after it
    # -W: the lent image has no pytest-qt, so pyproject's qt_* options are unknown there, which pytest warns
    # about and our filterwarnings=error would turn into an internal error before a test runs
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-m",
        "gpu",
        "tests/engine",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::pytest.PytestConfigWarning",
    ]
    if ctx["dry_run"]:
        cmd.append("--collect-only")
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=min(left, 240),
            cwd=Path(__file__).resolve().parents[2],
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"pytest -m gpu ran past {min(left, 240)} s"}
    tail = proc.stdout.strip().splitlines()[-1:] or [""]
    return {
        "rule": "pytest -m gpu tests/engine passes (exit 0; 5: none collected)",
        "ok": proc.returncode in (0, 5),
        "returncode": proc.returncode,
        "line": tail[0],
        "stdout_tail": proc.stdout[-3000:],
    }


def _real_shape_30(ctx: dict[str, Any]) -> dict[str, Any]:
    """The whole 26B-A4B for real on the GPU: 30 layers at the real vocabulary (262,144), random weights built
    directly on the device and quantized there (engine.tools.realbench.build_model: no checkpoint on disk),
    one canvas forward timed at 8K and 32K tokens of context. Not built in the dry run: one real-shaped layer
    takes over 2 minutes on 2 busy CPU cores; its code path (`run_real_shape`) is tested on the CPU by
    tests/engine/tools/test_bench.py."""
    import torch

    from engine.tools import traffic
    from engine.tools.realbench import REAL_LAYERS, REAL_VOCAB, run_real_shape

    rule = (
        "the 30-layer model at vocabulary 262,144 builds on the GPU and its forward at 8K is within 0.5-2x "
        "the traffic model's eager prediction of today's path for this card"
    )
    if ctx["device"] != "cuda":
        line = "not built on the CPU (run_real_shape is tested by tests/engine/tools/test_bench.py)"
        return _gpu_only(rule, {}, line)
    layers, vocab, prefixes = REAL_LAYERS, REAL_VOCAB, [8192, 32768]
    report = run_real_shape(
        layers=layers, device="cuda", vocab=vocab, prefixes=prefixes, experts="grouped", iters=3
    )
    forwards = {str(p["prefix"]): p["forward_ms_built"] for p in report["prefixes"]}
    measured: dict[str, Any] = {
        "layers": layers,
        "vocab": vocab,
        "build_s": report["build_seconds"],
        "forward_ms": forwards,
        "peak_memory_gb": report["peak_memory_gb"],
        "report": report,
    }
    line = f"{layers} layers, vocabulary {vocab:,}: forward ms by context {forwards}"
    name = torch.cuda.get_device_name()
    card = next((c for key, c in traffic.CARDS.items() if key in name), None)
    if card is None:
        return _gpu_only(rule + " (a card the traffic model knows)", measured, line)
    predicted = traffic.predict_path(traffic.forward_ops(8192, 1), card, "today", graphs=False)
    ratio = forwards["8192"] / predicted
    measured["predicted_today_eager_ms_8k"] = round(predicted, 2)
    return {
        **measured,
        "rule": rule,
        "ok": 0.5 <= ratio <= 2.0,
        "line": f"{line}; 8K is {ratio:.2f}x the traffic model's {predicted:.1f} ms ({card.name})",
    }


def _syncs(ctx: dict[str, Any]) -> dict[str, Any]:
    import torch

    from engine.denoise import device_code_path

    session = ctx["session"]
    steps = 4
    if ctx["device"] == "cuda":
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                _draft(ctx, max_steps=steps)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        count = sum("synchroniz" in str(w.message).lower() for w in seen)
        per_step = count / steps
        return {
            "syncs": count,
            "steps": steps,
            "per_step": per_step,
            "rule": "at most 2 host synchronisations per step (the step's one small copy, and its end)",
            "ok": per_step <= 2,
            "line": f"{count} syncs over {steps} steps ({per_step:.1f} per step, debug mode)",
        }
    from engine.tools.sync_audit import auditing

    model = session.model
    original = model.forward
    state = {"depth": 0}

    def forward(*a: Any, **k: Any) -> Any:
        state["depth"] += 1
        try:
            return original(*a, **k)
        finally:
            state["depth"] -= 1

    from engine.fastpath import GROUPED_MM_ENV

    model.forward = forward
    old = os.environ.get(GROUPED_MM_ENV)
    os.environ[GROUPED_MM_ENV] = "triton"  # the path an 8.x GPU takes, its kernel under the interpreter
    try:
        with auditing((8, 6), quiet=lambda: state["depth"] == 0 or _in_kernel()) as audit, device_code_path():
            _draft(ctx, max_steps=steps)
    finally:
        del model.forward
        if old is None:
            os.environ.pop(GROUPED_MM_ENV, None)
        else:
            os.environ[GROUPED_MM_ENV] = old
    return {
        "syncing_ops_in_forward": dict(audit.syncing),
        "ops_seen": sum(audit.ops.values()),
        "rule": "no syncing op inside a decoder forward",
        "ok": audit.total_syncs == 0,
        "line": f"CPU audit (stand-in for cc 8.6): {audit.total_syncs} syncing ops in the decoder forwards",
    }


def _in_kernel() -> bool:
    """Inside an emulated Triton launch (the interpreter's own host work is not the path's: on a GPU the
    launch is asynchronous)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "grouped_mm_nt":
            return "interpret" in frame.f_locals and frame.f_locals.get("grid") is not None
        frame = frame.f_back
    return False


def _step_memory(ctx: dict[str, Any]) -> dict[str, Any]:
    import torch

    from engine.weights.fit import STEP_BYTES_PER_CELL_BF16

    session = ctx["session"]
    canvas = session.info.canvas_length
    vocab = int(session.model.config.text_config.vocab_size)
    rows = 3
    if ctx["device"] == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        _draft(ctx, max_steps=2, candidates=rows)
        peak = torch.cuda.max_memory_allocated() - base
        how = (
            "torch.cuda.max_memory_allocated over a 2-step draft (weights excluded; KV cache and buffers in)"
        )
    else:
        from engine.tools.step_memory import measure_step_memory

        peak = measure_step_memory(rows, model=session.model, steps=2).peak_bytes
        how = "live tensor bytes over a 2-step draft (dry-run stand-in)"
    per_cell = peak / (rows * canvas * vocab)
    measured = {
        "rows": rows,
        "peak_bytes": peak,
        "bytes_per_cell": round(per_cell, 3),
        "fit_bytes_per_cell": STEP_BYTES_PER_CELL_BF16,
        "method": how,
    }
    rule = f"peak step memory <= the fit's {STEP_BYTES_PER_CELL_BF16} B per canvas x vocabulary cell"
    line = f"{per_cell:.2f} B per canvas x vocabulary cell (fit counts {STEP_BYTES_PER_CELL_BF16})"
    if ctx["dry_run"] or vocab < 100_000:
        # at a small vocabulary the body's activations dominate: the per-cell rule only means something at
        # the real one
        return _gpu_only(rule + " at the real vocabulary", measured, line)
    return {**measured, "rule": rule, "ok": per_cell <= STEP_BYTES_PER_CELL_BF16, "line": line}


def _compile(ctx: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import DiffusionGemmaConfig
    from transformers.models.diffusion_gemma.modeling_diffusion_gemma import DiffusionGemmaTextExperts

    from engine import fastpath
    from engine.tools.real_shape import real_config_dict
    from engine.weights.quantize import _convert_experts

    # Any: transformers types `text_config` as config | dict | None, and the experts below become NF4 stacks
    # (`NF4Experts`) in place, which their class does not declare.
    config: Any = DiffusionGemmaConfig(**real_config_dict(layers=1, vocab_size=4096)).text_config
    device = "meta" if ctx["dry_run"] else "cuda"
    with torch.device("meta"):
        experts: Any = DiffusionGemmaTextExperts(config)
    _convert_experts(experts, torch.bfloat16)
    if device == "cuda":
        gen = torch.Generator(device="cuda").manual_seed(0)
        experts.gate_up_proj.materialize("cuda")
        experts.down_proj.materialize("cuda")
        for e in range(config.num_experts):
            experts.gate_up_proj.store(
                torch.randn(*experts.gate_up_proj.shape, device="cuda", generator=gen) * 0.02, e
            )
            experts.down_proj.store(
                torch.randn(*experts.down_proj.shape, device="cuda", generator=gen) * 0.02, e
            )
    hidden = torch.randn(256, config.hidden_size, dtype=torch.bfloat16, device=device)
    index = torch.randint(0, config.num_experts, (256, config.top_k_experts), device=device)
    weights = torch.rand(256, config.top_k_experts, dtype=torch.bfloat16, device=device)
    backend = "aot_eager" if ctx["dry_run"] else "inductor"
    torch._dynamo.reset()
    fn = torch.compile(
        lambda h, i, w: fastpath.sync_free_nf4_experts_forward(experts, h, i, w), backend=backend
    )
    t0 = time.perf_counter()
    with torch.inference_mode():
        eager = fastpath.sync_free_nf4_experts_forward(experts, hidden, index, weights)
        out = fn(hidden, index, weights)
    seconds = time.perf_counter() - t0
    same = None
    if device == "cuda":
        same = float((out.float() - eager.float()).abs().max())
    fastpath.free_stack_buffers()
    scale = float(eager.float().abs().max()) if device == "cuda" else 0.0
    return {
        "backend": backend,
        "device": device,
        "compile_s": round(seconds, 1),
        "max_abs_diff": same,
        "rule": "compiles; on the GPU max |compiled - eager| <= 2**-6 x max |eager| (bf16)",
        "ok": same is None or same <= 2**-6 * scale,
        "line": f"real-shape NF4 experts forward compiled ({backend}, {device}) in {seconds:.1f} s"
        + (f", max |compiled - eager| {same:.3g}" if same is not None else ""),
    }


def _fastpath_draft(ctx: dict[str, Any]) -> dict[str, Any]:
    from engine.fastpath import ENV_SWITCH

    old = os.environ.get(ENV_SWITCH)
    os.environ[ENV_SWITCH] = "1"
    try:
        result = _draft(ctx, max_steps=4)
    finally:
        if old is None:
            os.environ.pop(ENV_SWITCH, None)
        else:
            os.environ[ENV_SWITCH] = old
    note = "" if ctx["device"] == "cuda" else " (the fast path is CUDA-only: the CPU ran the eager loop)"
    return {
        **result,
        "rule": "the draft runs its steps and writes text",
        "ok": result["steps"] >= 1 and result["text_chars"] > 0,
        "line": f"4 steps in {result['wall_s']:.2f} s{note}",
    }


def _roofline(ctx: dict[str, Any]) -> dict[str, Any]:
    import torch

    session = ctx["session"]
    device = torch.device(ctx["device"])
    n = (256 << 20) if device.type == "cuda" else (16 << 20)
    a = torch.empty(n, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    for _ in range(2):
        b.copy_(a)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        b.copy_(a)
    if device.type == "cuda":
        torch.cuda.synchronize()
    bandwidth = 2 * 5 * n / (time.perf_counter() - t0)  # read + write
    del a, b
    weights = sum(
        t.numel() * t.element_size() for t in [*session.model.parameters(), *session.model.buffers()]
    )
    _draft(ctx, max_steps=4)
    out = session.last_output
    # the decoder forwards alone (CUDA events on the GPU), not the draft's wall time over its forwards
    per_forward = out.forward_seconds / max(1, out.forwards)
    floor = weights / bandwidth
    measured = {
        "bandwidth_gb_s": round(bandwidth / 1e9, 1),
        "weight_bytes": weights,
        "per_forward_s": per_forward,
        "roofline_s": floor,
        "ratio": round(per_forward / floor, 2) if floor else None,
    }
    rule = f"one decoder forward <= {ROOFLINE_RATIO} x the weights' bytes at the measured copy bandwidth"
    line = (
        f"{per_forward * 1e3:.1f} ms per forward vs {floor * 1e3:.2f} ms roofline "
        f"({weights / 1e9:.2f} GB at {bandwidth / 1e9:.0f} GB/s): x{per_forward / floor:.1f}"
    )
    if ctx["dry_run"]:
        return _gpu_only(rule, measured, line)
    return {**measured, "rule": rule, "ok": per_forward <= ROOFLINE_RATIO * floor, "line": line}


def _kernels(ctx: dict[str, Any]) -> dict[str, Any]:
    """The fused kernels (engine/kernels) against the traffic model and bitsandbytes' path; without a CUDA
    device (the dry run) it says so plainly instead of timing anything."""
    from engine.tools.kernel_timing import time_kernels

    rule = (
        "every fused kernel launches on this device and its output is within 2**-6 x max |ref| of "
        "today's path"
    )
    if ctx["dry_run"]:
        return {"rule": rule, "skipped": True, "ok": False, "line": "no CUDA device: kernels not timed"}
    report = time_kernels(alternatives=1, experts=128, iters=10)
    line = report.get("message") or f"kernels timed on {report.get('device')}"
    errors = [k for k, v in report.get("ops", {}).items() if "error" in v]
    return {**report, "rule": rule, "ok": bool(report.get("timed")) and not errors, "line": line}


# Cheapest and most decisive first: the versions, the device, the kernels (do they launch, are they right,
# how fast), then the model and what it measures; the GPU tests, the longest, last.
CHECKS: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = [
    ("preflight", _preflight),
    ("environment", _env),
    ("kernels", _kernels),
    ("real_shape_layer", _model),
    ("real_shape_30", _real_shape_30),
    ("syncs", _syncs),
    ("step_memory", _step_memory),
    ("roofline", _roofline),
    ("compile", _compile),
    ("fastpath_draft", _fastpath_draft),
    ("cuda_tests", _cuda_tests),
]
ROOFLINE_RATIO = 1.5  # the traffic model's bar for a forward with the kernels (docs/performance.md)
NEEDS_MODEL = {"syncs", "step_memory", "fastpath_draft", "roofline"}


def run(out: Path, *, dry_run: bool, time_limit: float, only: list[str] | None = None) -> dict[str, Any]:
    """Run the checks (all, or `only`) and return the report's data; exits the process with 124 at the
    limit."""
    limit = min(float(time_limit), MAX_SECONDS)
    report = Report(out, dry_run, limit)
    deadline = time.monotonic() + limit

    def watchdog() -> None:
        report.finish("timed_out")
        sys.stderr.write(f"gpu-check: time limit of {limit:.0f} s reached; report in {out}\n")
        sys.stderr.flush()
        os._exit(124)

    timer = threading.Timer(limit, watchdog)
    timer.daemon = True
    timer.start()
    t0 = time.perf_counter()
    first = _preflight({"dry_run": dry_run})  # before torch is imported: it may be what is missing
    first["seconds"] = round(time.perf_counter() - t0, 2)
    report.record("preflight", first)
    if not first["ok"]:
        timer.cancel()
        report.finish("preflight_failed")
        sys.stderr.write(first["line"] + "\n")
        return report.data
    import torch

    device = "cuda" if (not dry_run and torch.cuda.is_available()) else "cpu"
    with tempfile.TemporaryDirectory(prefix="letterpress-gpu-check-") as tmp:
        ctx: dict[str, Any] = {"dry_run": dry_run, "device": device, "tmp": tmp, "deadline": deadline}
        for name, check in CHECKS:
            if name == "preflight":
                continue
            if (
                only
                and name not in only
                and name not in ALWAYS
                and not (name == "real_shape_layer" and NEEDS_MODEL & set(only))
            ):
                continue
            if name in NEEDS_MODEL and "session" not in ctx:
                report.record(name, {"skipped": True, "error": "no model (the real-shape check failed)"})
                continue
            t0 = time.perf_counter()
            try:
                result = check(ctx)
                result.setdefault("ok", False)  # "ok" only where the check's rule said so
            except Exception as exc:  # noqa: BLE001 - one failed check must not stop the others
                result = {
                    "ok": False,
                    "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                    "traceback": traceback.format_exc()[-3000:],
                }
            result["seconds"] = round(time.perf_counter() - t0, 2)
            report.record(name, result)
        ctx.pop("session", None)
    timer.cancel()
    failed = [n for n, r in report.data["checks"].items() if not r.get("ok") and not r.get("skipped")]
    report.finish("failed" if failed else "ok")
    return report.data


def _prepare(folder: Path, wheels_from: Path | None) -> int:
    from engine.tools.gpu_carry import CarryDownloadFailed, CarryTooLarge, prepare

    try:
        manifest = prepare(folder, wheels_from=wheels_from)
    except (CarryTooLarge, CarryDownloadFailed) as exc:
        sys.stderr.write(f"gpu-check --prepare: {exc}\n")
        return 1
    carried = ", ".join(f"{k} {v}" for k, v in manifest["carried"].items()) or "nothing"
    sys.stdout.write(
        f"gpu-check --prepare: {folder} is {manifest['total_bytes'] / 2**20:.1f} MiB (limit 60): the project "
        f"and wheels for {carried}; run `bash {folder}/run.sh --out OUT` on the GPU machine\n"
    )
    return 0


def main_gpu_check(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        default=None,
        help="folder for report.json and summary.txt (default: gpu-check-<date> in the current folder)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=MAX_SECONDS,
        help=f"stop after this many seconds, whatever is running (default and most: {MAX_SECONDS})",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="run every check on the CPU with stand-ins (no GPU needed)"
    )
    parser.add_argument("--only", action="append", choices=[n for n, _ in CHECKS], help="run only this check")
    parser.add_argument(
        "--prepare",
        metavar="DIR",
        default=None,
        help="build the folder to carry to the lent GPU machine (the project, the wheels its image lacks, "
        "run.sh; at most 60 MiB) and exit; then run DIR/run.sh [gpu-check options] there",
    )
    parser.add_argument(
        "--wheels-from",
        metavar="DIR",
        default=None,
        help="with --prepare: take the wheels from this folder instead of downloading them",
    )
    args = parser.parse_args(argv)
    if args.prepare:
        return _prepare(Path(args.prepare), Path(args.wheels_from) if args.wheels_from else None)
    out = Path(args.out or f"gpu-check-{time.strftime('%Y%m%d-%H%M%S')}")
    data = run(out, dry_run=args.dry_run, time_limit=args.time_limit, only=args.only)
    sys.stdout.write(summary(data))
    return 0 if data["status"] == "ok" else 1
