"""What quantization costs in quality, measured: logit KL, argmax agreement and steps to finish a draft.

`python -m engine bench --quant-quality [--model DIR]` loads the checkpoint in full precision and in each
quantized scheme (on the CPU by default) and compares, on the same inputs:

* decoder logits on the same prompts and canvases (real denoising states: the canvas and self-conditioning of
  a full-precision run at several steps): KL(full || quantized) of the temperature-scaled distributions, mean
  over positions, and the share of positions whose argmax agrees;
* drafts: the same requests with the same seeds through `Session.run`; the denoising steps each needed (the
  entropy-bound sampler stops when stable and confident, so a less confident model needs more steps).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

PROMPTS = [
    "It was the best of times, it was the worst of times,",
    "In the morning the harbour was quiet, and the boats",
    "The writer sat at the window with a cup of tea",
    "Please rewrite the following paragraph so that it is shorter.",
    "A writer drafts, rewrites and fills gaps in a document.",
    "The quick brown fox jumps over the lazy dog.",
]


def _states(session: Any, prompt: str, seed: int, steps: int) -> list[tuple[Any, Any, Any, Any]]:
    """(prompt ids, canvas, self-conditioning logits, temperature step) at every step of a full-precision
    draft."""
    import torch

    from engine import prompts as prompt_mod
    from engine.api import DenoiseSettings
    from engine.denoise import denoise

    model, tok = session.model, session.tokenizer
    ids = torch.tensor([prompt_mod.chat_ids(tok, prompt_mod.draft_message(prompt))])
    seen: list[tuple[Any, Any, int]] = []
    captured: dict[str, Any] = {}

    def grab(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        captured["sc"] = kwargs.get("self_conditioning_logits")

    handle = model.model.register_forward_pre_hook(grab, with_kwargs=True)
    try:

        def on_input(block: int, step: int, canvas: Any) -> None:
            if block == 0:
                seen.append((ids, canvas.clone(), step))

        out_sc: list[Any] = []
        real_forward = model.forward

        def forward(*a: Any, **k: Any) -> Any:
            result = real_forward(*a, **k)
            out_sc.append(captured.get("sc"))
            return result

        model.forward = forward
        try:
            denoise(
                model,
                ids,
                DenoiseSettings(max_steps=steps),
                max_new_tokens=session.info.canvas_length,
                eos_token_ids=session.eos_ids,
                pad_token_id=session.pad_id,
                seed=seed,
                max_blocks=1,
                on_decoder_input=on_input,
            )
        finally:
            del model.forward
    finally:
        handle.remove()
    return [
        (p, c, None if sc is None else sc.clone(), step)
        for (p, c, step), sc in zip(seen, out_sc, strict=False)
    ]


def _logits(model: Any, ids: Any, canvas: Any, sc: Any) -> Any:
    import torch

    with torch.inference_mode():
        return model(input_ids=ids, decoder_input_ids=canvas, self_conditioning_logits=sc).logits.float()


def compare(
    model_dir: str | Path,
    schemes: tuple[str, ...] = ("nf4", "nf4-mixed"),
    *,
    device: str = "cpu",
    steps: int = 48,
    seeds: tuple[int, ...] = (0, 1),
    prompts: list[str] | None = None,
) -> dict[str, Any]:
    """The report (see the module docstring)."""
    import torch

    from engine.api import DenoiseSettings, DraftRequest
    from engine.denoise import temperature_schedule
    from engine.session import Session

    full = Session()
    full.load(model_dir, device=device, quantization="none")  # type: ignore[arg-type]
    prompts = prompts or PROMPTS
    states = [s for prompt in prompts for s in _states(full, prompt, 0, steps)[:: max(1, steps // 6)]]
    temps = temperature_schedule(DenoiseSettings(max_steps=steps), torch.device("cpu"))
    refs = [_logits(full.model, p, c, sc) for p, c, sc, _ in states]

    def drafts(session: Session) -> list[int]:
        assert session.info is not None  # loaded
        counts = []
        for prompt in prompts:
            for seed in seeds:
                session.run(
                    DraftRequest(
                        prompt,
                        max_new_tokens=session.info.canvas_length,
                        settings=DenoiseSettings(seed=seed, max_steps=steps),
                    )
                )
                assert session.last_output is not None
                counts.append(session.last_output.steps)
        return counts

    full_steps = drafts(full)
    report: dict[str, Any] = {
        "model": str(model_dir),
        "device": device,
        "states": len(states),
        "full_precision": {"mean_steps": statistics.mean(full_steps), "steps": full_steps},
        "schemes": {},
    }
    for scheme in schemes:
        quant = Session()
        quant.load(model_dir, device=device, quantization=scheme)  # type: ignore[arg-type]
        kls, agree = [], []
        for (p, c, sc, step), ref in zip(states, refs, strict=False):
            t = temps[step - 1]
            got = _logits(quant.model, p, c, sc)
            lp, lq = torch.log_softmax(ref / t, -1), torch.log_softmax(got / t, -1)
            kls.append(float((lp.exp() * (lp - lq)).sum(-1).mean()))
            agree.append(float((ref.argmax(-1) == got.argmax(-1)).float().mean()))
        q_steps = drafts(quant)
        report["schemes"][scheme] = {
            "kl_mean": round(statistics.mean(kls), 5),
            "kl_max": round(max(kls), 5),
            "argmax_agreement": round(statistics.mean(agree), 4),
            "mean_steps": statistics.mean(q_steps),
            "steps": q_steps,
            "steps_ratio": round(statistics.mean(q_steps) / statistics.mean(full_steps), 3),
        }
        quant.unload()
    return report


def format_quality(report: dict[str, Any]) -> str:
    full = report["full_precision"]
    lines = [
        f"quantization quality on {report['model']} ({report['device']}, {report['states']} denoising "
        f"states, {len(full['steps'])} drafts)",
        f"  full precision: {full['mean_steps']:.2f} steps per draft",
    ]
    for name, r in report["schemes"].items():
        lines.append(
            f"  {name:<10} KL mean {r['kl_mean']:.4f} (max {r['kl_max']:.4f}), argmax agreement "
            f"{r['argmax_agreement']:.1%}, {r['mean_steps']:.2f} steps per draft "
            f"({r['steps_ratio']:.2f} x full)"
        )
    return "\n".join(lines)
