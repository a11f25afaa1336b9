"""Loading shows real progress: the bar follows the bytes loaded, and a phase without a fraction says
"Preparing…" and what is happening, with a busy bar instead of 0%."""

from __future__ import annotations

import itertools
import threading

from app.ui.load_status import describe, percent
from engine.api import LoadProgress, ModelInfo
from engine.fake import FakeEngine


def test_a_measurable_phase_shows_the_share_of_bytes():
    p = LoadProgress(1, 10, 600_000_000, 1_000_000_000, "loading")  # one big tensor of ten: 60% of the bytes
    assert percent(p) == 60
    assert describe(p) == "Loading model: reading weights 60% (600 MB of 1.0 GB)"
    assert "quantizing to 4 bits" in describe(LoadProgress(3, 4, 3, 4, "quantizing"))


def test_phases_without_a_fraction_say_preparing_and_what_happens():
    for stage, words in (
        ("starting", "starting the engine"),
        ("preparing", "reading the checkpoint"),
        ("moving to the GPU", "moving to the GPU"),
        ("warming up", "warming up"),
    ):
        p = LoadProgress(0, 0, stage=stage)
        assert percent(p) is None
        assert describe(p) == f"Preparing… {words}"


class _SteppedEngine(FakeEngine):
    """Loads in phases the test releases one at a time."""

    def __init__(self) -> None:
        super().__init__(steps=2)
        self.gates = [threading.Event() for _ in range(4)]
        self.reached = [threading.Event() for _ in range(4)]

    def load(self, model_dir, *, device="auto", quantization="auto", on_progress=None, cancel=None):
        plan = [
            LoadProgress(0, 0, stage="preparing"),
            LoadProgress(1, 4, 250, 1000, "loading"),
            LoadProgress(4, 4, 1000, 1000, "loading"),
            LoadProgress(0, 0, stage="warming up"),
        ]
        for progress, gate, reached in zip(plan, self.gates, self.reached, strict=True):
            on_progress(progress)
            reached.set()
            gate.wait(10)
        self._info = ModelInfo("stepped", str(model_dir), "cpu", "float32", "none", 1, 32, 512)
        return self._info


def test_the_status_bar_follows_each_phase(qtbot):
    from app.assist.engine_host import EngineHost
    from app.main_window import MainWindow

    engine = _SteppedEngine()
    host = EngineHost(lambda: engine)
    host.start()
    window = MainWindow(host, model_dir="fake")
    qtbot.addWidget(window)
    seen = []
    try:
        for i, gate in enumerate(engine.gates):
            assert engine.reached[i].wait(10)
            qtbot.wait(50)
            seen.append(
                (
                    window.modelLabel.text(),
                    window.loadBar.minimum(),
                    window.loadBar.maximum(),
                    window.loadBar.value(),
                )
            )
            gate.set()
        qtbot.waitUntil(lambda: window.model_state == "ready", timeout=10_000)
    finally:
        for gate in engine.gates:
            gate.set()
        host.shutdown()
    assert seen[0][:3] == ("Preparing… reading the checkpoint", 0, 0)  # busy, not 0%
    assert seen[1][0].startswith("Loading model: reading weights 25%") and seen[1][1:] == (0, 100, 25)
    assert seen[2][3] == 100
    assert seen[3][:3] == ("Preparing… warming up", 0, 0)
    assert not window.loadBar.isVisible() and window.modelLabel.text().startswith("Ready")


def test_the_real_load_reports_phases_in_order_and_bytes_only_grow(tmp_path_factory):
    from engine.session import Session
    from tests.helpers.checkpoints import tiny_checkpoint

    model = tiny_checkpoint(tmp_path_factory)
    events: list[LoadProgress] = []
    Session().load(model, device="cpu", on_progress=events.append)
    stages = [e.stage for e in events]
    assert stages[0] == "preparing" and stages[-2:] == ["warming up", "ready"]
    loading = [e for e in events if e.stage == "loading"]
    assert len(loading) > 3 and loading[-1].fraction == 1.0
    assert all(a.bytes_done <= b.bytes_done for a, b in itertools.pairwise(loading))


