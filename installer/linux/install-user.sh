#!/bin/sh
# Adds this unpacked Letterpress folder to your desktop menu (no root needed), or removes it again.
#   ./install-user.sh            menu entry + icon in ~/.local/share, launcher in ~/.local/bin
#   ./install-user.sh --uninstall
set -eu
here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
bin=$HOME/.local/bin
if [ "${1:-}" = "--uninstall" ]; then
    rm -f "$data/applications/letterpress.desktop" "$bin/letterpress"
    find "$data/icons/hicolor" -name 'letterpress.*' -delete 2>/dev/null || true
    echo "Letterpress removed from the menu. Delete $here to remove the program itself."
    exit 0
fi
mkdir -p "$data/applications" "$bin"
(cd "$here/share" && find icons -type f) | while read -r icon; do
    mkdir -p "$data/$(dirname "$icon")"
    cp "$here/share/$icon" "$data/$icon"
done
sed -e "s|@EXEC@|$here/letterpress|" -e "s|@TRYEXEC@|$here/letterpress|" \
    "$here/share/applications/letterpress.desktop.in" > "$data/applications/letterpress.desktop"
ln -sf "$here/letterpress" "$bin/letterpress"
command -v update-desktop-database >/dev/null && update-desktop-database "$data/applications" || true
echo "Letterpress is in your applications menu; 'letterpress' runs it from a terminal ($bin must be on PATH)."
