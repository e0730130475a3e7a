#!/usr/bin/env python3
"""PyTorch DistributedDataParallel anchor for chapter 12's GPU scaling (tools/scaling_gpu).

Start it with torchrun, one process per GPU:

    torchrun --standalone --nproc_per_node N benchmarks/torch_ddp_bench.py \
        --anchors ../shared/anchors --B 8 --T 1024 --strategy ddp|zero1

It trains the GPT-2 of the PyTorch anchor (gpt2_torch_bench.py's GPT class, imported from
--anchors, so both anchors time the same model) with TF32 matmuls and SDPA attention (the
anchor's "tf32_sdpa" mode; --precision bf16: under bf16 autocast, its "bf16_sdpa"), fused AdamW, B rows of T random tokens per GPU, wrapped in
torch.nn.parallel.DistributedDataParallel (default buckets, gradient_as_bucket_view), or with
torch.distributed.optim.ZeroRedundancyOptimizer over AdamW for "zero1" (ZeRO stage 1: AdamW's
state sharded over the ranks; the gradients are still all-reduced by DDP). Rank 0 prints one
JSON line: ms per step (the slowest rank), tokens/s of all ranks together, and the largest
per-GPU peak of allocated memory.
"""
import argparse
import importlib.util
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def load_anchor(anchors_dir):
    path = os.path.join(anchors_dir, "gpt2_torch_bench.py")
    if not os.path.exists(path):
        sys.exit(f"torch_ddp_bench: {path} does not exist (pass --anchors DIR with the PyTorch "
                 "anchors, e.g. ../shared/anchors)")
    spec = importlib.util.spec_from_file_location("gpt2_torch_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--anchors", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                      "shared", "anchors"))
    ap.add_argument("--B", type=int, default=8, help="rows per GPU")
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--strategy", choices=("ddp", "zero1"), default="ddp")
    ap.add_argument("--precision", choices=("tf32", "bf16"), default="tf32",
                    help="TF32 matmuls, or bf16 autocast (the anchor's tf32_sdpa / bf16_sdpa)")
    ap.add_argument("--config", default="L=12,NH=12,C=768,V=50257,Vp=50304,maxT=1024")
    a = ap.parse_args()
    cfg = {k: int(v) for k, v in (kv.split("=") for kv in a.config.split(","))}
    anchor = load_anchor(a.anchors)

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = anchor.GPT(V=cfg["Vp"], maxT=cfg["maxT"], L=cfg["L"], nh=cfg["NH"],
                       C=cfg["C"]).to(dev)
    ddp = DDP(model, device_ids=[local], gradient_as_bucket_view=True)
    if a.strategy == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW,
                                      lr=3e-4, fused=True)
    else:
        opt = torch.optim.AdamW(ddp.parameters(), lr=3e-4, fused=True)
    gen = torch.Generator(device=dev).manual_seed(1000 + rank)
    x = torch.randint(0, cfg["V"], (a.B, a.T), device=dev, generator=gen)
    y = torch.randint(0, cfg["V"], (a.B, a.T), device=dev, generator=gen)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = ddp(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / a.steps
    stats = torch.tensor([dt, torch.cuda.max_memory_allocated() / 2**30], device=dev)
    dist.all_reduce(stats, op=dist.ReduceOp.MAX)
    if rank == 0:
        dt, peak = stats.tolist()
        print(json.dumps(dict(system=f"pytorch-{a.strategy}-{a.precision}_sdpa", gpus=world, B=a.B,
                              T=a.T, ms_per_step=round(dt * 1e3, 2),
                              tok_s=round(world * a.B * a.T / dt), peak_mem_gib=round(peak, 2),
                              loss=round(loss.item(), 4), torch=torch.__version__,
                              device=torch.cuda.get_device_name(dev))), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
