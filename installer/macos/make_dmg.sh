#!/bin/sh
# Wrap dist/Letterpress.app (made by `python packaging/build.py` on macOS) into dist/Letterpress-<version>.dmg:
# a compressed disk image with the app and an Applications shortcut to drag it onto.
#
# NOT RUN in this project's CI (Linux only); needs macOS (hdiutil, codesign). Usage, from the repository root:
#     sh installer/macos/make_dmg.sh [version]
# Signing: set CODESIGN_IDENTITY="Developer ID Application: ..." to sign with your certificate (then notarize
# with `xcrun notarytool submit dist/Letterpress-<version>.dmg --wait` and `xcrun stapler staple`). Without it
# the app is signed ad hoc, which runs on this Mac; other Macs need right-click > Open the first time.
set -eu
cd "$(dirname "$0")/../.."
version=${1:-$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml","rb"))["project"]["version"])')}
app="dist/Letterpress.app"
dmg="dist/Letterpress-$version.dmg"
[ -d "$app" ] || { echo "$app is missing: run python packaging/build.py on macOS first" >&2; exit 1; }
command -v hdiutil >/dev/null || { echo "hdiutil not found: the .dmg can only be made on macOS" >&2; exit 1; }

identity=${CODESIGN_IDENTITY:--}
if [ "$identity" = "-" ]; then
    codesign --force --deep --sign - "$app"
else
    codesign --force --deep --options runtime --timestamp --sign "$identity" "$app"
fi
codesign --verify --deep --strict "$app"

# The bundle must start before it is shipped.
"$app/Contents/MacOS/letterpress" --self-test >/dev/null || {
    echo "the self-test failed: not making the .dmg" >&2; exit 1; }

staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
cp -R "$app" "$staging/"
ln -s /Applications "$staging/Applications"
rm -f "$dmg"
hdiutil create -volname "Letterpress $version" -srcfolder "$staging" -fs HFS+ -format UDZO -imagekey zlib-level=9 -ov "$dmg"
echo "$dmg"
