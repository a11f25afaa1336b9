"""A PNG of time per denoising step, split into the decoder forward and everything else, ours beside the
reference's, per benchmark case. Drawn with Pillow (already a dependency of the GUI stack), no matplotlib."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FORWARD = (70, 110, 180)
OVERHEAD = (230, 140, 50)
INK = (30, 30, 30)
GRID = (225, 225, 225)


def plot_steps(report: dict[str, Any], path: str | Path, *, width: int = 900, row: int = 44) -> Path:
    """Horizontal stacked bars: for each case, our step (top) and the reference's (below), forward +
    overhead."""
    from PIL import Image, ImageDraw, ImageFont

    cases = report["cases"]
    left, right, top = 150, 250, 70
    height = top + row * len(cases) + 70
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    longest = max((max(c["engine"]["step_ms"], c["reference"]["step_ms"]) for c in cases), default=1.0) or 1.0
    scale = (width - left - right) / longest
    title = (
        f"Time per denoising step, {report['device']} ({report['device_name']}), canvas "
        f"{report['canvas_length']}, vocab {report['vocab_size']}; "
        f"engine_vs_reference {report['engine_vs_reference']}"
    )
    draw.text((10, 10), title, fill=INK, font=font)
    draw.text(
        (10, 28),
        f"per case: ours (upper bar), model.generate() (lower bar); medians of {report['repeats']} repeats",
        fill=INK,
        font=font,
    )
    for tick in range(0, int(longest) + 1, max(1, int(longest / 8) or 1)):
        x = left + tick * scale
        draw.line([(x, top - 6), (x, top + row * len(cases))], fill=GRID)
        draw.text((x - 4, top + row * len(cases) + 4), f"{tick}", fill=INK, font=font)
    draw.text((left, top + row * len(cases) + 20), "milliseconds per step", fill=INK, font=font)
    for i, case in enumerate(cases):
        y = top + i * row
        draw.text((10, y + 8), case["name"], fill=INK, font=font)
        for j, side in enumerate(("engine", "reference")):
            s = case[side]
            fwd, step = s["forward_ms_per_step"], s["step_ms"]
            y0 = y + 4 + j * 17
            draw.rectangle([left, y0, left + fwd * scale, y0 + 13], fill=FORWARD)
            draw.rectangle([left + fwd * scale, y0, left + step * scale, y0 + 13], fill=OVERHEAD)
            share = s["overhead_share"]
            label = (
                f"{'ours' if side == 'engine' else 'ref '} {step:.2f} ms, {share * 100:.0f}% overhead"
                if share is not None
                else f"{'ours' if side == 'engine' else 'ref '} not split"
            )
            draw.text((left + step * scale + 6, y0), label, fill=INK, font=font)
    ly = height - 26
    draw.rectangle([left, ly, left + 14, ly + 12], fill=FORWARD)
    draw.text((left + 20, ly), "decoder forward", fill=INK, font=font)
    draw.rectangle([left + 150, ly, left + 164, ly + 12], fill=OVERHEAD)
    draw.text(
        (left + 170, ly), "everything else (sampling, acceptance, display, delivery)", fill=INK, font=font
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    image.save(out)
    return out
