"""`letterpress --self-test`: prove that an installed build works, the way a writer would use it.

Starts the real main window offscreen, loads the default model (or `--model DIR`) through the real engine
thread, then runs one draft, one rewrite and one infill by triggering the window's own actions and accepting
each suggestion once the ghost text is ready. Prints one JSON line to stdout and exits 0, or exits non-zero
with the reason in the JSON (`"ok": false, "error": ...`). Installers and CI run this against the built
bundle.

It never touches the writer's own settings, recent files or recovery folder (they are pointed at a temporary
folder), and it fails if anything in the process tries to reach the network.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.resources import demo_model_dir, install_root

EXIT_OK = 0
EXIT_FAILED = 1  # a task ran but did not do what it should
EXIT_CANNOT_START = 2  # no model, no window, bad arguments
EXIT_TIMEOUT = 3

DRAFT_TEXT = "The harbour was quiet in the morning. "
REWRITE_BEFORE = "Dear team,\n\n"
REWRITE_SELECTION = "the meeting is moved to friday because lots of people cant come on thursday."
INFILL_BEFORE = "It was the best of times, "
INFILL_AFTER = " it was the age of foolishness."


class SelfTestError(Exception):
    """A self-test failure with the exit code it maps to."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class _Report:
    started: float = field(default_factory=time.monotonic)
    data: dict[str, Any] = field(default_factory=dict)
    network: list[str] = field(default_factory=list)

    def finish(self, ok: bool, error: str = "", code: int = EXIT_OK) -> dict[str, Any]:
        self.data.update(
            ok=ok,
            exit_code=code,
            seconds=round(time.monotonic() - self.started, 2),
            network_attempts=self.network,
        )
        if error:
            self.data["error"] = error
        return self.data


def app_root() -> Path:
    """Where the bundled (or checked-out) resources live: PyInstaller's folder when frozen, else the repo."""
    return install_root()


def default_model_dir() -> Path:
    """The demo model shipped with the app."""
    return demo_model_dir()


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="letterpress --self-test", description=__doc__.splitlines()[0])
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument(
        "--model", type=Path, default=None, help="checkpoint folder (default: the demo model)"
    )
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--fake-engine", action="store_true", help="the scripted engine (no model, no torch)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole test")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the summary to this file")
    parser.add_argument("--keep-window", action="store_true", help=argparse.SUPPRESS)
    args, _unknown = parser.parse_known_args(argv[1:] if argv and not argv[0].startswith("-") else argv)
    return args


def _record_network(report: _Report) -> None:
    """Audit hook: record (and refuse) any connection or lookup to another machine, whoever makes it."""
    from app.platform.privacy import _is_local

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.connect":
            address = args[1]
            if isinstance(address, tuple) and address and not _is_local(address[0]):
                report.network.append(f"connect {address[0]}")
                raise ConnectionRefusedError(f"self-test: network access to {address[0]} refused")
        elif event == "socket.getaddrinfo" and not _is_local(args[0]):
            report.network.append(f"lookup {args[0]}")
            raise ConnectionRefusedError(f"self-test: name lookup of {args[0]!r} refused")

    sys.addaudithook(hook)


def _isolate_user_folders(tmp: Path) -> None:
    """Settings, recent files, recovery and logs go to a throw-away folder, never the writer's own."""
    for name in ("LETTERPRESS_CONFIG_DIR", "LETTERPRESS_DATA_DIR", "LETTERPRESS_LOG_DIR"):
        os.environ[name] = str(tmp / name.rsplit("_", 2)[-2].lower())


def run_self_test(argv: list[str], create_window: Callable[[list[str]], Any]) -> int:
    """Run the self-test; prints the JSON summary to stdout and returns the exit code. `create_window(argv)`
    builds the window as `python -m app` would (given by `app.__main__`, which this module must not
    import)."""
    args = _parse(argv)
    report = _Report()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    try:
        from app.platform.privacy import enforce_offline

        enforce_offline()
    except ImportError:
        pass
    _record_network(report)
    model = args.model if args.model is not None else default_model_dir()
    report.data.update(
        version=_version(),
        frozen=bool(getattr(sys, "frozen", False)),
        platform=f"{sys.platform}-{platform.machine()}",
        python=platform.python_version(),
        qpa=os.environ.get("QT_QPA_PLATFORM"),
        model=None if args.fake_engine else str(model),
        tasks={},
    )
    with tempfile.TemporaryDirectory(prefix="letterpress-selftest-") as tmp:
        _isolate_user_folders(Path(tmp))
        try:
            _run(args, model, report, create_window)
        except SelfTestError as exc:
            summary = report.finish(False, str(exc), exc.code)
        except Exception as exc:  # noqa: BLE001 - the summary must say what broke, whatever it was
            summary = report.finish(False, f"{type(exc).__name__}: {exc}", EXIT_FAILED)
        else:
            if report.network:
                summary = report.finish(False, "something tried to use the network", EXIT_FAILED)
            else:
                summary = report.finish(True)
    line = json.dumps(summary, ensure_ascii=False)
    if args.json_out is not None:
        args.json_out.write_text(line + "\n", encoding="utf-8")
    if sys.stdout is not None:  # a windowed Windows build has no stdout; use --json-out there
        print(line, flush=True)
    return int(summary["exit_code"])


