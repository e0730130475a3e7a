"""PyTorch SDPA bf16 causal at the shapes of bench_attention's cuda_bf16 rows: B8 NH12 hs64 and
B8 NH6 hs128 (the same FLOPs), T = 1024, 2048, 4096; the forward alone and forward + backward.
One JSON line each (the anchor sdpa_bench.py measures hs 64 fwd + bwd only).
`--one T hs`: a few fwd + bwd steps of one shape and nothing printed (for Nsight Compute)."""
import json
import sys

import torch
import torch.nn.functional as F


def tensors(B, NH, T, hs, grad):
    q, k, v = (torch.randn(B, NH, T, hs, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
               for _ in range(3))
    return q, k, v, torch.ones(B, NH, T, hs, device="cuda", dtype=torch.bfloat16)


def bench(B, NH, T, hs, backward, iters=20):
    q, k, v, g = tensors(B, NH, T, hs, backward)

    def step():
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if backward:
            y.backward(g)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        step()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / iters


if len(sys.argv) == 4 and sys.argv[1] == "--one":
    T, hs = int(sys.argv[2]), int(sys.argv[3])
    q, k, v, g = tensors(8, 768 // hs, T, hs, True)
    for _ in range(4):
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
    torch.cuda.synchronize()
    sys.exit(0)

for hs, NH in ((64, 12), (128, 6)):
    for T in (1024, 2048, 4096):
        with torch.no_grad():
            fwd = bench(8, NH, T, hs, False)
        print(json.dumps({"sdpa_bf16": f"B8_NH{NH}_T{T}_hs{hs}", "fwd_ms": round(fwd, 3),
                          "fwd_bwd_ms": round(bench(8, NH, T, hs, True), 3)}), flush=True)
