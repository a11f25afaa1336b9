"""Regenerate the app icons from resources/icons/letterpress.svg (the one source of truth).

Qt's SVG renderer rasterises the PNGs (16..512 px, what freedesktop, Windows and macOS ask for); Pillow packs
them into letterpress.ico (Windows) and letterpress.icns (macOS). The outputs are committed, so a build never
needs this script; run it after editing the SVG:  python packaging/make_icons.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ICONS = ROOT / "resources" / "icons"
SVG = ICONS / "letterpress.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)


def render_pngs(svg: Path = SVG, out_dir: Path = ICONS) -> dict[int, Path]:
    """Rasterise the SVG at every size (antialiased, transparent corners)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication([])
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"{svg} is not a valid SVG")
    written: dict[int, Path] = {}
    for size in PNG_SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        renderer.render(painter)
        painter.end()
        path = out_dir / f"letterpress-{size}.png"
        if not image.save(str(path), "PNG"):
            raise SystemExit(f"could not write {path}")
        written[size] = path
    return written


def pack_ico_icns(pngs: dict[int, Path], out_dir: Path = ICONS) -> None:
    """Windows .ico (16..256) and macOS .icns (16..512) from the rendered PNGs."""
    from PIL import Image

    largest = Image.open(pngs[max(pngs)]).convert("RGBA")
    ico_frames = [Image.open(pngs[s]).convert("RGBA") for s in ICO_SIZES]
    ico_frames[-1].save(
        out_dir / "letterpress.ico",
        format="ICO",
        sizes=[(s, s) for s in ICO_SIZES],
        append_images=ico_frames[:-1],
    )
    largest.save(
        out_dir / "letterpress.icns",
        format="ICNS",
        append_images=[Image.open(pngs[s]).convert("RGBA") for s in (16, 32, 64, 128, 256)],
    )


def main() -> int:
    pngs = render_pngs()
    (ICONS / "letterpress.png").write_bytes(pngs[256].read_bytes())
    try:
        pack_ico_icns(pngs)
    except ImportError:
        print("Pillow is not installed: PNGs written, .ico/.icns left as they were (pip install pillow)")
        return 0
    for path in sorted(ICONS.glob("letterpress*")):
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