def _version() -> str:
    """The installed distribution's version, else the bundle's VERSION file, else pyproject.toml
    (checkout)."""
    try:
        from importlib.metadata import version

        return version("letterpress")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        pass
    root = app_root()
    try:
        if (root / "VERSION").is_file():
            return (root / "VERSION").read_text(encoding="utf-8").strip()
        import tomllib

        with (root / "pyproject.toml").open("rb") as fh:
            return str(tomllib.load(fh)["project"]["version"])
    except (OSError, ValueError, KeyError):
        return "unknown"


# ------------------------------------------------------------------------------------------------------------
# Driving the window


def _run(
    args: argparse.Namespace, model: Path, report: _Report, create_window: Callable[[list[str]], Any]
) -> None:
    from PySide6.QtWidgets import QApplication

    if not args.fake_engine and not model.is_dir():
        raise SelfTestError(
            f"No model at {model}; pass --model DIR with a DiffusionGemma checkpoint.", EXIT_CANNOT_START
        )
    deadline = time.monotonic() + args.timeout
    window_argv = ["--device", args.device]
    window_argv += ["--fake-engine"] if args.fake_engine else ["--model", str(model)]
    app = QApplication.instance() or QApplication(["letterpress"])
    _quiet_platform_notes()
    try:
        window = create_window(window_argv)
    except SystemExit as exc:
        raise SelfTestError(f"the window refused to start (exit {exc.code})", EXIT_CANNOT_START) from exc
    driver = _WindowDriver(app, window, deadline)
    try:
        report.data.update(driver.wait_for_model())
        for name, task in (("draft", driver.draft), ("rewrite", driver.rewrite), ("infill", driver.infill)):
            report.data["tasks"][name] = task()
    finally:
        driver.close()


# What a headless platform plugin says about requests it cannot honour (window size hints, icons); they are
# the plugin's limits, not the installation's, and printed before the JSON they read as failures.
PLATFORM_NOTES = ("does not support propagateSizeHints", "This plugin does not support")


def _quiet_platform_notes() -> None:
    """Drop the offscreen/minimal plugin's notes; every other Qt message still goes to the log."""
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    def handler(kind: QtMsgType, _context: object, message: str) -> None:
        if any(note in message for note in PLATFORM_NOTES):
            return
        level = logging.WARNING if kind != QtMsgType.QtDebugMsg else logging.DEBUG
        logging.getLogger("qt").log(level, "%s", message)

    qInstallMessageHandler(handler)


