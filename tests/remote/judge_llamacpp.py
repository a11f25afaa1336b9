"""The project's judge (`engine.training.judge`) on what comes back through Letterpress from a real server:
the same prompts (`engine.training.judge_prompts`), the same figures and targets, with the requests made by
the text tier (`engine.remote`) instead of the local Session.

- drafts: each of the judge's openings continued (64 tokens), through `RemoteEngine.run`;
- Fix grammar: the 30 correct sentences with the "grammar" preset (unchanged = kept, whitespace-trimmed);
- rewrite lengths: the same sentences with the length-neutral presets in turn, 0.5-2x the selection's words;
- teacher perplexity: a *different* model served by a second llama.cpp server with --logits_all (Gemma 3 270M
  beside the SmolLM2 that writes) scores each draft given its opening (`echo` + `logprobs` on
  /v1/completions), beside the same measure of human text (each opening's last sentence given the ones before
  it: the judge's openings are written by people) and of the project's held-out corpus.

    python tests/remote/judge_llamacpp.py WRITER_URL TEACHER_URL [--out JSON] [--markdown MD]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.remote import RemoteEngine, ServerConfig, text_features  # noqa: E402
from engine.remote.client import Timeouts  # noqa: E402
from engine.training import judge  # noqa: E402
from engine.training.evaluate import load_words  # noqa: E402
from engine.training.judge_prompts import CORRECT_SENTENCES, OPENINGS  # noqa: E402
from tests.helpers import llamacpp_scenarios as sc  # noqa: E402
from tests.helpers.vllm_replay import TEST_KEY  # noqa: E402

CORPUS = [ROOT / "engine/training/teacher_corpus/lc-s0", ROOT / "engine/training/teacher_corpus/hf-s0"]


class ProcessTeacher:
    """`score` through tests/remote/teacher_score.py in the llama.cpp virtualenv (a vectorised pass per
    text), for a teacher GGUF on this machine."""

    def __init__(self, gguf: Path, python: str) -> None:
        self.gguf, self.python = gguf, python
        self.model = gguf.stem

    def score(self, pairs: list[tuple[str, str]]) -> list[tuple[float, int]]:
        import subprocess

        done = subprocess.run(
            [self.python, str(Path(__file__).with_name("teacher_score.py")), str(self.gguf)],
            input=json.dumps(pairs),
            capture_output=True,
            text=True,
            check=True,
        )
        return [(float(a), int(b)) for a, b in json.loads(done.stdout.splitlines()[-1])]


class ServerTeacher:
    """`engine.training.teacher`'s `score` over a llama.cpp server started with --logits_all: the summed
    negative log-probability and the count of the continuation's tokens, given the context."""

    def __init__(self, url: str, key: str | None = TEST_KEY) -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=600, trust_env=False)
        self.model = self.http.get("/models").json()["data"][0]["id"]

    def score(self, pairs: list[tuple[str, str]]) -> list[tuple[float, int]]:
        out = []
        for context, continuation in pairs:
            text = context + continuation
            body = {"model": self.model, "prompt": text, "max_tokens": 1, "echo": True, "logprobs": 1}
            lp = self.http.post("/completions", json=body).json()["choices"][0]["logprobs"]
            nll, n = 0.0, 0
            for offset, value in zip(lp["text_offset"], lp["token_logprobs"], strict=False):
                if len(context) <= offset < len(text) and value is not None:
                    nll -= float(value)
                    n += 1
            out.append((nll, n))
        return out


def run_server(engine: RemoteEngine, drafts: int, sentences: int) -> dict[str, Any]:
    """`judge.run_model`'s record, from the server through Letterpress (text tier: no seeds, no strength)."""
    return judge.run_engine(engine, f"{sc.MODEL} on llama.cpp", drafts, sentences, canvas_control=False)


def human_pairs() -> list[tuple[str, str]]:
    """(all but the last sentence, the last sentence) of each opening: text people wrote."""
    pairs = []
    for opening in OPENINGS:
        parts = re.split(r"(?<=[.!?])\s+", opening.strip())
        if len(parts) >= 2:
            pairs.append((" ".join(parts[:-1]), " " + parts[-1]))
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("writer")
    parser.add_argument(
        "teacher", help="the teacher: a llama.cpp server URL, or a GGUF (see --teacher-python)"
    )
    parser.add_argument("--teacher-python", default="python3", help="a Python with llama_cpp, for a GGUF")
    parser.add_argument("--held-out", type=int, default=10, help="held-out corpus passages for the reference")
    parser.add_argument("--drafts", type=int, default=len(OPENINGS))
    parser.add_argument("--sentences", type=int, default=len(CORRECT_SENTENCES))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    text_features.forget()
    engine = RemoteEngine(
        ServerConfig(args.writer, sc.MODEL, TEST_KEY, Timeouts(read=300), context_length=sc.CONTEXT)
    )
    engine.connect()
    started = time.perf_counter()
    result = run_server(engine, args.drafts, args.sentences)
    engine.unload()
    if args.out:  # the server's answers first: the teacher can be run again on them
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    teacher: Any = (
        ProcessTeacher(Path(args.teacher), args.teacher_python)
        if args.teacher.endswith(".gguf")
        else ServerTeacher(args.teacher)
    )
    human = judge.perplexity(teacher.score(human_pairs()))
    pairs = [(a, " ".join(b.split()[:60])) for a, b in judge.held_out_pairs(CORPUS, args.held_out)]
    corpus = judge.perplexity(teacher.score([(a, " " + b) for a, b in pairs]))
    fig = judge.figures(result, teacher, load_words(), human)
    fig["teacher"] = f"{teacher.model} (llama.cpp, a different model from the writer)"
    fig["teacher_ppl_human_text"] = human
    fig["teacher_ppl_heldout_corpus"] = corpus
    fig["ppl_ratio_vs_corpus"] = round(fig["teacher_ppl_drafts"] / corpus, 2) if corpus else math.nan
    fig["judge_seconds"] = round(time.perf_counter() - started, 1)
    report = {"figures": fig, **result}
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(judge.markdown(report), encoding="utf-8")
    print(json.dumps(fig, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
