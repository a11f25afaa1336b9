"""The Triton kernels themselves (imported only when a kernel is first launched; see `engine.kernels`).

Layouts they read are the quantized cache's own (`engine.weights.quantize.NF4Weight`, `Int8Linear`),
unchanged:

* NF4: a matrix (out, in) flattened row-major, blocks of 64 consecutive weights; two codes per byte, the first
  weight in the high nibble; a block's scale is `code2[absmax[b]] * absmax2[b // 256] + offset` (QLoRA's
  double quantization); the weight is `NF4[code] * scale`. Stacks hold `count` such matrices one after
  another.
* int8: `CB` (out, in) int8 and `SCB` (out,) fp32, the weight is `CB * SCB / 127`.

Where the model computes in bf16, every value the reference rounds to bf16 (a dequantized weight, a GEMM
output, the activation) is rounded here too, with `round_bf16` (integer ops, the same ties-to-even on a GPU
and in the interpreter, whose own fp32->bf16 cast truncates), so only the summation order differs from the
reference.
"""

from __future__ import annotations

import triton
import triton.language as tl

MIN_HALF = tl.constexpr(
    -1.7014117331926443e38
)  # torch.finfo(torch.float32).min / 2: the self-conditioning one-hot's "off"


@triton.jit
def round_bf16(x):
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def tanh(x):
    # (1 - e) / (1 + e) with e = exp(-2|x|), and its Taylor series below |x| = 0.3 where 1 - e would cancel:
    # within a few ulps of torch.tanh everywhere (libdevice's tanh does not run in the interpreter)
    a = tl.abs(x)
    e = tl.exp(-2.0 * a)
    big = (1.0 - e) / (1.0 + e)
    y2 = a * a
    small = a * (1.0 + y2 * (-1.0 / 3.0 + y2 * (2.0 / 15.0 + y2 * (-17.0 / 315.0 + y2 * (62.0 / 2835.0)))))
    t = tl.where(a < 0.3, small, big)
    return tl.where(x >= 0, t, -t)


@triton.jit
def activate(x, ACT: tl.constexpr):
    if ACT == 1:  # gelu, tanh approximation (Gemma's "gelu_pytorch_tanh")
        y = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    elif ACT == 2:  # silu
        y = x / (1.0 + tl.exp(-x))
    else:
        y = x
    return y


@triton.jit
def mma(a, w, acc, DOT_BF16: tl.constexpr):
    if DOT_BF16:
        acc = tl.dot(a.to(tl.bfloat16), w.to(tl.bfloat16), acc, out_dtype=tl.float32)
    else:
        acc = tl.dot(a, w, acc, input_precision="ieee", out_dtype=tl.float32)
    return acc


