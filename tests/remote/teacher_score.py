"""Score continuations with a GGUF teacher through llama-cpp-python in this process (run with the llama.cpp
virtualenv's Python): reads [[context, continuation], ...] as JSON on stdin, prints [[nll_sum, tokens], ...].

Why not the server: llama-cpp-python's server computes a log-softmax over the whole vocabulary in Python per
token (Gemma's 262,144 entries), minutes per passage on two cores; here it is one vectorised pass per text.

    python tests/remote/teacher_score.py TEACHER.gguf < pairs.json
"""

from __future__ import annotations

import json
import sys

import numpy as np
from llama_cpp import Llama


def main() -> int:
    llm = Llama(model_path=sys.argv[1], n_ctx=2048, logits_all=True, verbose=False, n_threads=2)
    out = []
    for context, continuation in json.load(sys.stdin):
        head = llm.tokenize(context.encode(), add_bos=True)
        whole = llm.tokenize((context + continuation).encode(), add_bos=True)[:2000]
        llm.reset()
        llm.eval(whole)
        logits = np.asarray(llm.scores[: len(whole)], dtype=np.float64)
        top = logits.max(axis=1, keepdims=True)
        logsm = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
        start = max(1, len(head))
        nll = -sum(float(logsm[i - 1, whole[i]]) for i in range(start, len(whole)))
        out.append([nll, len(whole) - start])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
