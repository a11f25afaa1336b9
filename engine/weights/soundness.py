"""The checks that a model folder will actually produce text, beyond "the files parse and the shapes agree".

A folder can pass every structural check and still make every draft silently empty or hang: NaN weights, a
rotary base of 0 or a negative norm epsilon (both turn every activation into NaN), a generation_config.json
that is cut short or asks for a billion denoising steps, a chat template that raises or loops when rendered.
`validate.validate_folder` calls each function here before a folder is called ready, so the model manager, the
loader and the command line refuse such a folder with one sentence, the same way.

Everything is bounded: the weight check reads a few KiB per tensor (a sampled check, not a full pass: a load
reads every byte anyway, and a quantized cache then keeps the CRC of what was checked), the template renders
once
with a deadline and the load's cancel event checked on every traced line, and no arithmetic the template asks
for may build a value larger than a few MB. Pure Python (no torch).
"""

from __future__ import annotations

import math
import struct
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from engine.api import LoadCancelledError, ModelDamagedError, UnsupportedModelError

RENDER_SECONDS = 3.0  # a real chat template renders one short conversation in well under 10 ms
MAX_RENDER_CHARS = (
    1_000_000  # no single value a template computes may be larger (the prompt itself is ~100 chars)
)
SAMPLE_BYTES = 4096  # read per sample window
SAMPLES_PER_TENSOR = 3  # at the start, the middle and the end of every floating-point tensor
MAX_DENOISING_STEPS = 4096  # the reference uses 48; the CLI allows 10,000 per request as an explicit choice
MAX_NEW_TOKENS = 1 << 24
FLOAT_DTYPES = {
    "BF16": ("<H", 0x7F80),
    "F16": ("<H", 0x7C00),
    "F32": ("<I", 0x7F800000),
    "F64": ("<Q", 0x7FF0000000000000),
}


# ------------------------------------------------------------------------------------------------------------
# Numbers in config.json and generation_config.json


def _non_finite(value: Any, where: str = "") -> str:
    """The dotted key of the first NaN or infinite number anywhere in a parsed JSON value ('' when none)."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        key, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return key or "(top level)"
        if isinstance(item, dict):
            stack.extend((f"{key}.{k}" if key else str(k), v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{key}[{i}]", v) for i, v in enumerate(item))
    return ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def check_config_numbers(config: dict[str, Any], where: str) -> None:
    """No NaN/infinity anywhere; every rotary base positive; the norm epsilon a small positive number; the
    soft-capping values, when set, positive. Each of these, wrong, makes every output NaN (a silent empty
    draft)."""
    bad = _non_finite(config)
    if bad:
        raise ModelDamagedError(
            f"{where} sets '{bad}' to NaN or infinity, which no model setting can be; the file is damaged. "
            "Download config.json again."
        )
    stack: list[tuple[str, Any]] = [("", config)]
    while stack:
        key, item = stack.pop()
        if isinstance(item, dict):
            stack.extend((f"{key}.{k}" if key else str(k), v) for k, v in item.items())
            continue
        leaf = key.rsplit(".", 1)[-1]
        value = _number(item)
        if leaf == "rope_theta" and (value is None or value <= 0):
            raise ModelDamagedError(
                f"{where} sets '{key}' to {item!r}; the rotary base must be a positive number "
                "(DiffusionGemma uses "
                "10,000 and 1,000,000), and any other value makes every draft empty. Download config.json "
                "again."
            )
        if leaf == "rms_norm_eps" and (value is None or not 0 < value < 1):
            raise ModelDamagedError(
                f"{where} sets '{key}' to {item!r}; the normalization epsilon must be a small positive "
                "number "
                "(DiffusionGemma uses 1e-06), and any other value makes every draft empty. Download "
                "config.json "
                "again."
            )
        if (
            leaf in ("final_logit_softcapping", "attn_logit_softcapping")
            and item is not None
            and (value is None or value <= 0)
        ):
            raise ModelDamagedError(
                f"{where} sets '{key}' to {item!r}; a soft-capping value is a positive number or null. "
                "Download "
                "config.json again."
            )
        if leaf == "partial_rotary_factor" and (value is None or not 0 < value <= 1):
            raise ModelDamagedError(
                f"{where} sets '{key}' to {item!r}; the share of rotated dimensions is between 0 and 1. "
                "Download "
                "config.json again."
            )


def _token_id(value: Any, vocab: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < max(vocab, 1)


def _given(values: dict[str, Any], key: str, default: float) -> Any:
    """`values[key]`, or `default` when it is absent or null: transformers' own `save_pretrained` writes every
    sampler field it was not given as null ("t_min": null, "max_denoising_steps": null, …), and reads a null
    as the model's default, so a null is the default here too and only a value that is set is checked."""
    value = values.get(key)
    return default if value is None else value