@triton.jit
def nf4_tile(qbase, sbase, s2base, code2_ptr, lut_ptr, off, cols, ks, K, col_ok, k_ok, ROUND: tl.constexpr):
    """W[cols, ks] transposed to a [BLOCK_K, BLOCK_N] tile, dequantized in registers."""
    flat = cols[None, :] * K + ks[:, None]  # int32: one matrix of a stack stays below 2**31 weights
    m = k_ok[:, None] & col_ok[None, :]
    byte = tl.load(qbase + flat // 2, mask=m, other=0).to(tl.int32)
    nib = tl.where(flat % 2 == 0, byte >> 4, byte & 15)
    code = tl.load(lut_ptr + nib)
    blk = flat // 64
    qa = tl.load(sbase + blk, mask=m, other=0).to(tl.int32)
    scale = tl.load(code2_ptr + qa) * tl.load(s2base + blk // 256, mask=m, other=0.0) + off
    w = code * scale
    if ROUND:
        w = round_bf16(w)
    return w


@triton.jit
def nf4_value(nib):
    """The NF4 table held in registers: a four-level select on the code's bits, no memory read."""
    b0 = (nib & 1) != 0
    b1 = (nib & 2) != 0
    b2 = (nib & 4) != 0
    low = tl.where(
        b2,
        tl.where(
            b1,
            tl.where(b0, 0.0, -0.09105003625154495),
            tl.where(b0, -0.18477343022823334, -0.28444138169288635),
        ),
        tl.where(
            b1,
            tl.where(b0, -0.39491748809814453, -0.5250730514526367),
            tl.where(b0, -0.6961928009986877, -1.0),
        ),
    )
    high = tl.where(
        b2,
        tl.where(
            b1, tl.where(b0, 1.0, 0.7229568362236023), tl.where(b0, 0.5626170039176941, 0.44070982933044434)
        ),
        tl.where(
            b1,
            tl.where(b0, 0.33791524171829224, 0.24611230194568634),
            tl.where(b0, 0.16093020141124725, 0.07958029955625534),
        ),
    )
    return tl.where((nib & 8) != 0, high, low)


@triton.jit
def nf4_scales(sbase, s2base, code2_ptr, off, cols, c0, KB, col_ok, CHUNK: tl.constexpr):
    """The fp32 scales of blocks c0 .. c0 + CHUNK of rows `cols`, [BLOCK_N, CHUNK] (a row holds KB whole
    blocks of 64): read once per chunk of the K loop, outside its inner loop."""
    bi = c0 + tl.arange(0, CHUNK)
    blk = cols[:, None] * KB + bi[None, :]
    m = col_ok[:, None] & (bi < KB)[None, :]
    qa = tl.load(sbase + blk, mask=m, other=0).to(tl.int32)
    return tl.load(code2_ptr + qa) * tl.load(s2base + blk // 256, mask=m, other=0.0) + off


@triton.jit
def nf4_block_tile(qbase, row_bytes, cols, kblk, scale, col_ok, ROUND: tl.constexpr, BLOCK_N: tl.constexpr):
    """W[cols, 64 kblk : 64 kblk + 64] transposed to a [64, BLOCK_N] tile. A row's 32 code bytes of a block
    are contiguous and 16-byte aligned (rows of whole blocks), so they are read as 128-bit vectors and
    unpacked in registers; `scale` ([BLOCK_N, 1]) is the block's."""
    kq = kblk * 32 + tl.arange(0, 32)
    offs = tl.max_contiguous(tl.multiple_of(cols[:, None] * row_bytes + kq[None, :], [32, 32]), [1, 32])
    byte = tl.load(qbase + offs, mask=col_ok[:, None], other=0).to(tl.int32)
    nib = tl.reshape(tl.join(byte >> 4, byte & 15), (BLOCK_N, 64))  # the first weight in the high nibble
    w = nf4_value(nib) * scale
    if ROUND:
        w = round_bf16(w)
    return tl.trans(w)


@triton.jit
def nf4_gemm_kernel(
    a_ptr,
    stride_am,
    sorted_ptr,
    block_expert_ptr,
    route_ptr,
    out_ptr,
    stride_om,
    qweight_ptr,
    absmax_ptr,
    absmax2_ptr,
    offset_ptr,
    code2_ptr,
    lut_ptr,
    q_stride,
    s_stride,
    s2_stride,
    N,
    K,
    num_experts,
    A_DIV: tl.constexpr,
    GATED: tl.constexpr,
    ACT: tl.constexpr,
    HAS_ROUTE: tl.constexpr,
    ROUND: tl.constexpr,
    DOT_BF16: tl.constexpr,
    BLOCKS: tl.constexpr,
    CHUNK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """out[sid] = act(A[sid // A_DIV] @ W_e[:N].T) * (A @ W_e[N:2N].T) (GATED) or A[sid // A_DIV] @ W_e.T,
    times the routing weight of `sid` (HAS_ROUTE), for the padded, expert-sorted assignment ids of one M
    block."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e = tl.load(block_expert_ptr + pid_m)
    if e >= num_experts:
        return
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    sid = tl.load(sorted_ptr + rows)
    valid = sid >= 0
    safe = tl.where(valid, sid, 0).to(tl.int64)
    arow = safe // A_DIV
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    e64 = e.to(tl.int64)
    qbase = qweight_ptr + e64 * q_stride
    sbase = absmax_ptr + e64 * s_stride
    s2base = absmax2_ptr + e64 * s2_stride
    off = tl.load(offset_ptr + e64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if BLOCKS:
        # rows of whole blocks (K % 64 == 0, the model's shapes): one block of 64 weights per K step, its
        # codes read as 128-bit vectors, its scales decoded once per CHUNK blocks ahead of the inner loop
        kb_row = K // 64
        row_bytes = kb_row * 32
        am = tl.multiple_of(stride_am, 8)
        qbase = qweight_ptr + tl.multiple_of(e64 * q_stride, 32)  # a stack entry: N * K / 2 bytes
        for c0 in range(0, kb_row, CHUNK):
            s_gate = nf4_scales(sbase, s2base, code2_ptr, off, cols, c0, kb_row, col_ok, CHUNK)
            if GATED:
                s_up = nf4_scales(sbase, s2base, code2_ptr, off, cols + N, c0, kb_row, col_ok, CHUNK)
            for j in range(0, tl.minimum(kb_row - c0, CHUNK)):
                kblk = c0 + j
                ks = tl.max_contiguous(tl.multiple_of(kblk * 64 + tl.arange(0, 64), 64), 64)
                a_offs = tl.max_contiguous(tl.multiple_of(arow[:, None] * am + ks[None, :], [8, 64]), [1, 64])
                a = tl.load(a_ptr + a_offs, mask=valid[:, None], other=0.0)
                a = a.to(tl.float32)
                if ROUND:
                    a = round_bf16(a)
                pick = tl.full((BLOCK_N, 1), j, tl.int32)
                w = nf4_block_tile(
                    qbase, row_bytes, cols, kblk, tl.gather(s_gate, pick, 1), col_ok, ROUND, BLOCK_N
                )
                acc = mma(a, w, acc, DOT_BF16)
                if GATED:
                    w_up = nf4_block_tile(
                        qbase, row_bytes, cols + N, kblk, tl.gather(s_up, pick, 1), col_ok, ROUND, BLOCK_N
                    )
                    acc_up = mma(a, w_up, acc_up, DOT_BF16)
    else:
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            k_ok = ks < K
            a = tl.load(
                a_ptr + arow[:, None] * stride_am + ks[None, :],
                mask=valid[:, None] & k_ok[None, :],
                other=0.0,
            )
            a = a.to(tl.float32)
            if ROUND:
                a = round_bf16(a)
            w = nf4_tile(qbase, sbase, s2base, code2_ptr, lut_ptr, off, cols, ks, K, col_ok, k_ok, ROUND)
            acc = mma(a, w, acc, DOT_BF16)
            if GATED:
                w_up = nf4_tile(
                    qbase, sbase, s2base, code2_ptr, lut_ptr, off, cols + N, ks, K, col_ok, k_ok, ROUND
                )
                acc_up = mma(a, w_up, acc_up, DOT_BF16)
    if GATED:
        g = acc
        u = acc_up
        if ROUND:
            g = round_bf16(g)
            u = round_bf16(u)
        h = activate(g, ACT)
        if ROUND:
            h = round_bf16(h)
        res = h * u
    else:
        res = acc
    if ROUND:
        res = round_bf16(res)
    if HAS_ROUTE:
        r = tl.load(route_ptr + safe, mask=valid, other=0.0).to(tl.float32)
        res = res * r[:, None]
        if ROUND:
            res = round_bf16(res)
    tl.store(
        out_ptr + safe[:, None] * stride_om + cols[None, :],
        res.to(out_ptr.dtype.element_ty),
        mask=valid[:, None] & col_ok[None, :],
    )


@triton.jit
def int8_gemm_kernel(
    a_ptr,
    stride_am,
    cb_ptr,
    scb_ptr,
    out_ptr,
    stride_om,
    M,
    N,
    K,
    ROUND: tl.constexpr,
    DOT_BF16: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """out = A @ (CB * SCB / 127).T with the int8 codes turned into weights in registers."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    scale = tl.load(scb_ptr + cols, mask=col_ok, other=0.0) / 127.0
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(
            a_ptr + rows[:, None].to(tl.int64) * stride_am + ks[None, :],
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        ).to(tl.float32)
        if ROUND:
            a = round_bf16(a)
        c = tl.load(
            cb_ptr + cols[None, :].to(tl.int64) * K + ks[:, None],
            mask=k_ok[:, None] & col_ok[None, :],
            other=0,
        ).to(tl.float32)
        w = c * scale[None, :]
        if ROUND:
            w = round_bf16(w)
        acc = mma(a, w, acc, DOT_BF16)
    if ROUND:
        acc = round_bf16(acc)
    tl.store(
        out_ptr + rows[:, None].to(tl.int64) * stride_om + cols[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & col_ok[None, :],
    )


@triton.jit
def philox_uniforms_kernel(seed_ptr, out_ptr, V, rows_per_seed, BLOCK_V: tl.constexpr):
    """The uniforms the vocabulary tail draws in-kernel for row `program_id(0)` (so a test can check its
    draws)."""
    row = tl.program_id(0).to(tl.int64)
    seed = tl.load(seed_ptr + row // rows_per_seed)
    for v0 in range(0, V, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        u = tl.rand(seed, ((row % rows_per_seed) * V + cols).to(tl.int32))
        tl.store(out_ptr + row * V + cols, u, mask=cols < V)


@triton.jit
def vocab_tail_kernel(
    x_ptr,
    stride_x,
    temp_ptr,
    q_ptr,
    stride_q,
    seed_ptr,
    fid_ptr,
    sampled_ptr,
    argmax_ptr,
    entropy_ptr,
    conf_ptr,
    sc_ptr,
    stride_sc,
    V,
    rows_per_seed,
    cap,
    SOFTCAP: tl.constexpr,
    USE_Q: tl.constexpr,
    WRITE_SC: tl.constexpr,
    SC_ROUND: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    """One row: pass 1 finds the max, argmax, sum of exponentials and entropy (online, rescaled per tile);
    pass 2 makes the probabilities, the confidence, the one-sample multinomial (argmax of p / q, q ~ Exp(1))
    and the self-conditioning logits (pinned to a one-hot belief at frozen slots), all without a row-sized
    temporary."""
    row = tl.program_id(0).to(tl.int64)
    t = tl.load(temp_ptr).to(tl.float32)
    fid = tl.load(fid_ptr + row)
    offs = tl.arange(0, BLOCK_V)
    m = tl.full((), float("-inf"), tl.float32)
    s = tl.zeros((), tl.float32)
    tt = tl.zeros((), tl.float32)
    best_v = tl.full((), float("-inf"), tl.float32)
    best_i = tl.zeros((), tl.int64)
    for v0 in range(0, V, BLOCK_V):
        cols = v0 + offs
        ok = cols < V
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
        if SOFTCAP:
            x = tanh(x / cap) * cap
        x = tl.where(ok, x / t, float("-inf"))
        bm = tl.max(x, 0)
        bi = tl.argmax(x, 0)
        best_i = tl.where(bm > best_v, v0 + bi.to(tl.int64), best_i)
        best_v = tl.maximum(best_v, bm)
        m2 = tl.maximum(m, bm)
        scale = tl.exp(m - m2)
        corr = s * tl.where(s > 0.0, m - m2, 0.0)
        ex = tl.exp(x - m2)
        d = tl.where(ok, x - m2, 0.0)
        tt = scale * (tt + corr) + tl.sum(ex * d, 0)
        s = scale * s + tl.sum(ex, 0)
        m = m2
    logs = tl.log(s)
    entropy = logs - tt / s
    inv = 1.0 / s
    frozen = fid >= 0
    seed = tl.load(seed_ptr + row // rows_per_seed)
    best_r = tl.full((), -1.0, tl.float32)
    sample = tl.zeros((), tl.int64)
    conf_f = tl.zeros((), tl.float32)
    for v0 in range(0, V, BLOCK_V):
        cols = v0 + offs
        ok = cols < V
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
        if SOFTCAP:
            x = tanh(x / cap) * cap
        x = tl.where(ok, x / t, float("-inf"))
        p = tl.exp(x - m) * inv
        conf_f += tl.sum(tl.where(cols == fid, p, 0.0), 0)
        if USE_Q:
            q = tl.load(q_ptr + row * stride_q + cols, mask=ok, other=1.0)
        else:
            u = tl.rand(seed, ((row % rows_per_seed) * V + cols).to(tl.int32))
            q = -tl.log(1.0 - u)
        r = tl.where(ok, p / q, -1.0)
        rb = tl.max(r, 0)
        ri = tl.argmax(r, 0)
        sample = tl.where(rb > best_r, v0 + ri.to(tl.int64), sample)
        best_r = tl.maximum(best_r, rb)
        if WRITE_SC:
            y = tl.where(frozen, tl.where(cols == fid, 0.0, MIN_HALF), x)
            if SC_ROUND:
                y = round_bf16(y)
            tl.store(sc_ptr + row * stride_sc + cols, y.to(sc_ptr.dtype.element_ty), mask=ok)
    conf = tl.where(frozen, conf_f, tl.exp(best_v - m) * inv)
    tl.store(sampled_ptr + row, sample)
    tl.store(argmax_ptr + row, tl.where(frozen, fid, best_i))
    tl.store(entropy_ptr + row, entropy)
    tl.store(conf_ptr + row, conf)


@triton.jit
def rms_norm_kernel(
    x_ptr, w_ptr, out_ptr, D, eps, HAS_W: tl.constexpr, ROUND: tl.constexpr, BLOCK_D: tl.constexpr
):
    """One row: x * (mean(x^2) + eps)^-1/2 (* weight), in fp32, read and written once."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    ok = cols < D
    x = tl.load(x_ptr + row * D + cols, mask=ok, other=0.0).to(tl.float32)
    mean = tl.sum(x * x, 0) / D + eps
    y = x * (1.0 / tl.sqrt(mean))
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    if ROUND:
        y = round_bf16(y)
    tl.store(out_ptr + row * D + cols, y.to(out_ptr.dtype.element_ty), mask=ok)
