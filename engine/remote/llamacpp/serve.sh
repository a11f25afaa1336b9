#!/usr/bin/env bash
# Serve a GGUF with llama.cpp (llama-cpp-python's OpenAI-compatible server) on 127.0.0.1, for the text tier's
# real-server tests, recordings and judge. Lives at most --lifetime seconds (default 1800); `stop` ends it.
#   bash engine/remote/llamacpp/serve.sh start --model GGUF --alias NAME [--port 8766] [--api-key KEY]
#        [--ctx 2048] [--logits-all] [--lifetime S]
#   bash engine/remote/llamacpp/serve.sh stop [--port 8766]
# Waits until /v1/models answers (a few seconds), then prints the base URL (with /v1).
set -euo pipefail
# shellcheck source=../serve_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../serve_common.sh"
CACHE="${LETTERPRESS_CACHE:-$HOME/.cache/letterpress}"
VENV="${LETTERPRESS_LLAMACPP_VENV:-$CACHE/llamacpp-venv}"
ACTION="${1:-start}"; shift || true
PORT=8766; KEY=""; MODEL=""; ALIAS=""; CTX=2048; LIFETIME=1800; LOGITS=false
while [ $# -gt 0 ]; do
  case "$1" in
    --port) PORT="$2"; shift 2;;
    --api-key) KEY="$2"; shift 2;;
    --model) MODEL="$2"; shift 2;;
    --alias) ALIAS="$2"; shift 2;;
    --ctx) CTX="$2"; shift 2;;
    --logits-all) LOGITS=true; shift;;
    --lifetime) LIFETIME="$2"; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
STATE="${TMPDIR:-/tmp}/letterpress-llamacpp-$PORT"
mkdir -p "$STATE"
if [ "$ACTION" = "stop" ]; then serve_stop "$STATE" 10; exit 0; fi
ARGS=(--model "$MODEL" --model_alias "${ALIAS:-$(basename "$MODEL" .gguf)}" --host 127.0.0.1 --port "$PORT"
      --n_ctx "$CTX" --n_threads "$(nproc)" --logits_all "$LOGITS")
[ -n "$KEY" ] && ARGS+=(--api_key "$KEY")
setsid timeout --signal=TERM --kill-after=10 "$LIFETIME" nice -n 10 \
  "$VENV/bin/python" -m llama_cpp.server "${ARGS[@]}" > "$STATE/server.log" 2>&1 &
echo $! > "$STATE/pid"
URL="http://127.0.0.1:$PORT/v1"
AUTH=(); [ -n "$KEY" ] && AUTH=(-H "Authorization: Bearer $KEY")
if serve_wait "$STATE" "$URL/models" 240 0.5 "${AUTH[@]}"; then echo "$URL"; exit 0; elif [ $? -eq 1 ]; then exit 1; fi
echo "no /v1/models after 120 s; see $STATE/server.log" >&2
bash "$0" stop --port "$PORT"; exit 1
