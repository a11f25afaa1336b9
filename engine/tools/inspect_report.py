"""`python -m engine inspect`: load a checkpoint exactly as the app would and report where the memory goes.

Prints the parameter count by kind (experts, linear, embedding, other), the bytes resident by dtype, the share
of expert and linear weights stored in 4 bits, the peak host RAM the load added, and the fit estimate for
every device found. Peak RAM is the process's high-water mark (ru_maxrss, reset first where Linux allows it),
minus the resident size just before the load, so run it in its own process (as the command line does).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class InspectReport:
    model: str
    device: str
    quantization: str
    params_by_kind: dict[str, int]
    bytes_by_dtype: dict[str, int]
    resident_bytes: int
    quantized_part_bytes: int  # what the linears + experts occupy now
    quantized_part_bf16_bytes: int  # what they would occupy in bf16
    fourbit_fraction: float  # share of linear + expert weights stored in 4 bits
    load_seconds: float
    rss_before_bytes: int
    peak_rss_bytes: int
    peak_load_bytes: int  # peak_rss - rss_before: what the load itself added at its worst
    fits: list[dict[str, Any]] = field(default_factory=list)
    notice: str = ""
    plan: list[dict[str, Any]] = field(
        default_factory=list
    )  # per module kind: storage and weights, as loaded

    @property
    def quantized_ratio(self) -> float:
        return (
            self.quantized_part_bytes / self.quantized_part_bf16_bytes
            if self.quantized_part_bf16_bytes
            else 0.0
        )

    def lines(self) -> list[str]:
        mb = 1e6
        out = [
            f"model        {self.model}",
            f"device       {self.device}   quantization "
            f"{self.quantization}   loaded in {self.load_seconds:.1f} s",
            "parameters   "
            + ", ".join(f"{k} {v:,}" for k, v in self.params_by_kind.items())
            + f"  (total {sum(self.params_by_kind.values()):,})",
            "resident     "
            + ", ".join(f"{k} {v / mb:,.1f} MB" for k, v in self.bytes_by_dtype.items())
            + f"  (total {self.resident_bytes / mb:,.1f} MB)",
            f"4-bit        {self.fourbit_fraction:.1%} of expert + linear weights; they take "
            f"{self.quantized_part_bytes / mb:,.1f} MB = {self.quantized_ratio:.3f} x their bf16 size "
            f"({self.quantized_part_bf16_bytes / mb:,.1f} MB)",
            f"host RAM     peak {self.peak_rss_bytes / mb:,.1f} MB, {self.rss_before_bytes / mb:,.1f} MB "
            f"before the load: the load added at most {self.peak_load_bytes / mb:,.1f} MB = "
            f"{self.peak_load_bytes / max(1, self.resident_bytes):.2f} x the resident weights",
        ]
        if self.plan:
            out.append("plan         per module kind, as loaded:")
            out.extend(
                f"  {p['label']:<13} {p['storage']:>9}  {p['weights']:>15,} weights" for p in self.plan
            )
        for fit in self.fits:
            out.append("")
            out.extend(fit["lines"])
        if self.notice:
            out.append(f"notice       {self.notice}")
        return out


def current_rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            import os

            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss()


def peak_rss() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(usage if sys.platform == "darwin" else usage * 1024)


def reset_peak_rss() -> bool:
    """Linux lets a process reset its high-water mark (VmHWM); elsewhere the peak includes earlier work."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak_since_reset() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return peak_rss()