class _WindowDriver:
    """Finds the window's editor, actions and engine host by object name, and waits on them."""

    def __init__(self, app: Any, window: Any, deadline: float) -> None:
        from PySide6.QtGui import QAction
        from PySide6.QtWidgets import QPlainTextEdit

        from app.assist.engine_host import EngineHost

        self.app, self.window, self.deadline = app, window, deadline
        self.editor = window.findChild(QPlainTextEdit, "editor")
        if self.editor is None:
            raise SelfTestError("the main window has no editor (objectName 'editor')", EXIT_CANNOT_START)
        self.host = getattr(window, "host", None) or window.findChild(EngineHost)
        self.actions = {a.objectName(): a for a in window.findChildren(QAction) if a.objectName()}
        self.errors: list[str] = []
        self.results: list[Any] = []
        if self.host is not None:
            self.host.failed.connect(lambda _rid, exc: self.errors.append(getattr(exc, "message", str(exc))))
            self.host.loadFailed.connect(lambda exc: self.errors.append(getattr(exc, "message", str(exc))))
            self.host.finished.connect(self.results.append)
        window.show()

    # -- waiting ---------------------------------------------------------------------------------------------

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        from PySide6.QtCore import QEventLoop

        while not done():
            if self.errors:
                raise SelfTestError(f"{what}: {self.errors[-1]}")
            if time.monotonic() > self.deadline:
                raise SelfTestError(f"timed out while waiting for {what}", EXIT_TIMEOUT)
            self.app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
            time.sleep(0.01)

    def wait_for_model(self) -> dict[str, Any]:
        if self.host is None:
            raise SelfTestError("the main window has no engine host", EXIT_CANNOT_START)
        started = time.monotonic()
        self._wait(lambda: self.host.model_info is not None, "the model to load")
        info = self.host.model_info
        return {
            "load_seconds": round(time.monotonic() - started, 2),
            "device": info.device,
            "dtype": info.dtype,
            "quantization": info.quantization,
            "parameters": info.parameters,
            "model_name": info.name,
        }

    def ghost_state(self) -> str:
        value = self.editor.property("ghostState")
        return str(value) if value is not None else ""

    # -- tasks -----------------------------------------------------------------------------------------------

    def _set_text(
        self, text: str, select: tuple[int, int] | None = None, cursor_at: int | None = None
    ) -> None:
        from PySide6.QtGui import QTextCursor

        self.editor.setPlainText(text)
        cursor = self.editor.textCursor()
        if select is not None:
            cursor.setPosition(select[0])
            cursor.setPosition(select[1], QTextCursor.MoveMode.KeepAnchor)
        else:
            cursor.setPosition(len(text) if cursor_at is None else cursor_at)
        self.editor.setTextCursor(cursor)
        self.editor.setFocus()

    def _trigger_and_accept(self, action_name: str) -> dict[str, Any]:
        action = self.actions.get(action_name)
        if action is None:
            raise SelfTestError(f"the main window has no action '{action_name}'", EXIT_CANNOT_START)
        before = self.editor.toPlainText()
        results_before = len(self.results)
        started = time.monotonic()
        if not action.isEnabled():
            raise SelfTestError(f"'{action_name}' is disabled with the model loaded")
        action.trigger()
        self._wait(
            lambda: self.ghost_state() == "ready" or self.ghost_state() == "error",
            f"the {action_name} suggestion",
        )
        if self.ghost_state() == "error":
            raise SelfTestError(f"{action_name}: the ghost text shows an error")
        seconds = time.monotonic() - started
        result = self.results[-1] if len(self.results) > results_before else None
        self._accept()
        self._wait(lambda: self.ghost_state() == "idle", f"the {action_name} suggestion to be accepted")
        after = self.editor.toPlainText()
        return {
            "seconds": round(seconds, 2),
            "steps": result.stats.steps if result is not None else None,
            "new_tokens": result.stats.new_tokens if result is not None else None,
            "changed": after != before,
            "chars_before": len(before),
            "chars_after": len(after),
            "_after": after,
        }

    def _accept(self) -> None:
        from PySide6.QtCore import QEvent, Qt
        from PySide6.QtGui import QKeyEvent

        accept = self.actions.get("actionAcceptSuggestion")
        if accept is not None and accept.isEnabled():
            accept.trigger()
            return
        assistant = getattr(self.window, "assistant", None)
        if assistant is not None and hasattr(assistant, "accept_all"):
            assistant.accept_all()
            return
        for kind in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease):
            self.app.sendEvent(self.editor, QKeyEvent(kind, Qt.Key.Key_Tab, Qt.KeyboardModifier.NoModifier))

    def draft(self) -> dict[str, Any]:
        self._set_text(DRAFT_TEXT)
        out = self._trigger_and_accept("actionDraft")
        after = out.pop("_after")
        if not after.startswith(DRAFT_TEXT):
            raise SelfTestError("draft: the text before the cursor changed")
        out["inserted_chars"] = len(after) - len(DRAFT_TEXT)
        return out

    def rewrite(self) -> dict[str, Any]:
        text = REWRITE_BEFORE + REWRITE_SELECTION
        self._set_text(text, select=(len(REWRITE_BEFORE), len(text)))
        out = self._trigger_and_accept("actionRewrite")
        after = out.pop("_after")
        if not after.startswith(REWRITE_BEFORE):
            raise SelfTestError("rewrite: the text before the selection changed")
        out["replaced"] = after[len(REWRITE_BEFORE) :] != REWRITE_SELECTION
        return out

    def infill(self) -> dict[str, Any]:
        text = INFILL_BEFORE + INFILL_AFTER
        self._set_text(text, cursor_at=len(INFILL_BEFORE))
        out = self._trigger_and_accept("actionInfill")
        after = out.pop("_after")
        if not (after.startswith(INFILL_BEFORE) and after.endswith(INFILL_AFTER)):
            raise SelfTestError("infill: the text around the gap was not kept exactly")
        out["gap_chars"] = len(after) - len(text)
        return out

    def close(self) -> None:
        self.editor.document().setModified(False)  # no "save changes?" prompt for the test's scratch text
        for guard in list(getattr(self.window, "close_guards", [])):
            self.window.close_guards.remove(guard)
        if self.host is not None:
            self.host.shutdown()
        self.window.close()
        self.app.processEvents()
        self.window.deleteLater()  # destroy the widgets now, while Python and Qt are both fully alive
        from PySide6.QtCore import QCoreApplication, QEvent

        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