def check_generation_config(gen: dict[str, Any], path: Path, vocab: int) -> None:
    """generation_config.json (already parsed by `validate.read_json`): token ids are ids of this vocabulary,
    the step and length bounds are whole numbers a draft can afford, the temperatures and thresholds
    finite. A null anywhere means the model's default, as in transformers."""
    again = f"Download {path.name} again (or delete it: the model's defaults are then used)."
    bad = _non_finite(gen)
    if bad:
        raise ModelDamagedError(f"{path} sets '{bad}' to NaN or infinity; the file is damaged. {again}")
    for key in ("eos_token_id", "pad_token_id", "bos_token_id"):
        value = gen.get(key)
        if value is None:
            continue
        ids = value if isinstance(value, list) and key == "eos_token_id" else [value]
        if not ids or not all(_token_id(i, vocab) for i in ids):
            shown = repr(value)[:60]
            raise ModelDamagedError(
                f"{path} sets '{key}' to {shown}, which is not a token id of this model (whole numbers from "
                "0 to "
                f"{max(vocab - 1, 0):,}{', or a list of them' if key == 'eos_token_id' else ''}). {again}"
            )
    for key, high in (
        ("max_denoising_steps", MAX_DENOISING_STEPS),
        ("max_new_tokens", MAX_NEW_TOKENS),
        ("stability_threshold", MAX_DENOISING_STEPS),
    ):
        value = gen.get(key)
        if value is None:
            continue
        number = _number(value)
        low = 0 if key == "stability_threshold" else 1
        if number is None or not number.is_integer() or not low <= number <= high:
            raise UnsupportedModelError(
                f"{path} sets '{key}' to {str(value)[:40]}; Letterpress accepts a whole number from {low} to "
                f"{high:,} (the reference model uses {48 if key != 'max_new_tokens' else 256}), since each "
                "step "
                f"costs memory and time for every draft. {again}"
            )
    t_min, t_max = _number(_given(gen, "t_min", 0.4)), _number(_given(gen, "t_max", 0.8))
    if t_min is None or t_max is None or not 0 <= t_min < t_max <= 1:
        raise ModelDamagedError(
            f"{path} sets t_min {gen.get('t_min')!r} and t_max {gen.get('t_max')!r}; the noise schedule "
            "needs "
            f"0 <= t_min < t_max <= 1 (the reference uses 0.4 and 0.8). {again}"
        )
    sampler = gen.get("sampler_config")
    if sampler is not None and not isinstance(sampler, dict):
        raise ModelDamagedError(f"{path}: 'sampler_config' is {str(sampler)[:40]}, not an object. {again}")
    bound = _number(_given(sampler or {}, "entropy_bound", 0.1))
    if bound is None or bound <= 0:
        raise ModelDamagedError(
            f"{path} sets sampler_config.entropy_bound to {(sampler or {}).get('entropy_bound')!r}; it must "
            "be a "
            f"positive number (the reference uses 0.1). {again}"
        )
    confidence = _number(_given(gen, "confidence_threshold", 0.005))
    if confidence is None or confidence < 0:
        raise ModelDamagedError(
            f"{path} sets confidence_threshold to {gen.get('confidence_threshold')!r}; it must be a number "
            "of 0 or "
            f"more. {again}"
        )


# ------------------------------------------------------------------------------------------------------------
# The chat template, rendered once


class _Deadline:
    """A trace function that stops a render past its deadline or when the load is cancelled (checked on every
    traced line of the template's compiled Python, so a template that loops forever cannot hang the load)."""

    def __init__(self, seconds: float, cancel: threading.Event | None) -> None:
        self.until = time.monotonic() + seconds
        self.cancel = cancel
        self.cancelled = False
        self.expired = False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        if self.cancel is not None and self.cancel.is_set():
            self.cancelled = True
            raise LoadCancelledError("Loading was cancelled.")
        if time.monotonic() > self.until:
            self.expired = True
            raise TimeoutError("the chat template did not finish rendering")
        return self


