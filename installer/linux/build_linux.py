"""Turn the one-folder bundle (dist/letterpress) into a .deb and a .tar.gz that a writer can install.

.deb (dpkg-deb, no debhelper needed):
    /opt/letterpress/...                          the bundle
    /usr/bin/letterpress                          launcher on PATH
    /usr/share/applications/letterpress.desktop   menu entry (opens .md/.txt too)
    /usr/share/icons/hicolor/<n>x<n>/apps/letterpress.png, scalable/apps/letterpress.svg
.tar.gz: letterpress-<version>-linux-<arch>/ with the bundle, the same desktop entry and icons under share/,
and install-user.sh, which adds them to the user's menu without root.

Called by packaging/build.py; usable alone:  python installer/linux/build_linux.py dist/letterpress dist
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ICONS = ROOT / "resources" / "icons"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
PACKAGE = "letterpress"

# What the bundle needs from the system: PyInstaller ships Qt, Python and torch, but not the C library, the
# X11/Wayland client libraries, OpenGL/EGL, fontconfig or D-Bus, which must match the user's desktop.
# Alternatives cover the 64-bit time_t renames (Debian 13, Ubuntu 24.04).
DEPENDS = (
    "libc6 (>= 2.31)",
    "libstdc++6",
    "libgl1",
    "libegl1",
    "libfontconfig1",
    "libfreetype6",
    "libxkbcommon0",
    "libxkbcommon-x11-0",
    "libx11-xcb1",
    "libxcb-cursor0",
    "libxcb-icccm4",
    "libxcb-image0",
    "libxcb-keysyms1",
    "libxcb-randr0",
    "libxcb-render-util0",
    "libxcb-shape0",
    "libxcb-xinerama0",
    "libxcb-xkb1",
    "libdbus-1-3",
    "libglib2.0-0t64 | libglib2.0-0",
)

DESCRIPTION = """\
private, offline writing assistant (text diffusion on your own computer)
 Letterpress is a text editor that drafts, rewrites and fills in text with
 Google's DiffusionGemma model running locally on your GPU (or, slowly, on the
 CPU). Suggestions appear as ghost text that sharpens in place; Tab accepts.
 No account and no network access: documents and the model stay on this
 machine."""


def project_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def deb_arch() -> str:
    """The Debian architecture name of this machine (amd64, arm64, ...)."""
    if shutil.which("dpkg"):
        out = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def desktop_entry(exec_path: str) -> str:
    template = (HERE / "letterpress.desktop.in").read_text(encoding="utf-8")
    return template.replace("@EXEC@", exec_path).replace("@TRYEXEC@", exec_path)


def _install_icons(share: Path) -> None:
    for size in PNG_SIZES:
        dest = share / "icons" / "hicolor" / f"{size}x{size}" / "apps"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ICONS / f"letterpress-{size}.png", dest / "letterpress.png")
    scalable = share / "icons" / "hicolor" / "scalable" / "apps"
    scalable.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ICONS / "letterpress.svg", scalable / "letterpress.svg")


def _link_tree(src: Path, dest: Path) -> None:
    """Stage the bundle by hard links where the filesystem allows (1 GB copied in no time), else copy."""
    try:
        shutil.copytree(src, dest, symlinks=True, copy_function=os.link)
    except OSError:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(src, dest, symlinks=True)


def _check_bundle(bundle_dir: Path) -> None:
    exe = bundle_dir / PACKAGE
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise SystemExit(f"{exe} is missing: build the bundle first (python packaging/build.py)")


def _installed_kib(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            if not p.is_symlink():
                total += p.stat().st_size
    return (total + 1023) // 1024


def build_deb(
    bundle_dir: Path,
    out_dir: Path,
    version: str | None = None,
    *,
    arch: str | None = None,
    compression: str = "xz",
    level: int | None = None,
) -> Path:
    """Build `letterpress_<version>_<arch>.deb` in out_dir with dpkg-deb; returns its path.

    xz (the default) gives the smallest download that every dpkg since Debian 7 installs; `gzip` with a low
    `level` is for smoke builds in CI, where minutes matter more than megabytes.
    """
    bundle_dir, out_dir = Path(bundle_dir), Path(out_dir)
    _check_bundle(bundle_dir)
    if not shutil.which("dpkg-deb"):
        raise SystemExit("dpkg-deb is not installed (Debian/Ubuntu package 'dpkg'); cannot build the .deb")
    version = version or project_version()
    arch = arch or deb_arch()
    stage = out_dir / f".deb-{PACKAGE}"
    shutil.rmtree(stage, ignore_errors=True)
    _link_tree(bundle_dir, stage / "opt" / PACKAGE)

    usr_bin = stage / "usr" / "bin"
    usr_bin.mkdir(parents=True)
    shutil.copyfile(HERE / "launcher.sh", usr_bin / PACKAGE)
    (usr_bin / PACKAGE).chmod(0o755)
    share = stage / "usr" / "share"
    (share / "applications").mkdir(parents=True)
    (share / "applications" / "letterpress.desktop").write_text(
        desktop_entry(f"/usr/bin/{PACKAGE}"), encoding="utf-8"
    )
    _install_icons(share)
    doc = share / "doc" / PACKAGE
    doc.mkdir(parents=True)
    license_file = ROOT / "LICENSE"
    (doc / "copyright").write_text(
        "Letterpress\nLicense: Apache-2.0\n"
        + (
            license_file.read_text(encoding="utf-8")
            if license_file.is_file()
            else " On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0.\n"
        ),
        encoding="utf-8",
    )

    debian = stage / "DEBIAN"
    debian.mkdir()
    control = {
        "Package": PACKAGE,
        "Version": version,
        "Architecture": arch,
        "Maintainer": "Letterpress maintainers <letterpress@localhost>",
        "Installed-Size": str(_installed_kib(stage)),
        "Depends": ", ".join(DEPENDS),
        "Section": "editors",
        "Priority": "optional",
        "Homepage": "https://github.com/letterpress/letterpress",
        "Description": DESCRIPTION,
    }
    (debian / "control").write_text("".join(f"{k}: {v}\n" for k, v in control.items()), encoding="utf-8")
    for script in ("postinst", "postrm"):
        shutil.copyfile(HERE / script, debian / script)
        (debian / script).chmod(0o755)
    for dirpath, dirnames, _files in os.walk(stage):
        for d in dirnames:
            (Path(dirpath) / d).chmod(0o755)

    out = out_dir / f"{PACKAGE}_{version}_{arch}.deb"
    out.unlink(missing_ok=True)
    cmd = ["dpkg-deb", "--root-owner-group", f"-Z{compression}", "--build", str(stage), str(out)]
    if compression in ("xz", "gzip"):
        cmd.insert(1, f"-z{level if level is not None else 6}")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(stage, ignore_errors=True)
    return out


def build_tarball(
    bundle_dir: Path, out_dir: Path, version: str | None = None, *, arch: str | None = None, level: int = 6
) -> Path:
    """Build `letterpress-<version>-linux-<arch>.tar.gz`: run in place, or install-user.sh for a menu
    entry."""
    bundle_dir, out_dir = Path(bundle_dir), Path(out_dir)
    _check_bundle(bundle_dir)
    version = version or project_version()
    arch = arch or platform.machine()
    top = f"{PACKAGE}-{version}-linux-{arch}"
    extras = out_dir / f".tar-{PACKAGE}"
    shutil.rmtree(extras, ignore_errors=True)
    share = extras / "share"
    (share / "applications").mkdir(parents=True)
    shutil.copyfile(HERE / "letterpress.desktop.in", share / "applications" / "letterpress.desktop.in")
    _install_icons(share)
    (extras / "README.txt").write_text(
        "Letterpress\n\nRun ./letterpress from this folder, or ./install-user.sh to add it to your "
        "applications\nmenu (./install-user.sh --uninstall removes it). Check the installation with:\n"
        "    ./letterpress --self-test\n",
        encoding="utf-8",
    )

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    out = out_dir / f"{top}.tar.gz"
    partial = out.with_suffix(".gz.partial")
    with tarfile.open(partial, "w:gz", compresslevel=level) as tar:
        tar.add(bundle_dir, arcname=top, filter=owned_by_root)
        tar.add(share, arcname=f"{top}/share", filter=owned_by_root)
        tar.add(extras / "README.txt", arcname=f"{top}/README.txt", filter=owned_by_root)
        tar.add(HERE / "install-user.sh", arcname=f"{top}/install-user.sh", filter=owned_by_root)
    partial.replace(out)
    shutil.rmtree(extras, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, help="the one-folder bundle (dist/letterpress)")
    parser.add_argument("out", type=Path, help="where to write the .deb and .tar.gz")
    parser.add_argument("--no-tarball", action="store_true")
    parser.add_argument("--deb-compression", default="xz", choices=("xz", "gzip", "zstd", "none"))
    args = parser.parse_args(argv)
    print(build_deb(args.bundle, args.out, compression=args.deb_compression))
    if not args.no_tarball:
        print(build_tarball(args.bundle, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
