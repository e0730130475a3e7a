#!/usr/bin/env python3
"""PyTorch torch.distributed.pipelining anchor for chapter 14 (train_gpt2 --pp on GPUs).

Start it with torchrun, one process (pipeline stage) per GPU:

    torchrun --standalone --nproc_per_node P benchmarks/torch_pipeline_bench.py \
        --schedule 1f1b|gpipe --L 36 --NH 20 --C 1280 --B 8 --T 1024 --micro-batches 8

A GPT-2 of the given shape (pre-norm blocks, tanh GELU, SDPA causal attention, tied token
embedding as the head) is cut into P stages the way chapter 14 cuts it: contiguous blocks whose
largest training cost is as small as possible, the embedding on the first stage, ln_f and the
head (6 C V FLOPs per token) on the last. Each stage runs under bf16 autocast (float32
parameters and residual stream, bf16 GEMMs and attention), the loss in float32. Every step cuts
the batch of B rows into the micro-batches and runs torch.distributed.pipelining's ScheduleGPipe
(all forward, all backward: chapter 14's afab) or Schedule1F1B, then sums the tied embedding's
two gradients (first and last stage, as chapter 14 does) and takes a fused AdamW step. Rank 0
prints one JSON line: ms per step (mean after warm-up), tokens/s, MFU against --peak-tflops
per GPU (H100 SXM dense bf16: 989), the largest peak of allocated memory over the GPUs and each
GPU's, and the loss of the last micro-batches.
"""
import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe


class Block(nn.Module):
    def __init__(self, C, nh):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.nh = nh

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Stage(nn.Module):
    """Blocks [begin, end) of the model, with the embedding (first) and ln_f + head (last)."""

    def __init__(self, a, begin, end, first, last):
        super().__init__()
        self.first, self.last = first, last
        self.wte = nn.Embedding(a.Vp, a.C) if first or last else None
        self.wpe = nn.Embedding(a.T, a.C) if first else None
        self.blocks = nn.ModuleList(Block(a.C, a.NH) for _ in range(begin, end))
        self.lnf = nn.LayerNorm(a.C) if last else None
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            if self.first:
                x = self.wte(x) + self.wpe(torch.arange(x.size(1), device=x.device))
            for b in self.blocks:
                x = b(x)
            if self.last:
                return self.lnf(x) @ self.wte.weight.t()  # bf16 logits; the loss in float32
            return x.float()  # the residual stream crosses the stages in float32


def partition(costs, parts):
    """Boundaries of `parts` contiguous runs of `costs` with the smallest largest sum."""
    n = len(costs)
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    best = {(0, n): 0.0}  # (parts left, start) -> smallest largest part of costs[start:]
    for k in range(1, parts + 1):
        for i in range(n - k, -1, -1):
            best[(k, i)] = min(max(prefix[j] - prefix[i], best.get((k - 1, j), math.inf))
                               for j in range(i + 1, n - k + 2))
    bounds, i = [0], 0
    for k in range(parts, 0, -1):
        j = next(j for j in range(i + 1, n - k + 2)
                 if max(prefix[j] - prefix[i], best.get((k - 1, j), math.inf)) == best[(k, i)])
        bounds.append(j)
        i = j
    return bounds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--schedule", choices=("gpipe", "1f1b"), default="1f1b")
    ap.add_argument("--L", type=int, default=36)
    ap.add_argument("--NH", type=int, default=20)
    ap.add_argument("--C", type=int, default=1280)
    ap.add_argument("--V", type=int, default=50257)
    ap.add_argument("--B", type=int, default=8, help="rows per step (all micro-batches)")
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--micro-batches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    a = ap.parse_args()
    a.Vp = (a.V + 63) // 64 * 64
    m = a.micro_batches
    assert a.B % m == 0, "--micro-batches must divide --B"

    dist.init_process_group("nccl")
    rank, p = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    torch.manual_seed(1337 + rank)

    # Chapter 14's costs: 6 FLOPs per weight of a block and its attention, the head on the last.
    block = 6.0 * (12 * a.C * a.C + 13 * a.C) + 12.0 * a.C * a.T
    costs = [block] * a.L
    costs[-1] += 6.0 * a.C * a.V
    b = partition(costs, p)
    mod = Stage(a, b[rank], b[rank + 1], rank == 0, rank == p - 1).to(dev)
    rows = a.B // m
    example = (torch.zeros(rows, a.T, dtype=torch.long, device=dev) if rank == 0
               else torch.zeros(rows, a.T, a.C, device=dev))
    stage = PipelineStage(mod, rank, p, dev, input_args=(example,))

    def loss_fn(logits, y):
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))

    schedule = (ScheduleGPipe if a.schedule == "gpipe" else Schedule1F1B)(stage, m,
                                                                          loss_fn=loss_fn)
    opt = torch.optim.AdamW(mod.parameters(), lr=1e-4, fused=True)
    tied = dist.new_group([0, p - 1]) if p > 1 else None
    gen = torch.Generator(device=dev).manual_seed(42)
    x = torch.randint(0, a.V, (a.B, a.T), device=dev, generator=gen)
    y = torch.randint(0, a.V, (a.B, a.T), device=dev, generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        losses = []
        if rank == 0:
            schedule.step(x)
        elif rank == p - 1:
            schedule.step(target=y, losses=losses)
        else:
            schedule.step()
        if tied is not None and rank in (0, p - 1):
            dist.all_reduce(mod.wte.weight.grad, group=tied)
        opt.step()
        return sum(l.item() for l in losses) / m if losses else 0.0

    # Each step timed alone between barriers (the pipeline ends each step in sync anyway).
    times, loss = [], 0.0
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - start)
    dt = sum(times) / len(times)
    peaks = [torch.zeros(1, device=dev) for _ in range(p)]
    dist.all_gather(peaks, torch.tensor([torch.cuda.max_memory_allocated() / 2**30], device=dev))
    last_loss = torch.tensor([loss], device=dev)
    dist.broadcast(last_loss, p - 1)
    n_params = 12 * a.C * a.C * a.L + 13 * a.C * a.L + (a.Vp + a.T) * a.C + 2 * a.C
    flops_per_token = 6 * n_params + 12 * a.L * a.C * a.T
    tok_s = a.B * a.T / dt
    if rank == 0:
        print(json.dumps(dict(
            system=f"pytorch-pipelining-{a.schedule}-bf16_autocast_sdpa", gpus=p, pp=p,
            micro_batches=m, L=a.L, NH=a.NH, C=a.C, B=a.B, T=a.T, stages=b,
            ms_per_step=round(dt * 1e3, 2), tok_s=round(tok_s),
            mfu=round(flops_per_token * tok_s / (a.peak_tflops * 1e12 * p), 4),
            peak_mem_gib=round(max(t.item() for t in peaks), 2),
            peak_mem_gib_per_gpu=[round(t.item(), 2) for t in peaks],
            loss=round(last_loss.item(), 4), torch=torch.__version__,
            device=torch.cuda.get_device_name(dev))), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
