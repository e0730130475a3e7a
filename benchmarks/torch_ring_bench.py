#!/usr/bin/env python3
"""PyTorch's context parallelism on the shapes of tt_ring_attention_bench (chapter 16, issue 27).

  torchrun --standalone --nproc_per_node 4 benchmarks/torch_ring_bench.py \
      [--seq 16384,32768,65536] [--hs 64,128] [--heads 32] [--reps 3] [--warmup 1]
      [--rotate alltoall]

For each (T, hs), bf16, B = 1, causal attention forward + backward:
  - single: F.scaled_dot_product_attention of the whole sequence on one GPU (every rank alone on
    its own GPU; the mean over the ranks), the flash backend;
  - cp: the same call under torch.distributed.tensor.experimental.context_parallel over all the
    ranks (q, k, v and the output gradient sharded along T with PyTorch's load balancing, K/V
    passed around the ring with --rotate alltoall, or all-gathered with --rotate allgather); the
    slowest rank's time.
One JSON line per shape on rank 0, with the fraction of ideal (single / N / cp), the figure
tt_ring_attention_bench prints for our ring. Times are means over --reps after --warmup, the
device synchronized around them.
"""
import argparse
import json
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.experimental import context_parallel
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(fn, reps, warmup, slowest):
    """Mean ms of fn() over reps after warmup; the max (slowest) or mean over the ranks."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    ms = torch.tensor([(time.perf_counter() - t0) * 1e3 / reps], device="cuda")
    dist.all_reduce(ms, op=dist.ReduceOp.MAX if slowest else dist.ReduceOp.SUM)
    return ms.item() if slowest else ms.item() / dist.get_world_size()


def fwd_bwd(q, k, v, dout):
    """Causal SDPA (the flash backend) of q, k, v and its backward from dout, fresh gradients."""
    for t in (q, k, v):
        t.grad = None
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(dout)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seq", default="16384,32768,65536")
    p.add_argument("--hs", default="64,128")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--rotate", default="alltoall", choices=["alltoall", "allgather"])
    a = p.parse_args()

    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    mesh = init_device_mesh("cuda", (n,))
    try:
        from torch.distributed.tensor.experimental._attention import set_rotate_method

        set_rotate_method(a.rotate)
        rotate = a.rotate
    except (ImportError, AttributeError, ValueError) as e:  # an API this version lacks
        rotate = f"default ({type(e).__name__})"

    for T in [int(x) for x in a.seq.split(",")]:
        for hs in [int(x) for x in a.hs.split(",")]:
            g = torch.Generator(device="cuda").manual_seed(7)
            shape = (1, a.heads, T, hs)
            q0, k0, v0, d0 = (
                torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g)
                for _ in range(4)
            )

            q, k, v = (t.clone().requires_grad_() for t in (q0, k0, v0))
            single_ms = timed(lambda: fwd_bwd(q, k, v, d0), a.reps, a.warmup, slowest=False)
            del q, k, v

            line = {"T": T, "B": 1, "heads": a.heads, "hs": hs, "dtype": "bfloat16",
                    "cp": n, "rotate": rotate, "single_ms": round(single_ms, 4)}
            try:
                qs, ks, vs, ds = (t.clone() for t in (q0, k0, v0, d0))
                # The buffers are sharded in place on entry (they must not require grad then)
                # and, being in no_restore_buffers, not gathered back on exit (they do then).
                with context_parallel(mesh, buffers=[qs, ks, vs, ds],
                                      buffer_seq_dims=[2, 2, 2, 2],
                                      no_restore_buffers={qs, ks, vs, ds}):
                    for t in (qs, ks, vs):
                        t.requires_grad_()
                    cp_ms = timed(lambda: fwd_bwd(qs, ks, vs, ds), a.reps, a.warmup, slowest=True)
                line["cp_ms"] = round(cp_ms, 4)
                line["cp_of_ideal"] = round(single_ms / n / cp_ms, 4)
            except Exception as e:  # noqa: BLE001 - reported in the line, the next shape runs
                line["cp_error"] = f"{type(e).__name__}: {e}"[:300]
            if rank == 0:
                print(json.dumps(line), flush=True)
            torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
