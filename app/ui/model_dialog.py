"""The model manager: choose a checkpoint, see whether it is complete and whether it fits, load it, or learn
why not.

A folder can be typed, browsed to, or picked from DiffusionGemma checkpoints found in the Hugging Face cache
(`HF_HUB_CACHE`, `HF_HOME/hub`, `~/.cache/huggingface/hub`; hub layout `models--org--name/snapshots/<rev>/`).
Checking a folder (validation by `engine.weights.loader`, the memory estimate by `engine.weights.fit`) runs on
a worker thread: those modules may import torch, which the UI thread never waits for. Loading goes through the
window's engine host, whose signals drive the progress bar; Cancel stops the load between tensors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.config.model_choice import DEMO_MARKER, folder_for, is_demo_choice, stored_value
from app.config.settings import Settings
from app.ui.demo_notice import demo_wording
from engine.api import EngineError, LoadProgress, ModelInfo

if TYPE_CHECKING:
    from engine.weights.fit import Precision

log = logging.getLogger(__name__)

MODEL_ID = "google/diffusiongemma-26B-A4B-it"
DOWNLOAD_HINT = f"hf download {MODEL_ID} --local-dir ~/models/diffusiongemma-26B-A4B-it"

# What to do about each kind of failure (EngineError.kind), added after the engine's message only where that
# message does not already say it (`fix_for`): the engine's sentences already say "Choose the folder…" or give
# the download command, and saying it twice read as a duplicated message.
FIXES: dict[str, str] = {
    "model_not_found": f"Not downloaded yet? {DOWNLOAD_HINT}",
    "not_a_model_folder": f"Not downloaded yet? {DOWNLOAD_HINT}",
    "model_incomplete": f"Finish or repeat the download (it resumes): {DOWNLOAD_HINT}",
    "model_damaged": (
        f"Download the damaged file again (the download resumes and replaces it): {DOWNLOAD_HINT}"
    ),
    "model_unreadable": "Fix the folder's permissions (or choose a copy you own), then check it again.",
    "unsupported_model": (
        f"Letterpress runs DiffusionGemma checkpoints in safetensors format, such as {MODEL_ID}."
    ),
    "out_of_memory": "Choose 4-bit (nf4) quantization, close other programs that use the GPU, or load on the "
    "CPU (much slower).",
    "wont_fit": "Choose 4-bit (nf4) quantization or a device with more memory.",
    "load_cancelled": "Press Load to start again.",
}
# On the CPU the memory that ran short is RAM: the fix frees RAM (there is no GPU to close programs on).
CPU_FIXES: dict[str, str] = {
    "out_of_memory": "Choose 4-bit (nf4) quantization, close other programs to free RAM, or choose a smaller "
    "model.",
    "wont_fit": "Choose 4-bit (nf4) quantization, close other programs to free RAM, or use a computer with "
    "more memory.",
}
# Phrases whose presence in the engine's message means it already says what the fix would (never twice).
_ALREADY_SAID = (
    "hf download",
    "chmod",
    "check the disk",
    "download it again",
    "close other programs",
    "choose 4-bit",
    "press load",
)


def fix_for(kind: str, message: str, device: str = "") -> str:
    """The fix to add after `message` ("" when the message already says what to do, or there is none)."""
    from engine.api import is_gpu

    on_cpu = bool(device) and device != "auto" and not is_gpu(device)  # "auto": not known, both words
    fix = (CPU_FIXES.get(kind) if on_cpu else None) or FIXES.get(kind, "")
    said = message.lower()
    if not fix or any(p in said for p in _ALREADY_SAID):
        return ""
    return fix


def precision_text(info: ModelInfo) -> str:
    """How the weights are held, in words: "bfloat16", "4-bit nf4 (compute bfloat16)"; never "none"."""
    quant = (info.quantization or "").strip()
    dtype = (info.dtype or "").strip()
    if quant in ("", "none", "auto"):
        return dtype
    label = {"nf4": "4-bit nf4", "nf4-mixed": "4-bit experts, 8-bit attention (nf4-mixed)"}.get(quant, quant)
    return f"{label}, compute {dtype}" if dtype else label


def loaded_text(info: ModelInfo) -> str:
    """ "Built-in demo on the CPU (float32)": the model, where it runs and how its weights are held."""
    from app.ui.demo_notice import is_demo_model

    name = demo_wording().name if is_demo_model(info.path) else info.name
    device = (info.device or "").strip()
    where = {"cpu": "the CPU", "server": "the server"}.get(device, f"the GPU ({device})" if device else "")
    precision = precision_text(info)
    return f"{name}{f' on {where}' if where else ''}{f' ({precision})' if precision else ''}"


def size_text(gb: float | None) -> str:
    """A size that never reads "0.0 GB": megabytes below a tenth of a gigabyte."""
    if gb is None:
        return "–"
    return f"{gb * 1000:.0f} MB" if gb < 0.1 else f"{gb:.1f} GB"


MAX_CACHED_REPOS = 1000  # repositories (and snapshots of each) looked at in a hub cache
CHECK_DEBOUNCE_MS = 350  # a check starts once typing pauses this long

FIT_COLUMNS = ("Precision", "Fit", "Weights", "Runtime", "Total", "Available")
VERDICT_TEXT = {"fits": "Fits", "tight": "Tight", "wont_fit": "Won't fit", "unknown": "Unknown"}
VERDICT_COLOR = {"fits": "#1e7b34", "tight": "#a15c00", "wont_fit": "#b3261e", "unknown": "#555555"}


# ------------------------------------------------------------------------------------------------------------
# Finding checkpoints


@dataclass(frozen=True)
class CachedModel:
    repo_id: str
    revision: str
    path: Path
    is_main: bool = False

    @property
    def label(self) -> str:
        return f"{self.repo_id}  ({self.revision[:8]}{', main' if self.is_main else ''})"


def hf_cache_dirs() -> list[Path]:
    """Where the Hugging Face hub cache may be, most specific first (existing folders only)."""
    candidates = []
    if os.environ.get("HF_HUB_CACHE"):
        candidates.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):
        candidates.append(Path(os.environ["HUGGINGFACE_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        candidates.append(Path(os.environ["HF_HOME"]) / "hub")
    xdg = os.environ.get("XDG_CACHE_HOME")
    candidates.append((Path(xdg) if xdg else Path.home() / ".cache") / "huggingface" / "hub")
    seen: list[Path] = []
    for c in candidates:
        c = c.expanduser()
        if c.is_dir() and c not in seen:
            seen.append(c)
    return seen


def find_cached_checkpoints(cache_dirs: list[Path] | None = None) -> list[CachedModel]:
    """DiffusionGemma snapshots in the hub cache (only config.json is read, capped, never a pipe or device:
    this runs on the UI thread; nothing is downloaded)."""
    from engine.weights.validate import read_capped, read_json

    found: list[CachedModel] = []
    for cache in hf_cache_dirs() if cache_dirs is None else cache_dirs:
        try:
            repos = sorted(cache.glob("models--*"))[:MAX_CACHED_REPOS]
        except OSError:
            continue
        for repo in repos:
            main = ""
            with contextlib.suppress(EngineError, OSError):
                main = read_capped(repo / "refs" / "main", 256).decode("utf-8", "replace").strip()
            try:
                snaps = sorted((repo / "snapshots").glob("*"))[:MAX_CACHED_REPOS]
            except OSError:
                continue
            for snap in snaps:
                try:
                    config = read_json(snap / "config.json")
                except (EngineError, OSError):
                    continue
                if config.get("model_type") != "diffusion_gemma":
                    continue
                repo_id = repo.name.removeprefix("models--").replace("--", "/")
                found.append(CachedModel(repo_id, snap.name, snap, snap.name == main))
    return found


# ------------------------------------------------------------------------------------------------------------
# Checking a folder (worker thread)


@dataclass(frozen=True)
class FitRow:
    """One precision's memory estimate: verdict 'fits' / 'tight' / 'wont_fit' / 'unknown'; `note` holds the
    arithmetic (shown as a tooltip, so the writer can check the numbers)."""

    precision: str
    verdict: str
    needed_gb: float | None = None  # everything: the weights and what running them takes
    available_gb: float | None = None
    note: str = ""
    weights_gb: float | None = None  # the model's weights at this precision
    runtime_gb: float | None = None  # the rest: KV cache, step memory, activations, the runtime's overhead


@dataclass(frozen=True)
class Inspection:
    folder: str
    problems: tuple[str, ...] = ()
    problem_kind: str = ""
    summary: str = ""
    device: str = ""
    fit: tuple[FitRow, ...] = ()
    fit_note: str = ""

    @property
    def loadable(self) -> bool:
        return not self.problems


def inspect_folder(folder: str, device: str = "auto") -> Inspection:
    """Validate `folder` and estimate its memory fit; never raises (everything becomes text)."""
    from engine.weights.loader import validate_checkpoint

    try:
        ckpt = validate_checkpoint(folder)
    except EngineError as exc:
        return Inspection(folder, (exc.message,), exc.kind)
    except Exception as exc:
        log.exception("model check failed")
        return Inspection(
            folder,
            (
                f"{folder} could not be checked ({type(exc).__name__}). Choose another folder, "
                "or see the log for details.",
            ),
            "engine_error",
        )
    shards = len(ckpt.weight_files)
    summary = (
        f"Complete DiffusionGemma checkpoint: {shards} weight file{'s' * (shards != 1)}, "
        f"{ckpt.weight_bytes / 1e9:.2f} GB."
    )
    rows, used_device, note = estimate_fit(folder, device)
    return Inspection(folder, summary=summary, device=used_device, fit=rows, fit_note=note)


# the fit badge shows both quantized schemes
FIT_PRECISIONS: tuple[Precision, ...] = ("nf4", "nf4-mixed", "bf16", "fp32")


def estimate_fit(folder: str, device: str) -> tuple[tuple[FitRow, ...], str, str]:
    """`engine.weights.fit`'s estimate for each precision against the free memory of the device ("auto": the
    first CUDA device if there is one, else the CPU). Returns (rows, device label, note); never raises."""
    try:
        from engine.weights import fit
    except ImportError:
        return (), device, "No memory estimate is available in this build."
    try:
        config = fit.read_config(folder)
        if device == "auto":
            found = fit.devices_found()
            device = next((d.device for d in found if d.device.startswith("cuda")), "cpu")
        # The context the model can read, at most the estimate's usual one (the demo reads 512, not 8,192).
        text_config = config.get("text_config", config) if isinstance(config, dict) else {}
        positions = text_config.get("max_position_embeddings") if isinstance(text_config, dict) else None
        context = fit.DEFAULT_CONTEXT
        if isinstance(positions, int) and not isinstance(positions, bool) and 0 < positions < context:
            context = positions
        # At the app's default alternatives: what a writer's requests will need (each request is budgeted
        # again).
        estimates = [
            fit.estimate_for_device(
                config, p, device, context_tokens=context, candidates=fit.DEFAULT_CANDIDATES
            )
            for p in FIT_PRECISIONS
        ]
    except Exception as exc:  # noqa: BLE001 - an estimate must never stop the dialog
        log.warning("fit estimate failed: %s: %s", type(exc).__name__, exc)
        return (
            (),
            device,
            "The memory estimate is not available for this checkpoint; you can still try to load.",
        )
    rows = tuple(
        FitRow(
            e.precision,
            e.verdict,
            e.total_bytes / 1e9,
            e.available_bytes / 1e9 if e.available_bytes is not None else None,
            e.text(),
            e.weights_bytes / 1e9,
            (e.total_bytes - e.weights_bytes) / 1e9,
        )
        for e in estimates
    )
    return rows, estimates[0].device if estimates else device, ""


# ------------------------------------------------------------------------------------------------------------
# The dialog


class _Relay(QObject):
    """Carries a worker thread's result to the UI thread (queued signal)."""

    done = Signal(object)