def analyse(model: Any) -> tuple[dict[str, int], dict[str, int], int, int, float]:
    """(params by kind, bytes by dtype, quantized-part bytes, its bf16 size, 4-bit fraction of
    linear+experts)."""
    from torch import nn

    from engine.weights.quantize import Int8Linear, NF4Weight, is_experts, text_stacks

    kinds = {"experts": 0, "linear": 0, "embedding": 0, "other": 0}
    by_dtype: dict[str, int] = {}
    seen: set[int] = set()
    q_bytes = q_logical = fourbit = 0

    def add_tensor(t: Any) -> int:
        if id(t) in seen:
            return 0
        seen.add(id(t))
        nbytes = t.numel() * t.element_size()
        key = str(t.dtype).removeprefix("torch.")
        by_dtype[key] = by_dtype.get(key, 0) + nbytes
        return nbytes

    experts_modules = set()
    for _, stack in text_stacks(model):
        for module in stack.modules():
            if is_experts(module):
                experts_modules.add(id(module.gate_up_proj))
                experts_modules.add(id(module.down_proj))
    for module_name, module in model.named_modules():
        if isinstance(
            module, Int8Linear
        ):  # nf4-mixed: attention / dense MLP at 8 bits (not counted as 4-bit)
            if id(module) in seen:
                continue
            seen.add(id(module))
            nbytes = sum(b.numel() * b.element_size() for b in module._buffers.values() if b is not None)
            by_dtype["int8"] = by_dtype.get("int8", 0) + nbytes
            kinds["linear"] += module.logical_numel
            q_bytes += nbytes
            q_logical += module.logical_numel
            continue
        if isinstance(module, NF4Weight):
            if id(module) in seen:
                continue
            seen.add(id(module))
            nbytes = 0
            for buf in module._buffers.values():
                if buf is not None and id(buf) not in seen:
                    seen.add(id(buf))
                    nbytes += buf.numel() * buf.element_size()
            by_dtype["nf4"] = by_dtype.get("nf4", 0) + nbytes
            kind = "experts" if id(module) in experts_modules else "linear"
            kinds[kind] += module.logical_numel
            q_bytes += nbytes
            q_logical += module.logical_numel
            fourbit += module.logical_numel
            continue
        for _name, p in module._parameters.items():
            if p is None or id(p) in seen:
                continue
            nbytes = add_tensor(p)
            if is_experts(module):
                kind = "experts"
            elif module_name.endswith("router.proj"):
                kind = (
                    "other"  # the router is planned 16-bit (engine.weights.plan), like the norms and scales
                )
            elif isinstance(module, nn.Linear) and module is not getattr(model, "lm_head", None):
                kind = "linear"
            elif isinstance(module, nn.Embedding) or module is getattr(model, "lm_head", None):
                kind = "embedding"
            else:
                kind = "other"
            kinds[kind] += p.numel()
            if kind in ("experts", "linear"):
                q_bytes += nbytes
                q_logical += p.numel()
        for b in module._buffers.values():
            if b is not None:
                add_tensor(b)
    fraction = fourbit / q_logical if q_logical else 0.0
    return kinds, by_dtype, q_bytes, 2 * q_logical, fraction


def observed_plan(model: Any) -> list[dict[str, Any]]:
    """What a loaded model actually stores per module kind: storages seen and logical weights (shared modules
    once). `inspect` prints it next to the planned one, so a plan that did not apply shows."""
    from torch import nn

    from engine.weights.plan import KIND_LABELS, KINDS, Kind, linear_kind
    from engine.weights.quantize import Int8Linear, NF4Weight, is_experts, text_stacks

    seen: set[int] = set()
    found: dict[Kind, dict[str, int]] = {k: {} for k in KINDS}

    def add(kind: Kind, storage: str, weights: int, key: int) -> None:
        if key in seen:
            return
        seen.add(key)
        found[kind][storage] = found[kind].get(storage, 0) + weights

    def dtype_name(t: Any) -> str:
        return str(t.dtype).removeprefix("torch.")

    for _prefix, stack in text_stacks(model):
        for name, module in stack.named_modules():
            if is_experts(module):
                for part in (module.gate_up_proj, module.down_proj):
                    storage = "nf4" if isinstance(part, NF4Weight) else dtype_name(part)
                    add(
                        "experts",
                        storage,
                        part.logical_numel if isinstance(part, NF4Weight) else part.numel(),
                        id(part),
                    )
                continue
            kind = linear_kind(name)
            if isinstance(module, NF4Weight) and kind:
                add(kind, "nf4", module.logical_numel, id(module))
            elif isinstance(module, Int8Linear) and kind:
                add(kind, "int8", module.logical_numel, id(module))
            elif isinstance(module, nn.Linear) and kind:
                add(kind, dtype_name(module.weight), module.weight.numel(), id(module.weight))
            elif isinstance(module, nn.Embedding):
                add("embedding", dtype_name(module.weight), module.weight.numel(), id(module.weight))
            elif not list(module.children()) and not isinstance(module, (NF4Weight, Int8Linear)):
                for p in module._parameters.values():
                    if p is not None:
                        add("norms", dtype_name(p), p.numel(), id(p))
    return [
        {
            "kind": k,
            "label": KIND_LABELS[k],
            "storage": "+".join(sorted(found[k])) or "-",
            "weights": sum(found[k].values()),
        }
        for k in KINDS
    ]


