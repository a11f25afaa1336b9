"""The teacher on llama.cpp: the Q4_1 GGUF as it ships, batched decoding of many sequences, seeded sampling.

Needs llama-cpp-python's ctypes bindings and a built `libllama.so` (no binary wheel serves this platform:
build it with `python -m engine.training.build_llamacpp`, which compiles the llama.cpp that the
llama-cpp-python sdist vendors). Tokenisation and the chat template come from the GGUF through `transformers`,
so prompts are the same token ids as the `hf` backend's; sampling (temperature, top-p, repetition penalty) is
done here in numpy with a generator seeded per batch, so a batch is reproducible for a fixed thread count.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

from engine.training.decoding import Sampling

DEFAULT_SRC = Path(os.environ.get("LETTERPRESS_LLAMACPP_SRC", "/work/venvs/lcpp-src"))


def _bindings(src: Path) -> Any:
    """llama_cpp.llama_cpp without the package's __init__ (which pulls in the high-level API's
    dependencies)."""
    lib_dir = Path(os.environ.get("LLAMA_CPP_LIB_PATH", src / "vendor/llama.cpp/build/bin"))
    os.environ["LLAMA_CPP_LIB_PATH"] = str(lib_dir)
    if "llama_cpp.llama_cpp" in sys.modules:
        return sys.modules["llama_cpp.llama_cpp"]
    package = types.ModuleType("llama_cpp")
    package.__path__ = [str(src / "llama_cpp")]
    sys.modules["llama_cpp"] = package
    spec = importlib.util.spec_from_file_location("llama_cpp.llama_cpp", src / "llama_cpp" / "llama_cpp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["llama_cpp.llama_cpp"] = module
    spec.loader.exec_module(module)
    return module


def sample_next(logits: np.ndarray, history: list[int], sampling: Sampling, rng: np.random.Generator) -> int:
    """One token from float logits: repetition penalty (CTRL style), temperature, nucleus, seeded draw."""
    logits = logits.astype(np.float64, copy=True)
    if sampling.repetition_penalty != 1.0 and history:
        seen = np.unique(np.asarray(history))
        vals = logits[seen]
        logits[seen] = np.where(
            vals > 0, vals / sampling.repetition_penalty, vals * sampling.repetition_penalty
        )
    if sampling.temperature <= 0:
        return int(np.argmax(logits))
    logits /= sampling.temperature
    top = np.argpartition(-logits, 256)[:256]  # the nucleus always lies in the top 256 for this model
    vals = logits[top]
    order = np.argsort(-vals, kind="stable")
    top, vals = top[order], vals[order]
    probs = np.exp(vals - vals[0])
    probs /= probs.sum()
    keep = int(np.searchsorted(np.cumsum(probs), sampling.top_p) + 1)
    probs = probs[:keep] / probs[:keep].sum()
    return int(top[int(rng.choice(keep, p=probs))])


class LlamaCppTeacher:
    backend = "llamacpp"

    def __init__(
        self, path: Path, threads: int | None = None, src: Path = DEFAULT_SRC, max_batch: int = 32
    ) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        self.eos = {self.tokenizer.eos_token_id, self.tokenizer.convert_tokens_to_ids("<|im_end|>")}
        self.ll = ll = _bindings(src)
        threads = threads or int(os.environ.get("LETTERPRESS_TEACHER_THREADS", "1"))
        noop = ll.llama_log_callback(lambda level, text, data: None)
        self._keep_log = noop
        ll.llama_log_set(noop, ctypes.c_void_p())
        ll.llama_backend_init()
        mparams = ll.llama_model_default_params()
        self.model = ll.llama_model_load_from_file(str(path).encode(), mparams)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.vocab = ll.llama_model_get_vocab(self.model)
        self.n_vocab = ll.llama_vocab_n_tokens(self.vocab)
        self.max_batch = max_batch
        self.per_seq = 512
        cparams = ll.llama_context_default_params()
        cparams.n_ctx = self.per_seq * max_batch
        cparams.n_batch = 2048
        cparams.n_ubatch = 512
        cparams.n_seq_max = max_batch
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        if hasattr(cparams, "kv_unified"):
            cparams.kv_unified = False  # one KV stream per sequence: attention never scans the others' cells
        self.ctx = ll.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context")
        self.batch = ll.llama_batch_init(2048, 0, max_batch)

    def _chat_ids(self, message: str) -> list[int]:
        ids: Any = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], tokenize=True, add_generation_prompt=True
        )
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)

    def _clear(self) -> None:
        ll = self.ll
        if hasattr(ll, "llama_get_memory"):
            ll.llama_memory_clear(ll.llama_get_memory(self.ctx), True)
        else:
            ll.llama_kv_self_clear(self.ctx)

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> dict[int, np.ndarray]:
        """Decode (token, pos, seq, want_logits) entries in batches of 2048; logits of the wanted ones by
        seq."""
        ll, out = self.ll, {}
        for start in range(0, len(entries), 2048):
            part = entries[start : start + 2048]
            b = self.batch
            b.n_tokens = len(part)
            for i, (tok, pos, seq, want) in enumerate(part):
                b.token[i] = tok
                b.pos[i] = pos
                b.n_seq_id[i] = 1
                b.seq_id[i][0] = seq
                b.logits[i] = 1 if want else 0
            if ll.llama_decode(self.ctx, b) != 0:
                raise RuntimeError("llama_decode failed (context full?)")
            for i, (_tok, _pos, seq, want) in enumerate(part):
                if want:
                    ptr = ll.llama_get_logits_ith(self.ctx, i)
                    out[seq] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
        return out

    def generate(self, messages: list[str], sampling: Sampling, seed: int) -> list[str]:
        if len(messages) > self.max_batch:
            raise ValueError(f"at most {self.max_batch} messages a batch")
        self._clear()
        rng = np.random.default_rng(seed)
        prompts = [self._chat_ids(m) for m in messages]
        entries = [(t, p, s, p == len(ids) - 1) for s, ids in enumerate(prompts) for p, t in enumerate(ids)]
        logits = self._decode(entries)
        answers: list[list[int]] = [[] for _ in messages]
        live = list(range(len(messages)))
        for _step in range(sampling.max_new_tokens):
            step_entries = []
            for s in live:
                tok = sample_next(logits[s], prompts[s] + answers[s], sampling, rng)
                if tok in self.eos:
                    continue
                answers[s].append(tok)
                if len(prompts[s]) + len(answers[s]) < self.per_seq:
                    step_entries.append((tok, len(prompts[s]) + len(answers[s]) - 1, s, True))
            live = [e[2] for e in step_entries]
            if not live:
                break
            logits = self._decode(step_entries)
        return [str(self.tokenizer.decode(a, skip_special_tokens=True)).strip() for a in answers]

    def score(self, pairs: list[tuple[str, str]]) -> list[tuple[float, int]]:
        results = []
        ll, b = self.ll, self.batch
        for context, text in pairs:
            ctx = self.tokenizer(context)["input_ids"] if context else []
            ids = (ctx + self.tokenizer(text)["input_ids"])[: self.per_seq]
            start = max(1, len(ctx))
            if len(ids) <= start:
                results.append((0.0, 0))
                continue
            self._clear()
            b.n_tokens = len(ids)
            for i, tok in enumerate(ids):
                b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, i, 1, 1
                b.seq_id[i][0] = 0
            if ll.llama_decode(self.ctx, b) != 0:
                raise RuntimeError("llama_decode failed")
            nll = 0.0
            for i in range(start - 1, len(ids) - 1):
                row = np.ctypeslib.as_array(ll.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,))
                row = row.astype(np.float64)
                m = row.max()
                nll += float(m + np.log(np.exp(row - m).sum()) - row[ids[i + 1]])
            results.append((nll, len(ids) - start))
        return results
