#!/usr/bin/env python3
"""PyTorch side of the GPT-2 124M check on a GPU (test Ch09_GPT2Cuda.Gpt2_124MMatchesPyTorch).

Draws GPT-2 124M weights (L=12, C=768, NH=12, V=50257, Vp=50304, maxT=1024; seeded, the same
recipe as the tiny model of generate_gpt2.py), runs one forward/backward on B=8, T=1024 random
tokens on CUDA with TF32 off, and writes into --out:

    gpt2_124m.bin            weights in llm.c's format (the C++ test loads them)
    idx.npy, targets.npy     int64 [8, 1024]
    logits_every128.npy      logits[:, ::128, :]  (the whole tensor is 1.6 GB)
    loss.npy                 0-d mean cross-entropy
    grad_<name>.npy          gradients of a few parameters (names as in the C++ model)
    *_tf32.npy               the same logits, loss and gradients with TF32 matmuls and SDPA
                             (chapter 10's fast path is compared with these: test
                             Ch10_FastGpt2Cuda.Gpt2_124MFastPathMatchesPyTorch)

Needs PyTorch with CUDA (the GPU machine's); nothing is committed from it. Usage:

    python3 reference_data/ch09/check_gpt2_124m.py --out /tmp/gpt2_124m_ref
    TT_GPT2_124M_REF=/tmp/gpt2_124m_ref ctest --test-dir build -R Gpt2_124M --verbose
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_gpt2 as g2  # noqa: E402  (the reference GPT-2 of chapter 09)

GPT2_124M = g2.Config(L=12, C=768, NH=12, V=50257, MAXT=1024, Vp=50304)
B, T = 8, 1024
GRADS = ["wte.weight", "wpe.weight", "h.0.attn.c_attn.weight", "h.5.mlp.c_fc.weight",
         "h.11.mlp.c_proj.weight", "h.11.ln_2.weight", "ln_f.weight", "ln_f.bias"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for the files (created)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("check_gpt2_124m.py: PyTorch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    cfg = GPT2_124M

    def save(name, t):
        # np.array, not np.ascontiguousarray: the latter turns the 0-d loss into shape [1].
        np.save(os.path.join(args.out, name + ".npy"), np.array(t.detach().cpu(), order="C"))

    params = g2.init_params(cfg, seed=g2.SEED, device="cuda")
    g2.write_llmc(os.path.join(args.out, "gpt2_124m.bin"), params, cfg)
    gen = torch.Generator().manual_seed(g2.SEED + 1)
    data = torch.randint(0, cfg.V, (B, T + 1), generator=gen)
    idx, targets = data[:, :T].contiguous(), data[:, 1:].contiguous()
    save("idx", idx)
    save("targets", targets)
    idx, targets = idx.cuda(), targets.cuda()
    logits = g2.forward(params, idx, cfg)
    loss = F.cross_entropy(logits.view(-1, cfg.V), targets.view(-1))
    loss.backward()
    save("logits_every128", logits[:, ::128, :])
    save("loss", loss)
    for name in GRADS:
        save("grad_" + name, params[name].grad)
    exact_loss = loss.item()

    # The same step with TF32 matmuls and PyTorch's fused attention (SDPA), as its fast eager path.
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    for p in params.values():
        p.grad = None
    logits = g2.forward(params, idx, cfg, sdpa=True)
    loss = F.cross_entropy(logits.view(-1, cfg.V), targets.view(-1))
    loss.backward()
    save("logits_every128_tf32", logits[:, ::128, :])
    save("loss_tf32", loss)
    for name in GRADS:
        save("grad_" + name + "_tf32", params[name].grad)
    print(f"check_gpt2_124m: loss {exact_loss:.6f} (fp32), {loss.item():.6f} (TF32 + SDPA); "
          f"files in {args.out}")


if __name__ == "__main__":
    main()
