"""The rewrite presets' labels as menus, the strength dial and the palette show them.

Both the window (which builds the preset menu) and diffusion editing (the dial) read them; they live here,
below both, so neither imports the other.
"""

from __future__ import annotations

PRESET_LABELS = {
    "shorter": "Shorter",
    "longer": "Longer",
    "formal": "More formal",
    "casual": "More casual",
    "grammar": "Fix grammar",
    "simplify": "Simplify",
    "freely": "Rewrite freely",
}
