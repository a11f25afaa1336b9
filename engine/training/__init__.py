"""Training the embedded demo model (not imported by the app or the engine at run time).

`corpus` builds instruction-shaped examples from a public-domain text that a Debian package ships, `objective`
holds the block-diffusion training loss, `train` is the reproducible command line, `evaluate` measures it.
"""
