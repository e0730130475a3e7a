"""PyTorch SDPA bf16 causal fwd+bwd at the shapes of bench_attention's cuda_bf16 rows:
B8 NH12 hs64 and B8 NH6 hs128 (the same FLOPs), T = 1024, 2048, 4096. One JSON line each
(the anchor sdpa_bench.py measures hs 64 only)."""
import json
import torch
import torch.nn.functional as F


def bench(B, NH, T, hs, iters=20):
    q, k, v = (torch.randn(B, NH, T, hs, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    g = torch.ones(B, NH, T, hs, device="cuda", dtype=torch.bfloat16)

    def step():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)

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


for hs, NH in ((64, 12), (128, 6)):
    for T in (1024, 2048, 4096):
        print(json.dumps({"sdpa_bf16": f"B8_NH{NH}_T{T}_hs{hs}", "fwd_bwd_ms": round(bench(8, NH, T, hs), 3)}),
              flush=True)
