"""A model folder is validated as a whole before it is called ready (issue 22): weights finite in a sampled
check, config numbers that cannot make every draft empty, generation_config.json, the chat template rendered
once with a deadline (Cancel stops it), and shards whose unlisted tensor copies would replace the listed
ones."""

from __future__ import annotations

import json
import shutil
import struct
import threading
from pathlib import Path

import pytest

from engine.api import LoadCancelledError, ModelDamagedError, UnsupportedModelError
from engine.weights.validate import problems, validate_folder

FOREVER = "{% for a in range(100000) %}{% for b in range(100000) %}{{ '' }}{% endfor %}{% endfor %}"


@pytest.fixture()
def folder(tiny_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "model"
    shutil.copytree(tiny_dir, copy)
    return copy


def _header(path: Path) -> tuple[int, dict]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return n, json.loads(raw[8 : 8 + n])


def _poke(path: Path, tensor: str, where: str, bits: bytes) -> None:
    """Overwrite one element of `tensor` (at its start, middle or end) with `bits`, in place."""
    n, header = _header(path)
    begin, end = header[tensor]["data_offsets"]
    width = len(bits)
    offset = {"start": begin, "middle": begin + ((end - begin) // 2) // width * width, "end": end - width}[
        where
    ]
    with path.open("r+b") as fh:
        fh.seek(8 + n + offset)
        fh.write(bits)


def _a_float_tensor(path: Path) -> tuple[str, str]:
    _, header = _header(path)
    name, spec = max(
        ((k, v) for k, v in header.items() if k != "__metadata__"),
        key=lambda kv: kv[1]["data_offsets"][1] - kv[1]["data_offsets"][0],
    )
    return name, spec["dtype"]


NAN = {
    "F32": struct.pack("<I", 0x7FC00000),
    "BF16": struct.pack("<H", 0x7FC0),
    "F16": struct.pack("<H", 0x7E00),
}
INF = {
    "F32": struct.pack("<I", 0x7F800000),
    "BF16": struct.pack("<H", 0x7F80),
    "F16": struct.pack("<H", 0x7C00),
}


@pytest.mark.parametrize(("value", "where"), [(NAN, "start"), (INF, "middle"), (NAN, "end")])
def test_nan_or_infinite_weights_are_refused(folder: Path, value: dict, where: str) -> None:
    name, dtype = _a_float_tensor(folder / "model.safetensors")
    _poke(folder / "model.safetensors", name, where, value[dtype])
    with pytest.raises(ModelDamagedError, match="NaN or infinite"):
        validate_folder(folder)


def _set_text(folder: Path, path: list[str], value: object) -> None:
    config = json.loads((folder / "config.json").read_text())
    node = config["text_config"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (["rope_parameters", "sliding_attention", "rope_theta"], 0, "rotary base"),
        (["rope_parameters", "full_attention", "rope_theta"], -1.0, "rotary base"),
        (["rms_norm_eps"], -1e-6, "epsilon"),
        (["rms_norm_eps"], 0, "epsilon"),
        (["rms_norm_eps"], float("nan"), "NaN"),
        (["initializer_range"], float("inf"), "NaN or infinity"),
        (["rope_parameters", "full_attention", "partial_rotary_factor"], 0, "rotated"),
    ],
)
def test_config_numbers_that_empty_every_draft_are_refused(
    folder: Path, path: list[str], value: object, words: str
) -> None:
    _set_text(folder, path, value)
    with pytest.raises(ModelDamagedError, match=words):
        validate_folder(folder)


def _set_gen(folder: Path, text: str) -> None:
    (folder / "generation_config.json").write_text(text)


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        (lambda g: json.dumps(g)[: len(json.dumps(g)) // 2], ModelDamagedError, "not valid JSON"),
        (lambda g: json.dumps({**g, "eos_token_id": "<eos>"}), ModelDamagedError, "not a token id"),
        (lambda g: json.dumps({**g, "eos_token_id": [1, 10**9]}), ModelDamagedError, "not a token id"),
        (lambda g: json.dumps({**g, "pad_token_id": -1}), ModelDamagedError, "not a token id"),
        (
            lambda g: json.dumps({**g, "max_denoising_steps": 1e9}),
            UnsupportedModelError,
            "max_denoising_steps",
        ),
        (lambda g: json.dumps({**g, "max_denoising_steps": 0}), UnsupportedModelError, "max_denoising_steps"),
        (lambda g: json.dumps({**g, "t_min": 0.9}), ModelDamagedError, "t_min"),
        (lambda g: json.dumps({**g, "t_max": float("nan")}), ModelDamagedError, "NaN"),
        (
            lambda g: json.dumps({**g, "sampler_config": {"entropy_bound": -1}}),
            ModelDamagedError,
            "entropy_bound",
        ),
        (lambda g: "[1, 2]", ModelDamagedError, "a list"),
    ],
)
def test_generation_config_is_validated(folder: Path, change, error: type, words: str) -> None:
    gen = json.loads((folder / "generation_config.json").read_text())
    _set_gen(folder, change(gen))
    with pytest.raises(error, match=words):
        validate_folder(folder)
    assert (folder / "generation_config.json").name in problems(folder)[0]


def _set_template(folder: Path, template: str) -> None:
    (folder / "chat_template.jinja").write_text(template)


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("{{ raise_exception('this template is broken') }}", "fails when it builds a prompt"),
        ("{% for m in messages %}{{ m.content.nope() }}{% endfor %}", "fails when it builds a prompt"),
        ("{{ 'x' * 10**9 }}", "fails when it builds a prompt"),
        ("{{ 7 ** 10000000 }}{{ messages[0].content }}", "fails when it builds a prompt"),
        ("<start_of_turn>user\n<end_of_turn>\n", "leaves the writer's message out"),
        (FOREVER, "did not finish rendering"),
    ],
)
def test_a_chat_template_that_fails_or_hangs_when_rendered_is_refused(
    folder: Path, template: str, words: str
) -> None:
    _set_template(folder, template)
    with pytest.raises(ModelDamagedError, match=words):
        validate_folder(folder)


