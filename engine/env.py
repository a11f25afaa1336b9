"""Environment switches read with a reason: a value that cannot be used is named, with why and the default
used.

Why: `LETTERPRESS_PREFIX_CACHE_MB=nan` stopped the model from loading (`int(nan)` deep in the session) and
`LETTERPRESS_THREADS=99999999999` reached torch as a thread count; an environment variable is typed by hand,
so a bad one must cost a warning, never the assistant. Each notice is logged once (stderr for the command
line, the log file for the app) and kept for `notices()` so a caller can show it.
"""

from __future__ import annotations

import logging
import math
import os

log = logging.getLogger(__name__)

_notices: dict[str, str] = {}


def notices() -> list[str]:
    """The sentences about environment values that were ignored so far, in the order they were found."""
    return list(_notices.values())


def _ignore(name: str, raw: str, reason: str, default: object, meaning: str = "") -> None:
    shown = raw if len(raw) <= 24 else raw[:21] + "..."
    text = f"{name}={shown} is ignored: {reason}; using the default ({meaning or default})."
    if _notices.get(name) != text:
        _notices[name] = text
        log.warning("%s", text)


def env_int(name: str, default: int, *, low: int, high: int, meaning: str = "") -> int:
    """A whole number from `low` to `high` in `name`; unset or blank gives `default` without a word, anything
    else that is not such a number gives `default` with a notice naming the reason."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        _ignore(name, raw, "it is not a whole number", default, meaning)
        return default
    if not low <= value <= high:
        _ignore(name, raw, f"give a whole number from {low} to {high:,}", default, meaning)
        return default
    return value


def env_float(name: str, default: float, *, low: float, high: float, meaning: str = "") -> float:
    """A finite number from `low` to `high` in `name` (nan and inf are refused, they are not amounts)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        _ignore(name, raw, "it is not a number", default, meaning)
        return default
    if not math.isfinite(value):
        _ignore(name, raw, "it is not a finite number", default, meaning)
        return default
    if not low <= value <= high:
        _ignore(name, raw, f"give a number from {low:g} to {high:,g}", default, meaning)
        return default
    return value


def env_choice(name: str, default: str, choices: dict[str, str], meaning: str = "") -> str:
    """One of `choices` (keys, case-insensitive; values are what they mean) in `name`, else `default`."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    value = choices.get(raw.lower())
    if value is None:
        _ignore(name, raw, f"use one of {', '.join(choices)}", default, meaning)
        return default
    return value
