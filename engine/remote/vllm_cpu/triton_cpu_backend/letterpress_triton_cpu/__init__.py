"""A Triton backend named "cpu" whose only job is to be found: with TRITON_INTERPRET=1 every @triton.jit
kernel runs in Triton's Python interpreter on torch CPU tensors, and nothing is ever compiled. vLLM's model
runner V2 asks Triton for an active driver at start-up; without a backend for the device it refuses to
start."""
