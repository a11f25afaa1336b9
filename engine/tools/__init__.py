"""Developer tools: benchmarks and their plot, the tiny and real-shape checkpoint builders, the inspect
report.

Reached through `python -m engine <command>` and tests; the runtime path never imports this room. May import
`engine`, `engine.weights` and itself; never `engine.training` or Qt.
"""
