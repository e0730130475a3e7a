#!/usr/bin/env python3
"""PyTorch anchor for chapter 15's training step: transformers' LlamaForCausalLM, eager and
torch.compile, in the same process.

    python3 benchmarks/torch_llama_bench.py --L 12 --C 768 --NH 12 --NKV 4 --F 2048 --V 50257 \
        --B 8 --T 1024 --modes eager,compile [--steps 10 --warmup 3] [--profile]
    python3 benchmarks/torch_llama_bench.py --device cpu --L 2 --C 64 --NH 4 --NKV 2 --F 192 \
        --V 512 --B 2 --T 32 --steps 2 --warmup 1        # a dry run without a GPU

The model is the one `train_llama --precision bf16` trains: LlamaForCausalLM built from a
LlamaConfig (random init, nothing downloaded; untied head, no biases, SiLU, RoPE --rope-theta,
RMSNorm --eps, SDPA attention), float32 parameters. A step is what chapter 09's train_step does:
forward and loss, backward, gradient clipping to --clip (global norm), fused AdamW (lr 6e-4,
betas 0.9/0.95, weight decay 0.1 on the matrices and embeddings, none on the norms' weights).
The loss is cross-entropy over all B*T positions against next-token targets given separately
(as tt_prepare_data's batches are: no shift inside the model), in float32.

Modes (--modes, comma-separated; each builds its own model and optimizer from --seed):
  eager    bf16 autocast: the linear layers, the head and SDPA in bfloat16, the float32 masters
           cast per call; the embedding, the residual stream and RMSNorm's statistics in
           float32 (transformers' RMSNorm upcasts), SwiGLU on the bf16 projections; the logits
           upcast to float32 for the loss. Ours (chapter 11's policy for LLaMA) differs only in
           SwiGLU and RoPE, which it computes in float32.
  compile  the same under torch.compile: one compiled function of the model's forward and the
           loss (default mode, not fullgraph); backward through AOTAutograd's compiled graph.
  tf32     no autocast: float32 everywhere, TF32 tensor cores for the matrix products (what
           train_llama --precision tf32 runs).
The batch: uniform random tokens, or with --data the first B*T+1 tokens of tt_prepare_data's
first train shard (text's skewed token counts matter to the embedding's backward).
The first --warmup steps (compilation included) are not timed; each of the next --steps steps is
timed alone (synchronized before and after). One JSON line per mode: ms_per_step (mean),
ms_median, tok_s (from the mean), mfu against --peak-tflops (bf16 modes; --peak-tflops-tf32 for
tf32), peak_mem_mib (torch.cuda.max_memory_allocated over the mode: parameters, gradients, AdamW
state and activations), warmup_s, the last loss.

FLOPs per token follow train_llama (chapter 15's LlamaFamily::parts): 6 N + 6 L T C, N every
parameter (embedding and head included), 6 L T C the attention's scores and values (forward and
backward, the causal half of 12 L T C).
"""
import argparse
import gc
import json
import os
import statistics
import struct
import time

import torch
import torch.nn.functional as F
import transformers
from transformers import LlamaConfig, LlamaForCausalLM


def data_batch(a, dev):
    """x, y [B, T] from the first B*T+1 tokens of the first train shard of tt_prepare_data's
    --data folder (chapter 08's shards: a 1024-byte header of int32, magic 20240520 with uint16
    tokens or 20240801 with uint32, the token count third, then the tokens)."""
    with open(os.path.join(a.data, "manifest.json")) as fh:
        manifest = json.load(fh)
    shard = next(s for s in manifest["shards"] if s["split"] == "train")
    n = a.B * a.T + 1
    with open(os.path.join(a.data, shard["file"]), "rb") as fh:
        head = struct.unpack("<256i", fh.read(1024))
        width = {20240520: 2, 20240801: 4}[head[0]]
        if head[2] < n:
            raise SystemExit(f"{shard['file']}: {head[2]} tokens, fewer than B*T+1 = {n}")
        raw = bytearray(fh.read(n * width))
    tok = torch.frombuffer(raw, dtype=torch.int16 if width == 2 else torch.int32).long()
    tok = tok & 0xFFFF if width == 2 else tok
    if int(tok.max()) >= a.V:
        raise SystemExit(f"{shard['file']}: token {int(tok.max())} >= --V {a.V}")
    return tok[:-1].view(a.B, a.T).to(dev), tok[1:].view(a.B, a.T).to(dev)


def build(a, dev):
    torch.manual_seed(a.seed)
    config = LlamaConfig(vocab_size=a.V, hidden_size=a.C, intermediate_size=a.F,
                         num_hidden_layers=a.L, num_attention_heads=a.NH,
                         num_key_value_heads=a.NKV, max_position_embeddings=a.T,
                         rms_norm_eps=a.eps, rope_theta=a.rope_theta, tie_word_embeddings=False,
                         attention_bias=False, mlp_bias=False, hidden_act="silu",
                         initializer_range=0.02, attn_implementation="sdpa")
    with torch.device(dev):
        model = LlamaForCausalLM(config).float()
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), fused=dev.type == "cuda")
    return model, opt