def test_the_bar_moves_inside_one_big_tensor(tmp_path_factory, monkeypatch):
    """A 1 GB expert tensor held the bar at 8% for 3 s, then it jumped to 67%: progress must come with the
    bytes read, not only between tensors (here READ_CHUNK is made small so that the tiny model's tensors span
    chunks)."""
    from engine.weights import tensorfile
    from engine.weights.loader import load_model
    from tests.helpers.checkpoints import tiny_checkpoint

    model = tiny_checkpoint(tmp_path_factory)
    monkeypatch.setattr(tensorfile, "READ_CHUNK", 4096)
    events: list[LoadProgress] = []
    load_model(model, device="cpu", quantization="none", on_progress=events.append)
    loading = [e for e in events if e.stage == "loading"]
    inside = [
        e
        for e in loading
        if e.done < e.total
        and e.bytes_done > 0
        and e.bytes_done not in {b.bytes_done for b in loading if b is not e and b.done > e.done}
    ]
    assert max(b.bytes_done - a.bytes_done for a, b in itertools.pairwise(loading)) <= 4096 + 64
    assert inside and all(a.bytes_done <= b.bytes_done for a, b in itertools.pairwise(loading))


def test_a_cast_tensor_is_converted_a_part_at_a_time(tmp_path, monkeypatch):
    """bf16 -> float32 of a 1 GB tensor in one piece held the bar 2-3 s after its bytes were read: cast in
    parts."""
    import torch
    from safetensors.torch import save_file

    from engine.weights import stream_load, tensorfile

    weight = torch.randn(16, 8, 32).to(torch.bfloat16)
    save_file({"w": weight}, str(tmp_path / "m.safetensors"))
    monkeypatch.setattr(tensorfile, "READ_CHUNK", 1024)
    parts: list[int] = []
    with tensorfile.TensorFileReader(tmp_path / "m.safetensors") as reader:
        entry = reader.entries["w"]
        assert stream_load._converted_in_rows(entry, "cpu", torch.float32)
        out = stream_load._read_cast_in_rows(reader, entry, "cpu", torch.float32, parts.append)
    assert out.dtype == torch.float32 and torch.equal(out, weight.float())
    assert parts == [1024 * k for k in range(1, 9)]  # 16 rows of 512 bytes, two rows a part


def test_weights_are_read_into_buffers_made_without_the_gil(tmp_path, monkeypatch):
    """bytearray(n) zero-fills its memory with the GIL held (170 ms per 64 MB chunk seen during a load, 380 ms
    for a 1 GB tensor: the window froze). The reader's buffers come from torch.empty (no fill, GIL
    released)."""
    import builtins

    import torch
    from safetensors.torch import save_file

    from engine.weights import tensorfile

    weight = torch.randn(64, 128)
    save_file({"w": weight}, str(tmp_path / "m.safetensors"))
    real = builtins.bytearray

    def no_big_bytearray(*args: object) -> bytearray:
        assert not (args and isinstance(args[0], int) and args[0] >= 4096), (
            "a zero-filled buffer under the GIL"
        )
        return real(*args)

    monkeypatch.setattr(tensorfile, "bytearray", no_big_bytearray, raising=False)
    monkeypatch.setattr(tensorfile, "READ_CHUNK", 1000)
    with tensorfile.TensorFileReader(tmp_path / "m.safetensors") as reader:
        assert torch.equal(reader.read("w"), weight) and torch.equal(reader.read_row("w", 5), weight[5])
        seen: list[int] = []
        raw = reader.read_bytes(reader.entries["w"], on_chunk=seen.append)
    assert torch.equal(torch.frombuffer(raw, dtype=torch.float32).reshape(64, 128), weight)
    assert seen[-1] == weight.numel() * 4 and len(seen) == -(-weight.numel() * 4 // 1000)


def test_a_small_checkpoint_shows_kilobytes_not_zero_megabytes():
    text = describe(LoadProgress(2, 3, 400_000, 600_000, "loading"))
    assert text.endswith("(400 kB of 600 kB)"), text  # it said "67% (0 MB of 1 MB)" for the tiny checkpoint
