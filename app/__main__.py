"""`python -m app` / `letterpress`: arguments, logging, QApplication + qasync event loop, the main window."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.resources import demo_model_dir

if TYPE_CHECKING:  # imported where used: the Qt platform is checked before Qt loads
    from app.config.settings import Settings
    from app.main_window import MainWindow

log = logging.getLogger("app")

DEMO_MODEL = demo_model_dir()

# Called with the parsed arguments before the window exists (the documents/logging module hooks in here).
LOGGING_SETUP: list[Callable[[argparse.Namespace], None]] = []


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="letterpress", description="A private, offline writing assistant.")
    parser.add_argument("files", nargs="*", help="documents to open")
    parser.add_argument("--model", metavar="DIR", help="a local DiffusionGemma checkpoint folder")
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default=None,
        help="where to run the model: auto picks the GPU when there is one (default: Settings)",
    )
    # The same option names as `python -m engine generate` (which keeps --quantize as an alias too).
    parser.add_argument(
        "--quantization",
        "--quantize",
        dest="quantization",
        choices=("auto", "nf4", "nf4-mixed", "none"),
        default=None,
        help="nf4: 4-bit weights; nf4-mixed: 4-bit experts, 8-bit attention and dense MLP; none: full "
        "precision; auto: 4-bit unless full precision fits comfortably (default: Settings)",
    )
    parser.add_argument(
        "--fake-engine",
        nargs="?",
        const="",
        default=None,
        metavar="SPEC",
        help="use the scripted engine (demos, tests); SPEC like 'steps=12,delay=0.05,fail_at=3,busy=1'",
    )
    parser.add_argument(
        "--theme", choices=("system", "light", "dark"), default=None, help="colour theme (default: Settings)"
    )
    parser.add_argument(
        "--log-level",
        type=_log_level,
        default=_log_level(os.environ.get("LETTERPRESS_LOG_LEVEL", "WARNING"), lenient=True),
        metavar="LEVEL",
        help="DEBUG, INFO, WARNING (default), ERROR or CRITICAL",
    )
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="prove this installation works: load the model (the demo, or --model DIR) in an "
        "offscreen window, run a draft, a rewrite and an infill, print one JSON line and exit "
        "(0 = passed); for installers and CI",
    )
    return parser


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(text: str, lenient: bool = False) -> str:
    """A logging level name, case-insensitive; an unknown one is refused with a sentence (or, from the
    environment, replaced by WARNING) instead of a traceback from logging."""
    level = str(text).strip().upper()
    if level not in LOG_LEVELS:
        if lenient:  # from the environment: say so (logging is not set up yet), then use the default
            if level:
                print(
                    f"LETTERPRESS_LOG_LEVEL={str(text)[:24]} is ignored: use one of {', '.join(LOG_LEVELS)}; "
                    "using the default (WARNING).",
                    file=sys.stderr,
                )
            return "WARNING"
        raise argparse.ArgumentTypeError(f"'{text}' is not a log level; use one of {', '.join(LOG_LEVELS)}")
    return level


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.fake_engine and "=" not in args.fake_engine:  # `--fake-engine notes.md`: a file, not a SPEC
        args.files.insert(0, args.fake_engine)
        args.fake_engine = ""
    if args.fake_engine:
        try:
            fake_engine_factory(args.fake_engine)
        except ValueError:
            parser.error(
                f"argument --fake-engine: '{args.fake_engine}' is not a SPEC like "
                "'steps=12,delay=0.05,fail_at=3,busy=1' (numbers after '=')"
            )
    return args


def fake_engine_factory(spec: str) -> Callable[[], Any]:
    """A factory for `engine.fake.FakeEngine` from 'key=value,...' (steps, delay, load_delay, fail_at,
    busy)."""
    from engine.api import GenerationError
    from engine.fake import FakeEngine

    options: dict[str, str] = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    kwargs: dict[str, Any] = {
        "steps": int(options.get("steps", 8)),
        "step_delay": float(options.get("delay", 0.06)),
        "load_delay": float(options.get("load_delay", 0.05)),
        "busy": options.get("busy", "0") in ("1", "true", "yes"),
    }
    if "fail_at" in options:
        kwargs["fail_at_step"] = int(options["fail_at"])
        kwargs["error"] = GenerationError("The scripted engine failed (as asked). Try again.")
    return lambda: FakeEngine(**kwargs)


def _settings() -> Settings | None:
    try:
        from app.config.settings import Settings
    except ImportError:
        return None
    return Settings()


def _install_services(window: MainWindow, settings: Settings | None, files: list[str]) -> None:
    """Documents, autosave/recovery, settings and model manager (app.integration), when that module exists."""
    try:
        from app.integration import install_services
    except ImportError as exc:
        if exc.name != "app.integration":
            raise
        return
    install_services(window, settings, files=files)


def build_window(args: argparse.Namespace) -> MainWindow:
    """Everything `python -m app` does before the event loop: settings, theme, engine host, window, model
    load."""
    from PySide6.QtWidgets import QApplication

    from app.assist.engine_host import EngineHost
    from app.main_window import MainWindow
    from app.platform.privacy import enforce_offline
    from app.ui.theme import apply_theme

    enforce_offline()  # before the engine thread can import huggingface_hub / transformers
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "letterpress"])
    app.setApplicationName("Letterpress")
    app.setOrganizationName("Letterpress")
    settings = _settings()
    theme = args.theme or (settings.typed.appearance.theme if settings is not None else "system")
    apply_theme(app, theme)  # type: ignore[arg-type]

    factory = fake_engine_factory(args.fake_engine) if args.fake_engine is not None else None
    host = EngineHost(factory)
    host.start()
    model_dir: str | None = args.model
    reason = ""
    if model_dir is None and settings is not None and settings.typed.model.folder:
        from app.config.model_choice import folder_for

        model_dir = folder_for(settings.typed.model.folder)  # `builtin:demo`: this version's demo folder
    if model_dir is None and DEMO_MODEL.is_dir():
        model_dir = str(DEMO_MODEL)
    if model_dir is None and args.fake_engine is not None:
        model_dir = "fake"
    if model_dir is None:
        reason = (
            "No model: download DiffusionGemma and choose its folder with Model ▸ Load model folder…, "
            "or start with --model DIR."
        )
    device = args.device or (settings.typed.model.device if settings is not None else "auto")
    quantization = args.quantization or (
        settings.typed.model.quantization if settings is not None else "auto"
    )
    window = MainWindow(
        host,
        settings=settings,
        model_dir=model_dir,
        device=device,
        quantization=quantization,
        no_model_reason=reason,
    )
    _install_services(window, settings, list(args.files))
    window.keep_place()  # the size and place it had when it last closed
    if settings is not None and getattr(settings, "problems", []):
        _add_settings_warning(window, settings)
    return window


def _add_settings_warning(window: Any, settings: Any) -> None:
    """What was wrong with the settings file stays in the status bar (objectName `settingsWarning`, every
    problem
    in its tooltip) until the settings are saved again: as a passing message the next status ("Loading
    model…")
    replaced it at once, before anyone could read it."""
    from app.ui.status import ElidedLabel

    problems = list(settings.problems)
    label = ElidedLabel(window, max_width=420)  # a long problem ends at a word, all of it in the tooltip
    label.setObjectName("settingsWarning")
    label.setStyleSheet("QLabel { color: #b00020; }")
    more = f" (+{len(problems) - 1} more: see the tooltip)" if len(problems) > 1 else ""
    from app.platform.text_fit import shorten_words

    label.setText(f"⚠ Settings: {shorten_words(problems[0], 160)}{more}")  # ends at a word
    label.setToolTip("\n".join(problems))
    window.statusBar().addPermanentWidget(label)

    def on_changed(*_: object) -> None:
        if not getattr(settings, "save_failure", ""):
            label.hide()

    settings.changed.connect(on_changed)


def _qt_platform_blocked(*, json_line: bool) -> int:
    """Qt aborts (exit 134) when its platform plugin cannot load: say which libraries are missing and how to
    install them, and exit with `EXIT_QT_PLATFORM` instead (0 when nothing stands in the way)."""
    from app.platform.qt_platform import EXIT_QT_PLATFORM, platform_problem

    problem = platform_problem()
    if problem is None:
        return 0
    print(problem.message(), file=sys.stderr)
    if json_line:  # the self-test's contract: one JSON summary on stdout
        import json

        print(
            json.dumps(
                {
                    "ok": False,
                    "exit_code": EXIT_QT_PLATFORM,
                    "error": problem.message(),
                    "missing_libraries": list(problem.missing),
                }
            )
        )
    return EXIT_QT_PLATFORM


def main(argv: list[str] | None = None) -> int:
    from engine.threads import prepare_openmp

    prepare_openmp()  # before anything can import torch (the engine thread does): OpenMP must not spin-wait
    self_test = "--self-test" in (sys.argv[1:] if argv is None else argv)
    if self_test:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # the self-test's own default, checked below
    if not any(a in ("-h", "--help") for a in (sys.argv[1:] if argv is None else argv)):
        blocked = _qt_platform_blocked(json_line=self_test)
        if blocked:
            return blocked
    if self_test:  # installers and CI: prove the build works
        from app.selftest import run_self_test

        return run_self_test(
            sys.argv[1:] if argv is None else argv, lambda window_argv: build_window(parse_args(window_argv))
        )
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for hook in LOGGING_SETUP:
        hook(args)
    from app.platform.privacy import enforce_offline, install_network_guard, setup_logging

    enforce_offline()
    install_network_guard()  # the app never talks to another machine
    setup_logging(level=logging.getLevelName(args.log_level.upper()))
    from app.platform.qt_platform import qt_binding_problem

    problem = qt_binding_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import qasync
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = build_window(args)
    window.show()
    closed = asyncio.Event()
    app.aboutToQuit.connect(closed.set)
    with qasync.QEventLoop(app) as loop:
        loop.run_until_complete(closed.wait())
    return 0


if __name__ == "__main__":
    sys.exit(main())
