"""Fused GPU kernels (Triton), each proven on the CPU under Triton's interpreter."""
