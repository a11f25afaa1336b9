# Sourced by engine/remote/*/serve.sh: stopping a server started with setsid, and waiting for it to answer.
# One copy of both, so the llama.cpp and vLLM scripts stop and wait the same way.

# serve_stop STATE GRACE_S: TERM the server's process group, wait up to GRACE_S seconds, then KILL it.
serve_stop() {
  local state="$1" grace="$2" pid
  [ -f "$state/pid" ] || return 0
  pid="$(cat "$state/pid")"
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 "$grace"); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$state/pid"
}

# serve_wait STATE URL TRIES PAUSE_S [curl options...]: poll URL until it answers (0), the server exits during
# start-up (1, its log's tail on stderr) or TRIES polls PAUSE_S apart pass (2).
serve_wait() {
  local state="$1" url="$2" tries="$3" pause="$4"
  shift 4
  for _ in $(seq 1 "$tries"); do
    if curl -sf "$@" "$url" > /dev/null 2>&1; then return 0; fi
    if ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
      echo "the server exited during start-up; its log:" >&2; tail -40 "$state/server.log" >&2; return 1
    fi
    sleep "$pause"
  done
  return 2
}