def _bounded_environment() -> Any:
    """transformers' own template environment (so what passes here renders the same in a draft), with the
    arithmetic that can build huge values in one C call (`'x' * 10**10`, `10 ** 10 ** 10`) bounded."""
    from transformers.utils.chat_template_utils import _cached_compile_jinja_template

    def compile_bounded(template: str) -> Any:
        # A fresh environment (the drafts' cached one is untouched), taken from an empty template: compiling
        # the
        # real one before the operators are intercepted would fold `'x' * 10**9` into a 1 GB constant.
        env = _cached_compile_jinja_template("").environment
        if not getattr(env, "_letterpress_bounded", False):
            env.intercepted_binops = frozenset({"*", "**"})
            original = env.call_binop

            def call_binop(context: Any, operator: str, left: Any, right: Any) -> Any:
                if operator == "**" and isinstance(right, (int, float)) and abs(right) > 64:
                    raise OverflowError("a power too large for a chat template")
                if operator == "*":
                    size = max(
                        (len(v) for v in (left, right) if isinstance(v, (str, list, tuple))), default=0
                    )
                    count = max((abs(v) for v in (left, right) if isinstance(v, int)), default=0)
                    if size and size * count > MAX_RENDER_CHARS:
                        raise OverflowError("a repetition too large for a chat template")
                return original(context, operator, left, right)

            env.call_binop = call_binop
            env._letterpress_bounded = True
        return env.from_string(template)

    return compile_bounded


def render_template_once(
    folder: Path,
    template: str,
    special: dict[str, str],
    *,
    cancel: threading.Event | None = None,
    seconds: float = RENDER_SECONDS,
) -> None:
    """Render one user turn with the generation prompt, the way every draft does; a template that fails, never
    ends, or drops the writer's message is refused (a damaged model folder), Cancel stops it."""
    message = "Letterpress checks this chat template."
    deadline = _Deadline(seconds, cancel)
    previous = sys.gettrace()
    try:
        compiled = _bounded_environment()(template)
        deadline.until = time.monotonic() + seconds  # the clock starts at the render (not the import)
        sys.settrace(deadline)
        try:
            out = compiled.render(
                messages=[{"role": "user", "content": message}],
                add_generation_prompt=True,
                tools=None,
                documents=None,
                **special,
            )
        finally:
            sys.settrace(previous)
    except LoadCancelledError:
        raise
    except Exception as exc:
        if deadline.cancelled:
            raise LoadCancelledError("Loading was cancelled.") from exc
        if deadline.expired:
            raise ModelDamagedError(
                f"The chat template in {folder} did not finish rendering a one-line message in {seconds:g} s "
                "(it loops), so every draft would hang. Download chat_template.jinja and "
                "tokenizer_config.json "
                "again."
            ) from exc
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise ModelDamagedError(
            f"The chat template in {folder} fails when it builds a prompt ({type(exc).__name__}: {first}), "
            "so "
            "every draft would fail. Download chat_template.jinja and tokenizer_config.json again."
        ) from exc
    if not isinstance(out, str) or message not in out:
        raise ModelDamagedError(
            f"The chat template in {folder} leaves the writer's message out of the prompt it builds, so the "
            "model "
            "would never see your text. Download chat_template.jinja and tokenizer_config.json again."
        )


# ------------------------------------------------------------------------------------------------------------
# Weights: finite in a sampled check


def check_finite_samples(path: Path, data_start: int, entries: list[tuple[str, str, int, int]]) -> None:
    """Read SAMPLES_PER_TENSOR windows of every floating-point tensor (name, dtype, begin, end relative to the
    data section) and refuse the file if any holds NaN or infinity: such weights make every draft empty."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; the caller checked it is a regular file
    except OSError:
        return  # the header was just read; a file gone now is reported by the load, in its words
    with fh:
        for name, dtype, begin, end in entries:
            spec = FLOAT_DTYPES.get(dtype)
            if spec is None or end <= begin:
                continue
            fmt, exponent = spec
            width = struct.calcsize(fmt)
            span = end - begin
            window = min(SAMPLE_BYTES, span) // width * width
            starts = sorted({0, (span // 2) // width * width, max(0, span - window) // width * width})
            for start in starts[:SAMPLES_PER_TENSOR]:
                fh.seek(data_start + begin + start)
                raw = fh.read(window)
                raw = raw[: len(raw) // width * width]
                if any(v & exponent == exponent for (v,) in struct.iter_unpack(fmt, raw)):
                    raise ModelDamagedError(
                        f"{path.name}: tensor {name[:80]} holds NaN or infinite weights, so every draft "
                        "would "
                        "come out empty; the file is damaged. Delete it and download it again."
                    )
