"""Checkpoint validation, loading, NF4 quantization, the quantized cache, safetensors I/O and the fit
estimate.

The only room that touches a device or a dtype. May import `engine.api` and itself; never `engine.tools`,
`engine.training` or Qt. Inside, the order is tensorfile -> quantize -> stream_load -> qcache -> loader (no
cycles).
"""