def run_mode(a, mode, dev, x, y):
    """Times `mode`; returns its JSON record."""
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    model, opt = build(a, dev)
    params = [p for p in model.parameters()]
    bf16 = mode in ("eager", "compile")

    def forward_loss(inp, tgt):
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=inp, use_cache=False).logits
        return F.cross_entropy(logits.float().view(-1, a.V), tgt.view(-1))

    loss_fn = torch.compile(forward_loss) if mode == "compile" else forward_loss

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(x, y)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        return loss.item()  # as train_step: the loss read back every step

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    sync()
    t0 = time.perf_counter()
    loss = 0.0
    for _ in range(a.warmup):
        loss = step()
    sync()
    warmup_s = time.perf_counter() - t0
    times = []
    for _ in range(a.steps):
        sync()
        t = time.perf_counter()
        loss = step()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    if a.profile and dev.type == "cuda":
        profile(step, mode)
    n_params = sum(p.numel() for p in params)
    flops_per_token = 6.0 * n_params + 6.0 * a.L * a.T * a.C
    ms = statistics.mean(times)
    tok_s = a.B * a.T / (ms / 1e3)
    peak = a.peak_tflops if bf16 else a.peak_tflops_tf32
    rec = dict(system=f"pytorch-{mode}", mode=mode,
               precision="bf16 autocast" if bf16 else "tf32", attention="sdpa",
               L=a.L, C=a.C, NH=a.NH, NKV=a.NKV, F=a.F, V=a.V, B=a.B, T=a.T, params=n_params,
               flops_per_token=flops_per_token, steps=a.steps, warmup=a.warmup,
               ms_per_step=round(ms, 3), ms_median=round(statistics.median(times), 3),
               ms_min=round(min(times), 3), ms_max=round(max(times), 3), tok_s=round(tok_s),
               mfu=round(flops_per_token * tok_s / (peak * 1e12), 4) if dev.type == "cuda"
               else None,
               peak_tflops=peak,
               peak_mem_mib=round(torch.cuda.max_memory_allocated(dev) / 2**20)
               if dev.type == "cuda" else None,
               warmup_s=round(warmup_s, 1), loss=round(loss, 4), torch=torch.__version__,
               transformers=transformers.__version__,
               device=torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu")
    del model, opt, params, loss_fn
    if mode == "compile":
        torch._dynamo.reset()  # the compiled graphs hold the model: free it for the next mode
    gc.collect()
    return rec


def profile(step, mode):
    """One more step under torch.profiler: the kernels with the most GPU time, to stderr."""
    import sys
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    events = prof.key_averages()
    for key in ("self_device_time_total", "self_cuda_time_total"):
        try:
            table = events.table(sort_by=key, row_limit=25, max_name_column_width=70)
            break
        except (AttributeError, KeyError, ValueError):
            table = None
    print(f"--- torch.profiler, mode {mode}, one step:\n{table}", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--L", type=int, default=12)
    ap.add_argument("--C", type=int, default=768)
    ap.add_argument("--NH", type=int, default=12)
    ap.add_argument("--NKV", type=int, default=4)
    ap.add_argument("--F", type=int, default=2048, help="intermediate size (train_llama: "
                    "max(32, (8 C / 3 + 16) / 32 * 32) in integers, 2048 at C 768)")
    ap.add_argument("--V", type=int, default=50257, help="vocabulary (tt_prepare_data "
                    "--gpt2-vocab: 50257)")
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0, help="global gradient norm (0: none)")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="H100 SXM dense bf16")
    ap.add_argument("--peak-tflops-tf32", type=float, default=495.0, help="H100 SXM dense tf32")
    ap.add_argument("--data", help="tt_prepare_data's folder: one batch of its first train "
                    "shard, the same batch every step (default: uniform random tokens)")
    ap.add_argument("--profile", action="store_true",
                    help="after timing, one step of each mode under torch.profiler (stderr)")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    for m in modes:
        if m not in ("eager", "compile", "tf32"):
            ap.error(f"unknown mode {m!r} (eager, compile, tf32)")
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # a float32 product left: TF32, as ours
        torch.backends.cudnn.allow_tf32 = True
    if a.data:
        x, y = data_batch(a, dev)
    else:
        gen = torch.Generator(device=dev).manual_seed(a.seed)
        x = torch.randint(0, a.V, (a.B, a.T), device=dev, generator=gen)
        y = torch.randint(0, a.V, (a.B, a.T), device=dev, generator=gen)
    for m in modes:
        print(json.dumps(run_mode(a, m, dev, x, y)), flush=True)


if __name__ == "__main__":
    main()
