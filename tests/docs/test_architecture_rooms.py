"""ARCHITECTURE.md's room tables are the map a maintainer reads first: every module must be on it, and
nothing on it may be gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE_ROW = re.compile(r"^\| `((?:app|engine)/(?:[a-z_]+/)?)` \|(.*)\|\s*$")
NAMED = re.compile(r"`([a-z_][a-z0-9_]*)/?`")


def _rows() -> dict[str, str]:
    rows: dict[str, str] = {}
    for line in (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines():
        match = TABLE_ROW.match(line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def _rooms() -> dict[str, set[str]]:
    """Each package of app/ and engine/ with its modules and sub-packages (names as a row writes them)."""
    rooms: dict[str, set[str]] = {}
    for top in ("app", "engine"):
        for init in sorted((ROOT / top).rglob("__init__.py")):
            folder = init.parent
            rel = folder.relative_to(ROOT).as_posix()
            if rel.count("/") > 1:
                continue
            names = {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}
            names |= {p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
            rooms[rel + "/"] = names
    return rooms


def test_every_module_is_named_in_its_rooms_row() -> None:
    rows, rooms = _rows(), _rooms()
    missing_rooms = sorted(set(rooms) - set(rows))
    assert not missing_rooms, f"ARCHITECTURE.md has no room row for {missing_rooms}"
    unnamed = {
        room: sorted(names - set(NAMED.findall(rows[room])) - _own_rows(room, rows))
        for room, names in rooms.items()
    }
    unnamed = {room: names for room, names in unnamed.items() if names}
    assert not unnamed, f"modules missing from ARCHITECTURE.md's room tables: {unnamed}"


def test_the_room_tables_name_no_module_that_does_not_exist() -> None:
    rooms = _rooms()
    ghosts = {room: sorted(set(NAMED.findall(row)) - rooms.get(room, set())) for room, row in _rows().items()}
    ghosts = {room: names for room, names in ghosts.items() if names}
    assert not ghosts, f"ARCHITECTURE.md's room tables name modules that do not exist: {ghosts}"


def _own_rows(room: str, rows: dict[str, str]) -> set[str]:
    """Sub-packages with a row of their own need no mention in their parent's row."""
    return {key[len(room) :].strip("/") for key in rows if key != room and key.startswith(room)}
