"""The real-X lane (issue 34): the real window under Xvfb with openbox, driven by xdotool's real key presses
and wheel clicks, once for the whole module (`tests/helpers/realx_probe.py` writes what happened).

Skipped where Xvfb, openbox or xdotool is missing (a developer's machine); `.ci/run` installs them and sets
LETTERPRESS_REAL_X=required, so there a missing tool fails instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.config.commands import COMMANDS
from tests.helpers.realx import REQUIRED, skip_reason, x_session

ROOT = Path(__file__).resolve().parents[2]
KEYED = [c.id for c in COMMANDS if c.keys and c.context != "editor"]

pytestmark = pytest.mark.usefixtures("user_dirs")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    reason = skip_reason()
    if reason:
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)
    scratch = tmp_path_factory.mktemp("realx")
    out = scratch / "report.json"
    with x_session(scratch) as env:
        for name in ("CONFIG", "DATA", "LOG"):
            (scratch / name.lower()).mkdir()
            env[f"LETTERPRESS_{name}_DIR"] = str(scratch / name.lower())
        env["PYTHONPATH"] = str(ROOT)
        shots = env.get("LETTERPRESS_SCREENSHOTS", str(scratch / "shots"))
        done = subprocess.run(
            [sys.executable, "-m", "tests.helpers.realx_probe", str(out), shots],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert done.returncode == 0 and out.exists(), done.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    assert result["model_state"] == "ready"
    return result


@pytest.mark.parametrize("command_id", KEYED)
def test_every_default_key_reaches_its_action_exactly_once(report, command_id):
    """Each key bound on the window, pressed for real, triggers its own action once and nothing else (with a
    suggestion shown, so the suggestion's keys are live)."""
    assert report["presses"]["draft_ready"]
    pressed = [e for e in report["presses"]["results"] if e["action"] == command_id]
    assert pressed, f"{command_id} has no key bound on the window"
    for entry in pressed:
        assert entry["xdotool"], f"no xdotool name for {entry['key']}: add it to realx_probe.XKEYS"
        assert entry["synced"], entry
        assert entry["triggered"] == {command_id: 1}, entry
        assert entry["qt_log"] == [], entry


def test_qt_never_calls_a_press_ambiguous(report):
    assert not [m for m in report["qt_log"] if "Ambiguous" in m]


def test_tab_accepts_the_live_suggestion(report):
    live = report["live"]
    assert live["draft_ready"]
    assert live["tab"]["text"] == "The harbour was quiet." + live["ghost"]
    assert live["tab"]["state"] == "idle"


def test_shift_tab_accepts_the_next_line(report):
    """Shift+Tab never fired under X (Backtab twins made the press ambiguous): the line is now accepted."""
    shift_tab = report["live"]["shift_tab"]
    assert shift_tab["text"].startswith("The harbour was quiet.")
    accepted = shift_tab["text"][len("The harbour was quiet.") :]
    assert accepted and shift_tab["ghost"].startswith(accepted)


def test_alt_p_pins_the_next_word_and_alt_r_rerolls_the_rest_live(report):
    live = report["live"]
    assert live["alt_p"]["pinned"] == ["The"]
    assert live["alt_p"]["text"] == "The harbour was quiet.", "Alt+P must not type a letter"
    assert live["alt_r"]["state"] == "denoising", live["alt_r"]
    assert live["alt_r"]["message"].startswith("Re-rolling")
    assert live["alt_r"]["text"] == "The harbour was quiet.", "Alt+R must not type a letter"


def test_esc_dismisses_and_leaves_the_text(report):
    esc = report["live"]["esc"]
    assert esc["state"] == "idle"
    assert esc["text"] == "The harbour was quiet."


def test_the_editors_own_keys_act_once(report):
    """Select all, copy, cut, paste, undo, redo (both keys): each step shows whether a key acted twice."""
    steps = {i: s for i, s in enumerate(report["editor"]["steps"])}
    assert steps[0]["selected"] == "alpha beta"
    assert steps[1]["clipboard"] == "alpha beta"
    assert steps[2]["text"] == ""
    assert steps[3]["text"] == "alpha beta"
    assert steps[4]["text"] == "", "one Ctrl+Z undoes the paste only"
    assert steps[5]["text"] == "alpha beta", "Ctrl+Shift+Z redoes it"
    assert steps[6]["text"] == ""
    assert steps[7]["text"] == "alpha beta", "Ctrl+Y redoes it too"


def test_the_wheel_over_settings_scrolls_the_page_and_changes_no_value(report):
    """The entropy bound went from 0.100 to 0.001 under the pointer while the writer scrolled."""
    wheel = report["wheel"]
    assert wheel["synced"] and wheel["pointer_there"]
    assert "QDoubleSpinBox" in wheel["wheel_receivers"], "the wheel clicks never reached the field"
    assert wheel["value_after"] == wheel["value_before"] == pytest.approx(0.1)
    assert wheel["scroll_after"] > wheel["scroll_before"], "the page scrolls instead"
    assert not wheel["field_focused"]


@pytest.mark.parametrize("size", ["1000x720", "1280x800"])
def test_the_status_bar_fits_the_window_and_every_cut_message_is_whole_in_its_tooltip(report, size):
    """At the default 1000x720 the word count and "Local model" were cut and messages ended mid-word: every
    label of the status bar now lies inside the window, shows what fits, and where it had to shorten its
    text it ends at a word with "…" and holds the whole text in its tooltip."""
    cases = {k: v for k, v in report["status"].items() if k.startswith(f"{size}:") and "labels" in v}
    assert cases
    width = int(size.split("x")[0])
    for case, bar in cases.items():
        assert bar["bar_width"] == width, f"{case}: the status bar made the window {bar['bar_width']} px wide"
        names = {label["name"] for label in bar["labels"]}
        assert {"statusMessage", "modelStatus", "wordCount"} <= names, case
        for label in bar["labels"]:
            where = f"{case} {label['name']}"
            assert label["right"] <= bar["bar_width"], f"{where} lies past the window's edge"
            assert label["needed"] <= label["room"], f"{where} is clipped: {label['shown']!r}"
            if label["shown"] != label["full"]:
                assert label["shown"].endswith("…"), where
                kept = label["shown"][:-1].rstrip()
                assert label["full"].startswith(kept), where
                after = label["full"][len(kept) : len(kept) + 1]
                assert after in (" ", ",", ";", ":", "."), f"{where}: cut mid-word"
                tip = " ".join(label["tooltip"].split())
                assert label["full"] in tip, f"{where}: not whole in the tooltip"


def test_the_shortcut_sheet_lists_one_spelling_per_press(report):
    rows = dict(report["status"]["sheet_rows"])
    assert rows["Accept next line"] == "Shift+Tab"
    assert not [keys for keys in rows.values() if "Backtab" in keys or "F16" in keys.split(", ")]