def test_cancel_stops_a_template_that_renders_forever(folder: Path) -> None:
    _set_template(folder, FOREVER)
    cancel = threading.Event()
    timer = threading.Timer(0.2, cancel.set)
    timer.start()
    try:
        with pytest.raises(LoadCancelledError):  # not the deadline's "did not finish rendering"
            validate_folder(folder, cancel=cancel)
    finally:
        timer.cancel()


def test_the_loader_refuses_before_ready_and_cancel_reaches_the_template(folder: Path) -> None:
    from engine.weights.loader import load_model

    name, dtype = _a_float_tensor(folder / "model.safetensors")
    _poke(folder / "model.safetensors", name, "middle", NAN[dtype])
    stages: list[str] = []
    with pytest.raises(ModelDamagedError, match="NaN"):
        load_model(folder, device="cpu", on_progress=lambda p: stages.append(p.stage))
    assert "ready" not in stages
    _poke(folder / "model.safetensors", name, "middle", b"\0" * len(NAN[dtype]))
    _set_template(folder, FOREVER)
    cancel = threading.Event()
    timer = threading.Timer(0.2, cancel.set)
    timer.start()
    try:
        with pytest.raises(LoadCancelledError):
            load_model(folder, device="cpu", cancel=cancel)
    finally:
        timer.cancel()


def _shard(folder: Path) -> None:
    """Split model.safetensors into two shards with an index, as a real download is laid out."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    names = sorted(tensors)
    half = len(names) // 2
    parts = {
        "model-00001-of-00002.safetensors": names[:half],
        "model-00002-of-00002.safetensors": names[half:],
    }
    weight_map = {}
    for file, part in parts.items():
        save_file({n: tensors[n] for n in part}, folder / file, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file))
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map})
    )


def test_a_shards_unlisted_copy_of_a_tensor_is_refused(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    _shard(folder)
    assert problems(folder) == []  # the split itself is a good folder
    first = folder / "model-00001-of-00002.safetensors"
    second = folder / "model-00002-of-00002.safetensors"
    listed = min(load_file(first))
    tensors = load_file(second)
    tensors[listed] = (
        load_file(first)[listed] * 0 + 7
    )  # a different copy of a tensor the index puts in shard 1
    save_file(tensors, second, metadata={"format": "pt"})
    with pytest.raises(ModelDamagedError, match="also holds tensor"):
        validate_folder(folder)
