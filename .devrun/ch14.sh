#!/usr/bin/env bash
# GPU run for the ch14 branch (issue 25, pipeline parallelism): NCCL batched send/recv, the
# executor and GPT-2 pipelines on GPUs, and the bubble measured from CUDA-event timelines.
# Run from the repository root on a 2- or 4-GPU H100 machine; writes at most 8 files to $OUT.
#  1. build chapter 14's tests and tt_pipeline_bench (solution build);
#  2. the ch14 tests under mpirun with 2 and 4 ranks (CPU tests and the CUDA p2p test);
#  3. tt_pipeline_bench on the GPUs: GPT-2 124M shapes (L=12, C=768, B=4, T=1024, fp32) at
#     p = 2 and 4, AFAB and 1F1B with m = 4, 8, 16, interleaved v = 2 with m = 8:
#     bubble measured vs theory vs replay, step time, tok/s, peak memory (one line each in
#     bubble.csv); GPT-2 774M and a 1.3B shape at p = 2, 4 (B = 1); and the timelines of
#     p = 4 1F1B m = 8 (PNGs only when gnuplot is installed);
#  4. PyTorch's torch.distributed.pipelining (ScheduleGPipe, Schedule1F1B) on the same GPT-2 124M
#     shape (m = 8, fp32, naive attention, embedding + head on the end stages), ms/step, tok/s.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
status=0
step() { echo "=== $* ==="; }

