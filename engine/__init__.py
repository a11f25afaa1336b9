"""The engine: the public API and the runtime path a request takes (never imports Qt).

api -> plan (prompts, infill, canvas warm starts, budget: one plan per request) -> prefix_cache -> denoise
(named stages; `sampling` the one sampling rule, `lean_step` its chunked feed, `fastpath` on a GPU) ->
display (safe text, spans, distinct alternatives) -> session (executes plans); `threads` is the CPU thread
policy, `fake` the torch-free scripted engine with the same interface, `__main__` the command line,
`declared` what a checkpoint folder declares (its steps, read without torch), `env` the environment switches
(a bad value is named, with the default used). Rooms
beside it: `engine.weights` (validation, loading, quantization, cache, fit), `engine.tools` (benchmarks,
checkpoint builders, inspect report), `engine.training` (the demo model) and `engine.remote` (the same
interface over a DiffusionGemma server, vLLM). The runtime path may import `engine.weights`, never
`engine.tools` or `engine.training`; `engine.remote` imports the API and the prompt builder only (never
torch).
"""