class ModelDialog(QDialog):
    """Pick, check and load a model. `host` is the window's EngineHost (or anything with its load signals)."""

    def __init__(
        self,
        host: Any,
        settings: Settings | None = None,
        parent: QWidget | None = None,
        *,
        cache_dirs: list[Path] | None = None,
        inspector: Callable[[str, str], Inspection] = inspect_folder,
        loader: Callable[[str, str, str], None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("modelDialog")
        self.setWindowTitle("Model")
        self.setMinimumWidth(640)
        self.host = host
        self.settings = settings
        self.inspector = inspector
        self.loader = loader if loader is not None else host.load
        self.inspection: Inspection | None = None
        self.loading = False
        self._mine = False  # the current load was started here (so its folder is remembered)
        self._check_serial = 0
        self._relay = _Relay(self)
        self._relay.done.connect(self._on_inspected, Qt.ConnectionType.QueuedConnection)
        self._build(cache_dirs)
        host.loadStarted.connect(self._on_load_started)
        host.loadProgress.connect(self._on_load_progress)
        host.loaded.connect(self._on_loaded)
        host.loadFailed.connect(self._on_load_failed)
        info = getattr(host, "model_info", None)
        self._show_status(f"Loaded: {loaded_text(info)}." if info else "No model loaded.")
        start = settings.typed.model.folder if settings is not None else ""
        if start:
            self.folder.setText(demo_wording().name if is_demo_choice(start) else start)
            self.check()

    def _build(self, cache_dirs: list[Path] | None) -> None:
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        self.folder = QLineEdit()
        self.folder.setObjectName("modelFolder")
        self.folder.setPlaceholderText("A folder with config.json, tokenizer.json and .safetensors weights")
        # Checked as it is typed (debounced), and at once on Enter; Load stays disabled until a check passes.
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(CHECK_DEBOUNCE_MS)
        self._debounce.timeout.connect(self.check)
        self.folder.textEdited.connect(self._on_folder_edited)
        self.folder.returnPressed.connect(self.check)
        browse = QPushButton("Browse…")
        browse.setObjectName("modelBrowseButton")
        browse.setAutoDefault(False)  # Enter in the folder field checks the folder; it never opens Browse
        browse.clicked.connect(self.browse)
        row.addWidget(QLabel("Folder:"))
        row.addWidget(self.folder, 1)
        row.addWidget(browse)
        layout.addLayout(row)

        self.cached = QListWidget()
        self.cached.setObjectName("modelCacheList")
        self.cached.setMaximumHeight(110)
        # The built-in demo is always offered (first): a writer whose model moved can always get back to one
        # that runs. Choosing it stores the marker `builtin:demo`, never the install folder's path.
        words = demo_wording()
        demo = QListWidgetItem(f"{words.name} (shows how Letterpress works; not a writing model)")
        demo.setData(Qt.ItemDataRole.UserRole, DEMO_MARKER)
        demo.setToolTip(words.summary)
        self.cached.addItem(demo)
        found = find_cached_checkpoints(cache_dirs)
        for m in found:
            item = QListWidgetItem(m.label)
            item.setData(Qt.ItemDataRole.UserRole, str(m.path))
            item.setToolTip(str(m.path))
            self.cached.addItem(item)
        self.cached.itemClicked.connect(lambda item: self.choose(item.data(Qt.ItemDataRole.UserRole)))
        layout.addWidget(QLabel("Models here (the built-in demo, and those in the Hugging Face cache):"))
        layout.addWidget(self.cached)
        if not found:
            hint = QLabel(
                f"No DiffusionGemma model in the Hugging Face cache. Download one with:\n{DOWNLOAD_HINT}"
            )
            hint.setObjectName("modelDownloadHint")
            hint.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            hint.setWordWrap(True)
            layout.addWidget(hint)

        form = QFormLayout()
        self.device = QComboBox()
        self.device.setObjectName("modelDevice")
        self.device.addItems(["auto", "cuda", "cpu"])
        self.quantization = QComboBox()
        self.quantization.setObjectName("modelQuantization")
        self.quantization.addItems(["auto", "nf4", "nf4-mixed", "none"])
        if self.settings is not None:
            self.device.setCurrentText(self.settings.typed.model.device)
            self.quantization.setCurrentText(self.settings.typed.model.quantization)
        self.device.currentTextChanged.connect(lambda _: self.check())
        form.addRow("Device:", self.device)
        form.addRow("Quantization:", self.quantization)
        layout.addLayout(form)

        self.check_label = QLabel()
        self.check_label.setObjectName("modelCheck")
        self.check_label.setWordWrap(True)
        self.check_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.check_label)

        # The model's weights and what running it takes are separate columns: a 15 MB model "needing 1.2 GB"
        # read as if the model were 1.2 GB (the runtime's own gigabyte was counted as model).
        self.fit_table = QTableWidget(0, len(FIT_COLUMNS))
        self.fit_table.setObjectName("modelFitTable")
        self.fit_table.setHorizontalHeaderLabels(list(FIT_COLUMNS))
        self.fit_table.horizontalHeader().setStretchLastSection(True)
        self.fit_table.verticalHeader().hide()
        self.fit_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.fit_table.setMaximumHeight(130)
        self.fit_table.hide()
        layout.addWidget(self.fit_table)

        self.progress = QProgressBar()
        self.progress.setObjectName("modelProgress")
        self.progress.hide()
        layout.addWidget(self.progress)
        self.status = QLabel()
        self.status.setObjectName("modelStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status)

        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.load_button = QPushButton("Load")
        self.load_button.setObjectName("modelLoadButton")
        self.load_button.setEnabled(False)
        self.load_button.clicked.connect(self.load)
        self.cancel_button = QPushButton("Cancel loading")
        self.cancel_button.setObjectName("modelCancelButton")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel_load)
        close = QPushButton("Close")
        close.clicked.connect(self.reject)
        for b in (self.load_button, self.cancel_button, close):
            b.setAutoDefault(False)  # Enter belongs to the folder field
            buttons.addWidget(b)
        layout.addLayout(buttons)

    # -- choosing and checking -------------------------------------------------------------------------------

    def browse(self) -> None:
        chosen = QFileDialog.getExistingDirectory(self, "Choose the model folder", self.folder.text())
        if chosen:
            self.choose(chosen)

    def choose(self, folder: str) -> None:
        self.folder.setText(demo_wording().name if is_demo_choice(folder) else folder)
        self.check()

    def chosen_folder(self) -> str:
        """The folder the field names: "Built-in demo" (or the marker) is this version's demo folder."""
        text = self.folder.text().strip()
        if text in (demo_wording().name, DEMO_MARKER):
            return folder_for(DEMO_MARKER)
        return text

    def _on_folder_edited(self, _text: str) -> None:
        """A keystroke: the last result no longer applies (Load off), and a check runs once typing pauses."""
        self._check_serial += 1
        self.inspection = None
        self.load_button.setEnabled(False)
        self._debounce.start()

    def check(self) -> None:
        """Validate the folder and estimate the fit on a worker thread; the newest check wins."""
        self._debounce.stop()
        folder = self.chosen_folder()
        self._check_serial += 1
        serial = self._check_serial
        self.inspection = None
        self.load_button.setEnabled(False)
        self.fit_table.hide()
        if not folder:
            self.check_label.setText("")
            return
        self.check_label.setText("Checking the folder…")
        device = self.device.currentText()

        def work() -> None:
            try:
                result = self.inspector(folder, device)
            except Exception as exc:
                log.exception("model check failed")
                result = Inspection(folder, (f"The folder could not be checked: {exc}",))
            self._relay.done.emit((serial, result))

        threading.Thread(target=work, name="model-check", daemon=True).start()

    def _on_inspected(self, payload: tuple[int, Inspection]) -> None:
        serial, inspection = payload
        if serial != self._check_serial:
            return  # a newer check is running
        self.inspection = inspection
        if inspection.problems:
            text = "\n".join(dict.fromkeys(inspection.problems))  # each sentence once
            fix = fix_for(inspection.problem_kind, text, inspection.device or self.device.currentText())
            self.check_label.setText(f"✗ {text}" + (f"\n{fix}" if fix else ""))
            self.check_label.setStyleSheet(f"color: {VERDICT_COLOR['wont_fit']};")
        else:
            self.check_label.setText(
                f"✓ {inspection.summary}" + (f"\n{inspection.fit_note}" if inspection.fit_note else "")
            )
            self.check_label.setStyleSheet("")
            self._show_fit(inspection)
        self.load_button.setEnabled(inspection.loadable and not self.loading)

    def _show_fit(self, inspection: Inspection) -> None:
        rows = inspection.fit
        self.fit_table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            badge = QTableWidgetItem(VERDICT_TEXT.get(r.verdict, r.verdict or "?"))
            badge.setForeground(_color(VERDICT_COLOR.get(r.verdict, "#555555")))
            cells = [
                QTableWidgetItem(r.precision),
                badge,
                QTableWidgetItem(size_text(r.weights_gb)),
                QTableWidgetItem(size_text(r.runtime_gb)),
                QTableWidgetItem(size_text(r.needed_gb)),
                QTableWidgetItem(
                    f"{r.available_gb:.1f} GB on {inspection.device}"
                    if r.available_gb is not None
                    else "unknown"
                ),
            ]
            for col, cell in enumerate(cells):
                cell.setToolTip(r.note)
                self.fit_table.setItem(i, col, cell)
        self.fit_table.resizeColumnsToContents()
        self.fit_table.setVisible(bool(rows))

    def fit_verdicts(self) -> dict[str, str]:
        """precision -> verdict, as shown (for tests and the status bar)."""
        return {r.precision: r.verdict for r in (self.inspection.fit if self.inspection else ())}

    # -- loading ---------------------------------------------------------------------------------------------

    def load(self) -> None:
        folder = self.chosen_folder()
        if not folder or self.inspection is None or not self.inspection.loadable:
            return
        self.loading = True
        self._mine = True
        self.load_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setRange(0, 0)
        self.progress.show()
        self._show_status(f"Loading {Path(folder).name}…")
        self.loader(folder, self.device.currentText(), self.quantization.currentText())

    def cancel_load(self) -> None:
        if self.loading:
            self.host.cancel_load()
            self._show_status("Cancelling…")

    def _on_load_started(self, folder: str) -> None:
        self.loading = True
        self.cancel_button.setEnabled(True)
        self.load_button.setEnabled(False)
        self.progress.show()

    def _on_load_progress(self, p: LoadProgress) -> None:
        from app.ui.load_status import describe, percent

        share = percent(p)
        if share is None:
            self.progress.setRange(0, 0)  # busy: a phase without a measurable fraction
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * p.fraction))
        tensors = f", {p.done} of {p.total} tensors" if p.total else ""
        self._show_status(f"{describe(p)}{tensors}")

    def _on_loaded(self, info: ModelInfo) -> None:
        self._finish_loading()
        self.progress.setRange(0, 1000)
        self.progress.setValue(1000)
        note = f"\n{info.notice}" if info.notice else ""
        self._show_status(f"Loaded {loaded_text(info)}.{note}")
        mine, self._mine = self._mine, False
        if mine and self.settings is not None:
            # Remember it for the next start. Signals are blocked: this model is already loaded, and listeners
            # of model.* (the window) would otherwise load it a second time.
            blocked = self.settings.blockSignals(True)
            try:
                self.settings.update(
                    {
                        "model.folder": stored_value(info.path or self.chosen_folder()),
                        "model.device": self.device.currentText(),
                        "model.quantization": self.quantization.currentText(),
                    }
                )
            except (ValueError, KeyError) as exc:
                log.warning("could not remember the model: %s", exc)
            finally:
                self.settings.blockSignals(blocked)

    def _on_load_failed(self, error: EngineError) -> None:
        self._mine = False
        self._finish_loading()
        self.progress.hide()
        kind = getattr(error, "kind", "engine_error")
        message = getattr(error, "message", str(error))
        where = (self.inspection.device if self.inspection else "") or self.device.currentText()
        fix = fix_for(kind, message, where)
        kept = getattr(self.host, "model_info", None)
        still = f"\nStill using {loaded_text(kept)}." if kept is not None else ""
        self._show_status(
            f"{'Loading cancelled.' if kind == 'load_cancelled' else 'Not loaded: ' + message}"
            + (f"\n{fix}" if fix else "")
            + still,
            error=kind != "load_cancelled",
        )

    def _finish_loading(self) -> None:
        self.loading = False
        self.cancel_button.setEnabled(False)
        self.load_button.setEnabled(self.inspection is not None and self.inspection.loadable)

    def _show_status(self, text: str, *, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(f"color: {VERDICT_COLOR['wont_fit']};" if error else "")


def _color(hex_color: str) -> Any:
    from PySide6.QtGui import QColor

    return QColor(hex_color)
