"""A generated corpus of broken model folders, and a runner that puts each through one stage under a memory
cap.

Every kind is made from a copy of a good checkpoint (the tiny one in tests) and names the error type it must
be refused with and words the sentence must contain. `python -m tests.helpers.broken_folders STAGE CORPUS MB`
runs one stage ("check": the model manager's check; "validate": the shared validation pass; "loader": a real
`load_model` on the CPU) over every folder of a corpus with the address space capped at MB, and prints one
JSON line per folder (kind, message, seconds, peak RSS), so a test can assert a sentence, no traceback,
bounded time and bounded memory.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "generation_config.json",
    "model.safetensors",
)


@dataclass(frozen=True)
class Kind:
    name: str
    make: Callable[[Path], None]  # damages a good copy in place (the folder argument)
    error: str  # the EngineError.kind it must be refused with
    words: tuple[str, ...]  # the sentence contains each (case-insensitive)
    target: str = ""  # the path to check, relative to the corpus entry ("" = the entry itself)
    unprivileged: bool = False  # a permission case: only meaningful for a user without root's override
    stage: str = "check"  # the first stage that must refuse it: "check" (and so every later one) or "loader"
    issue: str = ""  # where it comes from: "already handled" or the issue's failing case


# ------------------------------------------------------------------------------------------------------------
# helpers


def _config(d: Path) -> dict[str, Any]:
    return json.loads((d / "config.json").read_text(encoding="utf-8"))


def _set_config(d: Path, **text: Any) -> None:
    config = _config(d)
    for key, value in text.items():
        if key == "canvas_length" or key in ("model_type", "auto_map"):
            config[key] = value
        else:
            config["text_config"][key] = value
    (d / "config.json").write_text(json.dumps(config), encoding="utf-8")


def _header(d: Path, name: str = "model.safetensors") -> tuple[dict[str, Any], bytes]:
    raw = (d / name).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def _write(
    d: Path, header: Any, data: bytes, name: str = "model.safetensors", *, raw_header: bytes | None = None
) -> None:
    blob = raw_header if raw_header is not None else json.dumps(header).encode()
    (d / name).write_bytes(struct.pack("<Q", len(blob)) + blob + data)


def _mutate_header(fn: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    """Change the header of model.safetensors in place (`fn` edits the dict), keeping the data as it was."""

    def make(d: Path) -> None:
        header, data = _header(d)
        fn(header)
        _write(d, header, data)

    return make


def _first(header: dict[str, Any], part: str) -> str:
    return next(k for k in header if part in k)


def _transpose_q(header: dict[str, Any]) -> None:
    key = _first(header, "layers.0.self_attn.q_proj.weight")
    header[key]["shape"] = list(reversed(header[key]["shape"]))


def _wrong_embedding(header: dict[str, Any]) -> None:
    key = _first(header, "decoder.embed_tokens.weight")
    rows, cols = header[key]["shape"]
    header[key]["shape"] = [rows // 2, cols * 2]


def _shape_bytes_mismatch(header: dict[str, Any]) -> None:
    key = _first(header, "decoder.norm.weight")
    header[key]["shape"] = [header[key]["shape"][0] * 2]


def _overlap(header: dict[str, Any]) -> None:
    keys = sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
    a, b = header[keys[0]], header[keys[1]]
    if a["data_offsets"][1] - a["data_offsets"][0] == b["data_offsets"][1] - b["data_offsets"][0]:
        b["data_offsets"] = list(a["data_offsets"])
    else:
        a["data_offsets"] = [a["data_offsets"][0] + 2, a["data_offsets"][1] + 2]


def _transpose_global_q(header: dict[str, Any]) -> None:
    """A transposed weight in a global-attention layer, whose head size the header check does not model: the
    loader must catch it (it compares every tensor with the model it builds, before reading a weight)."""
    key = _first(header, "decoder.layers.1.self_attn.q_proj.weight")
    header[key]["shape"] = list(reversed(header[key]["shape"]))


def _extra_layer(header: dict[str, Any]) -> None:
    key = _first(header, "decoder.layers.0.input_layernorm.weight")
    header[key.replace("layers.0.", "layers.9.")] = header.pop(key)


def _split_into_shards(
    d: Path, *, index: dict[str, Any] | None = None, names: tuple[str, str] | None = None
) -> None:
    """model.safetensors as two shards + an index (the layout of every real download)."""
    header, data = _header(d)
    (d / "model.safetensors").unlink()
    keys = [k for k in header if k != "__metadata__"]
    shard_names = names or ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    weight_map = {}
    for part, shard in zip((keys[: len(keys) // 2], keys[len(keys) // 2 :]), shard_names, strict=False):
        sub, chunks, offset = {}, [], 0
        for k in part:
            lo, hi = header[k]["data_offsets"]
            sub[k] = {**header[k], "data_offsets": [offset, offset + hi - lo]}
            chunks.append(data[lo:hi])
            offset += hi - lo
            weight_map[k] = shard
        _write(d, sub, b"".join(chunks), shard)
    (d / "model.safetensors.index.json").write_text(
        json.dumps(index or {"metadata": {}, "weight_map": weight_map})
    )


def _index_with(fn: Callable[[dict[str, str]], None]) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        _split_into_shards(d)
        index = json.loads((d / "model.safetensors.index.json").read_text())
        fn(index["weight_map"])
        (d / "model.safetensors.index.json").write_text(json.dumps(index))

    return make


def _redirect_first(target: str) -> Callable[[dict[str, str]], None]:
    def fn(weight_map: dict[str, str]) -> None:
        weight_map[next(iter(weight_map))] = target

    return fn


def _drop_tensor_from_index(weight_map: dict[str, str]) -> None:
    first = next(iter(weight_map))
    weight_map["model.decoder.not_there.weight"] = weight_map[first]


def _replace_dir_with_loop(entry: Path) -> None:
    shutil.rmtree(entry)
    entry.symlink_to(entry.name)  # a link to itself


def _dangling(entry: Path) -> None:
    shutil.rmtree(entry)
    entry.symlink_to(entry.parent / "gone-away")


def _file_not_folder(entry: Path) -> None:
    shutil.rmtree(entry)
    entry.write_text("just a file\n")


def _empty(entry: Path) -> None:
    for p in entry.iterdir():
        p.unlink()


def _tmp_like(entry: Path) -> None:
    _empty(entry)
    (entry / "notes.txt").write_text("shopping list\n")
    (entry / "session-1234").mkdir()
    (entry / "data.json").write_text("{}")


def _fifo(name: str) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        (d / name).unlink()
        os.mkfifo(d / name)

    return make


def _chmod(name: str, mode: int) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        os.chmod(d / name if name else d, mode)

    return make


def _foreign_tokenizer(d: Path) -> None:
    from tokenizers import Tokenizer, models

    vocab = {f"w{i}": i for i in range(int(_config(d)["text_config"]["vocab_size"]) + 100)}
    Tokenizer(models.WordLevel(vocab, unk_token="w0")).save(str(d / "tokenizer.json"))


def _no_chat_template(d: Path) -> None:
    (d / "chat_template.jinja").unlink(missing_ok=True)
    tok = json.loads((d / "tokenizer_config.json").read_text())
    tok.pop("chat_template", None)
    (d / "tokenizer_config.json").write_text(json.dumps(tok))


def _bad_chat_template(d: Path) -> None:
    _no_chat_template(d)
    (d / "chat_template.jinja").write_text("{% for message in messages %}{{ message['content'] }")


def _tokenizer_config_list(d: Path) -> None:
    (d / "chat_template.jinja").unlink(missing_ok=True)
    (d / "tokenizer_config.json").write_text("[1, 2, 3]")


def _sharded_with_index_text(content: str) -> Callable[[Path], None]:
    """Split into shards, then replace the index file with `content` (a malformed index)."""
    write = _text("model.safetensors.index.json", content)

    def make(d: Path) -> None:
        _split_into_shards(d)
        write(d)

    return make


def _text(name: str, content: str | bytes) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())

    return make


def _huge_header(d: Path) -> None:
    _header_bytes, data = _header(d)
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 5 * 1024**3) + b"{}" + data[:1000])


def _truncate(d: Path) -> None:
    raw = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(raw[: len(raw) - 1000])


def _pickle_only(d: Path) -> None:
    (d / "model.safetensors").rename(d / "pytorch_model.bin")


def _no_config(d: Path) -> None:
    (d / "config.json").unlink()


def _config_too_big(d: Path) -> None:
    text = json.dumps(_config(d))
    (d / "config.json").write_text(text[:-1] + " " * (17 * 1024**2) + "}")


def _rm(*names: str) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        for name in names:
            (d / name).unlink()

    return make


def _weights_dir(d: Path) -> None:
    (d / "model.safetensors").unlink()
    (d / "model.safetensors").mkdir()


def _shards_without_index(d: Path) -> None:
    _split_into_shards(d)
    (d / "model.safetensors.index.json").unlink()


KINDS: tuple[Kind, ...] = (
    # the folder itself
    Kind("nonexistent", lambda d: shutil.rmtree(d), "model_not_found", ("does not exist", "choose")),
    Kind("file_not_folder", _file_not_folder, "not_a_model_folder", ("not a folder",)),
    Kind("empty_folder", _empty, "not_a_model_folder", ("not a model folder",), issue="misleading advice"),
    Kind(
        "tmp_like_folder", _tmp_like, "not_a_model_folder", ("not a model folder",), issue="misleading advice"
    ),
    Kind("symlink_loop", _replace_dir_with_loop, "model_not_found", ("loops",), issue="misleading advice"),
    Kind("dangling_symlink", _dangling, "model_not_found", ("does not exist",)),
    Kind(
        "unreadable_folder",
        _chmod("", 0),
        "model_unreadable",
        ("permission",),
        unprivileged=True,
        issue="chmod 000 folder: is_file() raised PermissionError",
    ),
    # config.json
    Kind("no_config", _no_config, "model_incomplete", ("no config.json", "download")),
    Kind("config_fifo", _fifo("config.json"), "model_damaged", ("not a regular file",)),
    Kind(
        "config_is_list",
        _text("config.json", "[1, 2]"),
        "model_damaged",
        ("a list",),
        issue="config is a list",
    ),
    Kind(
        "config_not_json",
        _text("config.json", '{"model_type": "diffusion_gemma", '),
        "model_damaged",
        ("not valid json",),
    ),
    Kind(
        "config_not_utf8",
        _text("config.json", b'{"model_type": "diffusion\xff"}'),
        "model_damaged",
        ("utf-8",),
    ),
    Kind("config_too_big", _config_too_big, "model_damaged", ("more than",)),
    Kind("gpt2_config", lambda d: _set_config(d, model_type="gpt2"), "unsupported_model", ("gpt2",)),
    Kind("llama_config", lambda d: _set_config(d, model_type="llama"), "unsupported_model", ("llama",)),
    Kind(
        "remote_code",
        lambda d: _set_config(d, auto_map={"AutoModel": "x.Y"}),
        "unsupported_model",
        ("own code",),
    ),
    Kind(
        "bidirectional_all",
        lambda d: _set_config(d, use_bidirectional_attention="all"),
        "unsupported_model",
        ("use_bidirectional_attention",),
    ),
    Kind(
        "zero_hidden_size",
        lambda d: _set_config(d, hidden_size=0),
        "unsupported_model",
        ("hidden_size",),
        issue="ZeroDivisionError",
    ),
    Kind(
        "zero_heads",
        lambda d: _set_config(d, num_attention_heads=0),
        "unsupported_model",
        ("num_attention_heads",),
        issue="ZeroDivisionError",
    ),
    Kind(
        "negative_layers",
        lambda d: _set_config(d, num_hidden_layers=-3),
        "unsupported_model",
        ("num_hidden_layers",),
        issue="negative sizes",
    ),
    Kind(
        "string_size",
        lambda d: _set_config(d, intermediate_size="big"),
        "model_damaged",
        ("whole number",),
        issue="invalid literal for int()",
    ),
    Kind("fractional_size", lambda d: _set_config(d, hidden_size=64.5), "model_damaged", ("whole number",)),
    Kind(
        "layers_1e12",
        lambda d: _set_config(d, num_hidden_layers=10**12, layer_types=None),
        "unsupported_model",
        ("num_hidden_layers",),
        issue="fit estimate grew to 2.8 GiB in 37 s",
    ),
    Kind(
        "layers_1e6",
        lambda d: _set_config(d, num_hidden_layers=10**6, layer_types=None),
        "unsupported_model",
        ("num_hidden_layers",),
        issue="said Fits, then 133 s loading",
    ),
    Kind("huge_vocab", lambda d: _set_config(d, vocab_size=10**10), "unsupported_model", ("vocab_size",)),
    Kind(
        "huge_canvas", lambda d: _set_config(d, canvas_length=10**8), "unsupported_model", ("canvas_length",)
    ),
    Kind("huge_experts", lambda d: _set_config(d, num_experts=10**7), "unsupported_model", ("num_experts",)),
    Kind("top_k_above_experts", lambda d: _set_config(d, top_k_experts=9), "unsupported_model", ("experts",)),
    Kind(
        "text_config_list",
        lambda d: (d / "config.json").write_text(json.dumps({**_config(d), "text_config": [1]})),
        "model_damaged",
        ("text_config",),
    ),
    Kind(
        "layer_types_wrong_length",
        lambda d: _set_config(d, layer_types=["sliding_attention"]),
        "model_damaged",
        ("layer_types",),
    ),
    # weights
    Kind("pickle_only", _pickle_only, "unsupported_model", ("pickle", "safetensors")),
    Kind("no_weights", _rm("model.safetensors"), "model_incomplete", ("no model.safetensors",)),
    Kind("weights_are_a_folder", _weights_dir, "model_damaged", ("not a regular file",)),
    Kind("truncated_weights", _truncate, "model_incomplete", ("incomplete", "download")),
    Kind("header_5gib", _huge_header, "model_damaged", ("header", "100,000,000"), issue="5 GiB header read"),
    Kind(
        "header_not_json",
        lambda d: _write(d, None, _header(d)[1], raw_header=b"{not json" + b" " * 7),
        "model_damaged",
        ("not valid json",),
    ),
    Kind(
        "header_is_list",
        lambda d: _write(d, [1, 2], _header(d)[1]),
        "model_damaged",
        ("not a json object",),
        issue="header that is a list",
    ),
    Kind(
        "header_no_offsets",
        _mutate_header(lambda h: h[_first(h, "norm.weight")].pop("data_offsets")),
        "model_damaged",
        ("data_offsets",),
        issue="header without data_offsets",
    ),
    Kind(
        "header_fp8",
        _mutate_header(lambda h: h[_first(h, "norm.weight")].update(dtype="F8_E4M3")),
        "unsupported_model",
        ("f8_e4m3", "bf16"),
        issue="an fp8 dtype",
    ),
    Kind(
        "header_unknown_dtype",
        _mutate_header(lambda h: h[_first(h, "norm.weight")].update(dtype="Q3")),
        "model_damaged",
        ("unknown dtype",),
    ),
    Kind(
        "header_shape_vs_bytes",
        _mutate_header(_shape_bytes_mismatch),
        "model_damaged",
        ("bytes of data",),
        issue="a wrong shape",
    ),
    Kind("header_overlapping_offsets", _mutate_header(_overlap), "model_damaged", ("damaged",)),
    Kind(
        "embedding_shape_vs_config",
        _mutate_header(_wrong_embedding),
        "model_damaged",
        ("config.json implies",),
        issue="a wrong shape",
    ),
    Kind(
        "transposed_weight",
        _mutate_header(_transpose_q),
        "model_damaged",
        ("transposed",),
        issue="loads, then every request fails",
    ),
    Kind(
        "transposed_global_weight",
        _mutate_header(_transpose_global_q),
        "model_damaged",
        ("transposed",),
        stage="loader",
        issue="loads, then every request fails",
    ),
    Kind("layer_beyond_config", _mutate_header(_extra_layer), "model_damaged", ("layer 9",)),
    Kind(
        "unreadable_weights",
        _chmod("model.safetensors", 0),
        "model_unreadable",
        ("permission",),
        unprivileged=True,
        issue="said 'damaged, download it again'",
    ),
    # the shard index
    Kind(
        "index_not_json",
        _sharded_with_index_text("{oops"),
        "model_damaged",
        ("not valid json",),
        issue="malformed index",
    ),
    Kind(
        "index_without_weight_map",
        _sharded_with_index_text('{"metadata": {}}'),
        "model_damaged",
        ("weight_map",),
        issue="malformed index",
    ),
    Kind(
        "index_points_outside",
        _index_with(_redirect_first("../../../../etc/hostname")),
        "model_damaged",
        ("outside the model folder",),
        issue="../../etc/hostname was read",
    ),
    Kind("index_absolute_path", _index_with(_redirect_first("/etc/hostname")), "model_damaged", ("outside",)),
    Kind(
        "index_missing_shard",
        lambda d: (_split_into_shards(d), (d / "model-00002-of-00002.safetensors").unlink()),
        "model_incomplete",
        ("missing", "download"),
    ),
    Kind(
        "index_names_absent_tensor",
        _index_with(_drop_tensor_from_index),
        "model_damaged",
        ("no such tensor",),
    ),
    Kind("shards_without_index", _shards_without_index, "model_incomplete", ("index",)),
    # tokenizer and chat template
    Kind("no_tokenizer", _rm("tokenizer.json"), "model_incomplete", ("tokenizer",)),
    Kind(
        "tokenizer_corrupt",
        lambda d: _text("tokenizer.json", (d / "tokenizer.json").read_bytes()[:5000])(d),
        "model_damaged",
        ("tokenizer.json",),
        issue="a corrupt tokenizer.json",
    ),
    Kind(
        "tokenizer_not_a_tokenizer",
        _text("tokenizer.json", '{"hello": 1}'),
        "model_damaged",
        ("tokenizer.json",),
    ),
    Kind("tokenizer_fifo", _fifo("tokenizer.json"), "model_damaged", ("not a regular file",)),
    Kind("tokenizer_of_another_model", _foreign_tokenizer, "unsupported_model", ("another model",)),
    Kind(
        "unreadable_tokenizer",
        _chmod("tokenizer.json", 0),
        "model_unreadable",
        ("permission",),
        unprivileged=True,
    ),
    Kind(
        "no_chat_template",
        _no_chat_template,
        "model_incomplete",
        ("chat template",),
        issue="loads, then every request fails",
    ),
    Kind("chat_template_syntax_error", _bad_chat_template, "model_damaged", ("does not parse",)),
    Kind("tokenizer_config_is_list", _tokenizer_config_list, "model_damaged", ("a list",)),
)


def build_corpus(good: Path, root: Path, kinds: tuple[Kind, ...] = KINDS) -> dict[str, Path]:
    """One damaged copy of `good` per kind under `root` (world-readable, so an unprivileged user can run
    it)."""
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    made = {}
    for kind in kinds:
        entry = root / kind.name
        entry.mkdir()
        for name in FILES:
            if (good / name).is_file():
                shutil.copyfile(good / name, entry / name)
        kind.make(entry)
        made[kind.name] = entry / kind.target if kind.target else entry
    good_copy = root / GOOD
    good_copy.mkdir()
    for name in FILES:
        if (good / name).is_file():
            shutil.copyfile(good / name, good_copy / name)
    return made


GOOD = "_good"  # an undamaged copy: it must pass, and warms the stage's imports up before anything is timed


# ------------------------------------------------------------------------------------------------------------
# the runner (a subprocess per stage, under a memory cap)


def _limit_memory(mb: int) -> None:
    cap = mb * 1024**2
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _peak_rss() -> int:
    """This process's own high-water mark (VmHWM; ru_maxrss would include the parent's from before exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _stage(stage: str) -> Callable[[Path], str | tuple[str, str]]:
    """A function that checks one folder and returns (kind, message) of its refusal, or "passed"."""
    if stage == "check":
        from app.ui.model_dialog import inspect_folder

        def check(path: Path) -> str | tuple[str, str]:
            result = inspect_folder(str(path), "cpu")
            return (result.problem_kind, "\n".join(result.problems)) if result.problems else "passed"

        return check
    from engine.api import EngineError

    if stage == "validate":
        from engine.weights.validate import validate_folder

        def run(path: Path) -> str | tuple[str, str]:
            try:
                validate_folder(path)
            except EngineError as exc:
                return exc.kind, exc.message
            return "passed"

        return run
    if stage == "loader":
        import torch  # noqa: F401 - imported before the cap matters, like the app's engine thread

        from engine.weights.loader import load_model

        def load(path: Path) -> str | tuple[str, str]:
            try:
                load_model(path, device="cpu", quantization="none")
            except EngineError as exc:
                return exc.kind, exc.message
            return "passed"

        return load
    raise SystemExit(f"unknown stage {stage}")


def main(argv: list[str]) -> int:
    stage, corpus, mb = argv[0], Path(argv[1]), int(argv[2])
    names = argv[3:] or [kind.name for kind in KINDS]
    func = _stage(stage)
    _limit_memory(mb)
    if (corpus / GOOD).is_dir():
        start = time.perf_counter()
        outcome = func(corpus / GOOD)
        print(
            json.dumps(
                {
                    "name": GOOD,
                    "kind": outcome if isinstance(outcome, str) else outcome[0],
                    "message": "" if isinstance(outcome, str) else outcome[1],
                    "seconds": time.perf_counter() - start,
                    "peak_rss": _peak_rss(),
                }
            ),
            flush=True,
        )
    for name in names:
        start = time.perf_counter()
        try:
            outcome = func(corpus / name)
        except MemoryError:
            outcome = ("MemoryError", "")
        except Exception as exc:  # noqa: BLE001 - the test reports it as a failure of that kind
            outcome = ("exception", f"{type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - start
        kind, message = outcome if isinstance(outcome, tuple) else ("passed", "")
        print(
            json.dumps(
                {"name": name, "kind": kind, "message": message, "seconds": seconds, "peak_rss": _peak_rss()}
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