step build
{ cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build -j16 --target tt_ch14_tests tt_pipeline_bench; } >"$OUT/build.log" 2>&1 || {
  tail -50 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
tail -3 "$OUT/build.log"

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
mpi="mpirun --oversubscribe --allow-run-as-root"
for np in 2 4; do
  if [ "$gpus" -ge "$np" ]; then
    step "ch14 tests under mpirun -np $np ($gpus GPUs)"
    $mpi -np "$np" -x NCCL_NVLS_ENABLE -x OMP_NUM_THREADS=1 build/bin/tt_ch14_tests \
      >"$OUT/ch14_np$np.log" 2>&1 || status=1
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED" "$OUT/ch14_np$np.log" | sort | uniq -c
  else
    echo "=== mpirun -np $np: skipped, only $gpus GPU(s) ==="
  fi
done

step "bubble measurements (GPT-2 124M shape, fp32, B=4 T=1024 per micro-batch)"
echo "layers,channels,B,ops,schedule,p,m,v,bubble_measured,bubble_theory,bubble_replay,step_ms,tok_s,peak_mib" >"$OUT/bubble.csv"
bench() {  # np schedule m v [extra args]
  local np=$1 sched=$2 m=$3 v=$4; shift 4
  [ "$gpus" -ge "$np" ] || return 0
  $mpi -np "$np" -x NCCL_NVLS_ENABLE build/bin/tt_pipeline_bench --device cuda \
    --schedule "$sched" --micro-batches "$m" --chunks "$v" --batch 4 --seq 1024 \
    --steps 4 --warmup 2 "$@" >>"$OUT/bench.log" 2>&1 || { echo "bench $np $sched $m $v FAILED"; status=1; }
  grep '^csv,' "$OUT/bench.log" | tail -1 | sed 's/^csv,//' >>"$OUT/bubble.csv"
  grep '^pipeline ' "$OUT/bench.log" | tail -1
}
for np in 2 4; do
  for m in 4 8 16; do
    bench "$np" afab "$m" 1
    bench "$np" 1f1b "$m" 1
  done
  bench "$np" interleaved 8 2
  bench "$np" 1f1b 8 1 --ops fast
done
step "larger shapes: GPT-2 774M (L=36 C=1280) and a 1.3B shape (L=24 C=2048), B=1, 1F1B m=8"
for np in 2 4; do
  bench "$np" 1f1b 8 1 --layers 36 --heads 20 --channels 1280 --batch 1 --steps 3 --ops fast
  bench "$np" 1f1b 8 1 --layers 24 --heads 16 --channels 2048 --batch 1 --steps 3 --ops fast
done
step "PyTorch torch.distributed.pipelining, same shapes (GPT-2 124M, fp32 naive attention, B=4 T=1024)"
cat >/tmp/torch_pp_bench.py <<'PY'
# GPT-2 cut into world_size stages (embedding on the first, ln_f + tied head on the last),
# run by torch.distributed.pipelining's ScheduleGPipe (afab) or Schedule1F1B; prints ms/step.
import math, os, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, Schedule1F1B
sched, m = sys.argv[1], int(sys.argv[2])
L, C, NH, V, B, T = 12, 768, 12, 50304, 4, 1024
dist.init_process_group("nccl")
r, p = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", r)))
torch.cuda.set_device(dev)
class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.ln1, s.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        s.qkv, s.proj, s.fc, s.fcp = nn.Linear(C, 3*C), nn.Linear(C, C), nn.Linear(C, 4*C), nn.Linear(4*C, C)
    def forward(s, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, NH, c // NH).transpose(1, 2) for z in s.qkv(s.ln1(x)).split(c, 2))
        a = (q @ k.transpose(-2, -1)) / math.sqrt(c // NH)
        a = a.masked_fill(~torch.ones(t, t, device=x.device, dtype=torch.bool).tril(), float("-inf"))
        x = x + s.proj((a.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c))
        return x + s.fcp(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))
class Stage(nn.Module):
    def __init__(s, first, last, n):
        super().__init__(); s.first, s.last = first, last
        s.wte = nn.Embedding(V, C) if (first or last) else None
        s.wpe = nn.Embedding(T, C) if first else None
        s.blocks = nn.ModuleList(Block() for _ in range(n)); s.lnf = nn.LayerNorm(C) if last else None
    def forward(s, x):
        if s.first: x = s.wte(x) + s.wpe(torch.arange(x.size(1), device=x.device))
        for b in s.blocks: x = b(x)
        return s.lnf(x) @ s.wte.weight.t() if s.last else x
n = L // p
mod = Stage(r == 0, r == p - 1, n).to(dev)
example = torch.randint(0, V, (B, T), device=dev) if r == 0 else torch.randn(B, T, C, device=dev)
stage = PipelineStage(mod, r, p, dev, input_args=(example,))
loss = lambda out, y: F.cross_entropy(out.view(-1, V), y.view(-1))
S = (ScheduleGPipe if sched == "afab" else Schedule1F1B)(stage, m, loss_fn=loss)
opt = torch.optim.AdamW(mod.parameters(), lr=1e-4, fused=True)
x = torch.randint(0, V, (m * B, T), device=dev); y = torch.randint(0, V, (m * B, T), device=dev)
times = []
for i in range(6):
    torch.cuda.synchronize(); dist.barrier(); t0 = time.perf_counter()
    opt.zero_grad()
    if r == 0: S.step(x)
    elif r == p - 1: S.step(target=y)
    else: S.step()
    opt.step(); torch.cuda.synchronize(); dist.barrier(); times.append(time.perf_counter() - t0)
ms = 1000 * sum(times[2:]) / len(times[2:])
if r == 0: print(f"torch_pipelining,{sched},{p},{m},{ms:.2f},{m*B*T/(ms/1000):.0f}")
dist.destroy_process_group()
PY
for np in 2 4; do
  [ "$gpus" -ge "$np" ] || continue
  for sched in afab 1f1b; do
    torchrun --standalone --nproc_per_node "$np" /tmp/torch_pp_bench.py "$sched" 8 \
      >>"$OUT/torch.log" 2>&1 || echo "torch $np $sched FAILED (see torch.log)"
    grep '^torch_pipelining' "$OUT/torch.log" | tail -1
  done
done
if [ "$gpus" -ge 4 ]; then
  mkdir -p timelines
  bench 4 1f1b 8 1 --timeline-dir timelines
  tar czf "$OUT/timelines.tgz" timelines 2>/dev/null || true
fi
exit $status
