"""PyTorch's CPU mini step (L6 H6 C384 V8192, B8 T256, SDPA), profiled op by op with
torch.profiler: where PyTorch's time goes, to set beside bench_gpt2_step --profile.

usage: taskset -c 0,1 python3 .devrun/torch_cpu_profile.py [--threads 2] [--anchors DIR]
"""
import argparse
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--anchors", default=".devbin/anchors")
ap.add_argument("--steps", type=int, default=3)
args = ap.parse_args()
sys.path.insert(0, args.anchors)
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from gpt2_torch_bench import GPT  # noqa: E402

torch.set_num_threads(args.threads)
torch.manual_seed(0)
V, L, NH, C, B, T = 8192, 6, 6, 384, 8, 256
model = GPT(V=V, maxT=T, L=L, nh=NH, C=C, naive=False)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
x = torch.randint(0, V, (B, T))
y = torch.randint(0, V, (B, T))


def step():
    loss = model(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


for _ in range(3):
    step()
t0 = time.perf_counter()
for _ in range(args.steps):
    step()
print(f"torch {torch.__version__}, {args.threads} threads: "
      f"{(time.perf_counter() - t0) / args.steps * 1e3:.1f} ms/step")
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    step()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=40))
print(prof.key_averages(group_by_input_shape=True).table(
    sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=30,
    max_shapes_column_width=70))