def run_inspect(model_dir: str, quantization: str, device: str, *, use_cache: bool = True) -> InspectReport:
    import gc
    import os

    from engine.weights.fit import devices_found, estimate
    from engine.weights.loader import validate_checkpoint

    # A missing or broken folder is reported before anything heavy is imported or allocated.
    config = validate_checkpoint(model_dir).config

    # Import the heavy libraries first, so the measured peak is the load's and not the imports'.
    import bitsandbytes  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
    from transformers import DiffusionGemmaForBlockDiffusion  # noqa: F401

    from engine import attention
    from engine.weights.loader import load_model

    attention.install()  # as the session does: grouped-query attention without the K/V copy
    if not use_cache:
        os.environ["LETTERPRESS_QCACHE"] = "off"
    gc.collect()
    rss_before = current_rss()
    reset = reset_peak_rss()
    start = time.perf_counter()
    loaded = load_model(model_dir, device=device, quantization=quantization)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    peak = _peak_since_reset() if reset else peak_rss()
    kinds, by_dtype, q_bytes, q_bf16, fraction = analyse(loaded.model)
    fits = []
    for mem in devices_found():
        for precision in (
            ("nf4", "nf4-mixed", "bf16") if mem.device.startswith("cuda") else ("nf4", "nf4-mixed", "fp32")
        ):
            est = estimate(
                config, precision, device=f"{mem.device} ({mem.name})", available_bytes=mem.free_bytes
            )
            fits.append(
                {
                    "device": mem.device,
                    "precision": precision,
                    "verdict": est.verdict,
                    "total_bytes": est.total_bytes,
                    "lines": list(est.lines),
                }
            )
    return InspectReport(
        model=str(Path(model_dir)),
        device=loaded.info.device,
        quantization=loaded.info.quantization,
        params_by_kind=kinds,
        bytes_by_dtype=by_dtype,
        resident_bytes=sum(by_dtype.values()),
        quantized_part_bytes=q_bytes,
        quantized_part_bf16_bytes=q_bf16,
        fourbit_fraction=fraction,
        load_seconds=seconds,
        rss_before_bytes=rss_before,
        peak_rss_bytes=peak,
        peak_load_bytes=max(0, peak - rss_before),
        fits=fits,
        notice=loaded.info.notice,
        plan=observed_plan(loaded.model),
    )


def main_inspect(argv: list[str]) -> int:
    """`python -m engine inspect --model DIR [--quantization nf4|none|auto] [--device auto|cpu|cuda]
    [--json]`."""
    from engine.api import EngineError

    parser = argparse.ArgumentParser(prog="python -m engine inspect", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model", metavar="DIR", required=True, help="checkpoint folder (checked before loading)"
    )
    parser.add_argument(
        "--quantization",
        "--quantize",
        dest="quantize",
        choices=["auto", "nf4", "nf4-mixed", "none"],
        default="auto",
        help="nf4: 4-bit weights; none: full precision; auto: as the app chooses "
        "(default auto; --quantize is the old spelling)",
    )
    parser.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where to load: auto picks the GPU when there is one (default auto)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="quantize from the checkpoint, ignoring the cache"
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = parser.parse_args(argv)
    try:
        report = run_inspect(args.model, args.quantize, args.device, use_cache=not args.no_cache)
    except EngineError as exc:  # (anything unexpected is caught by `python -m engine`, as one line)
        if args.json:
            print(json.dumps({"error": exc.kind, "message": exc.message}))
        else:
            print(f"error: {exc.message}", file=sys.stderr)
        return 2
    if args.json:
        data = asdict(report)
        data["quantized_ratio"] = report.quantized_ratio
        print(json.dumps(data, indent=1))
    else:
        print("\n".join(report.lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main_inspect(sys.argv[1:]))
