#!/usr/bin/python3
"""Writes the PyTorch reference data of chapter 05 (nn + optim) and its MANIFEST.json.

Run with Debian's interpreter, which has python3-torch (CPU only is enough):

    /usr/bin/python3 reference_data/ch05/generate_ch05.py

A small MLP, Linear(8, 16) -> GELU(tanh) -> Linear(16, 4), with cross-entropy loss, is trained
for STEPS steps from one initialisation on the same batches by several optimizer runs (RUNS).
Files (float32 unless noted, int64 targets, C order), relative to this directory:

    init_<param>.npy            initial parameters (param: c_fc_weight, c_fc_bias, ...)
    x.npy, y.npy                the batches: x [STEPS, B, 8] float32, y [STEPS, B] int64
    <run>_losses.npy            [STEPS] loss before each update
    <run>_grads_<param>.npy     [STEPS, *shape] gradient the optimizer used at each step
                                (after clipping when the run clips)
    <run>_final_<param>.npy     parameters after the last update
    <run>_grad_norms.npy        [STEPS] total norm returned by clip_grad_norm_ (clipping runs)
    <run>_lrs.npy               [STEPS] learning rate of each step (scheduled runs; float64,
                                the exact value the optimizer used)

MANIFEST.json records for every file its sha256, dtype, shape, the torch version, the seed and
the tolerance (atol, rtol) a test must use, and the hyper-parameters of every run, which the
C++ test reads so that they are written down once.
"""
import hashlib
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

SEED = 1234
STEPS = 10
BATCH = 6
DIMS = (8, 16, 4)  # in, hidden, classes
ROOT = os.path.dirname(os.path.abspath(__file__))
ATOL = 1e-7  # float32, 10 optimizer steps: |ours - torch| <= ATOL + RTOL * |torch|
RTOL = 1e-6
PARAMS = ["c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"]

RUNS = {
    "adamw": {"optimizer": "adamw", "lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
              "weight_decay": 0.1},
    "adamw_clip_cosine": {"optimizer": "adamw", "lr": 2e-2, "beta1": 0.9, "beta2": 0.95,
                          "eps": 1e-8, "weight_decay": 0.1, "max_norm": 0.5,
                          "schedule": {"max_lr": 2e-2, "min_lr": 2e-3, "warmup_steps": 3,
                                       "total_steps": STEPS}},
    "sgd_momentum": {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "dampening": 0.0,
                     "weight_decay": 0.0, "nesterov": False},
    "sgd_nesterov": {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "dampening": 0.0,
                     "weight_decay": 1e-2, "nesterov": True},
}

files = []


def file_name(name):
    return name.replace(".", "_")


def save(rel, t):
    arr = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert arr.dtype in (np.float32, np.float64, np.int64), (rel, arr.dtype)
    arr = np.array(arr, order="C")
    np.save(os.path.join(ROOT, rel), arr)
    files.append((rel, str(arr.dtype), list(arr.shape)))


def warmup_cosine(step, s):
    """The schedule of tt::optim::WarmupCosineLR (0-based step)."""
    if step < s["warmup_steps"]:
        return s["max_lr"] * (step + 1) / s["warmup_steps"]
    if step >= s["total_steps"]:
        return s["min_lr"]
    ratio = (step - s["warmup_steps"]) / (s["total_steps"] - s["warmup_steps"])
    return s["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (s["max_lr"] - s["min_lr"])


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = torch.nn.Linear(DIMS[0], DIMS[1])
        self.c_proj = torch.nn.Linear(DIMS[1], DIMS[2])

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


def make_optimizer(cfg, params):
    if cfg["optimizer"] == "adamw":
        return torch.optim.AdamW(params, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]),
                                 eps=cfg["eps"], weight_decay=cfg["weight_decay"])
    return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg["momentum"],
                           dampening=cfg["dampening"], weight_decay=cfg["weight_decay"],
                           nesterov=cfg["nesterov"])


def run(name, cfg, init, xs, ys):
    model = MLP()
    model.load_state_dict(init)
    opt = make_optimizer(cfg, list(model.parameters()))
    losses, norms, lrs = [], [], []
    grads = {p: [] for p in PARAMS}
    for step in range(STEPS):
        if "schedule" in cfg:
            lr = warmup_cosine(step, cfg["schedule"])
            for group in opt.param_groups:
                group["lr"] = lr
            lrs.append(lr)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xs[step]), ys[step])
        loss.backward()
        if "max_norm" in cfg:
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                              cfg["max_norm"])))
        for p, t in model.named_parameters():
            grads[p].append(t.grad.detach().clone())
        opt.step()
        losses.append(loss.item())
    save(f"{name}_losses.npy", torch.tensor(losses, dtype=torch.float32))
    for p, t in model.named_parameters():
        save(f"{name}_grads_{file_name(p)}.npy", torch.stack(grads[p]))
        save(f"{name}_final_{file_name(p)}.npy", t)
    if norms:
        save(f"{name}_grad_norms.npy", torch.tensor(norms, dtype=torch.float32))
    if lrs:
        save(f"{name}_lrs.npy", torch.tensor(lrs, dtype=torch.float64))


def main():
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    init = {k: v.detach().clone() for k, v in MLP().state_dict().items()}
    xs = torch.randn(STEPS, BATCH, DIMS[0])
    ys = torch.randint(0, DIMS[2], (STEPS, BATCH))
    for p in PARAMS:
        save(f"init_{file_name(p)}.npy", init[p])
    save("x.npy", xs)
    save("y.npy", ys)
    for name, cfg in RUNS.items():
        run(name, cfg, init, xs, ys)

    entries = []
    for rel, dtype, shape in sorted(files):
        with open(os.path.join(ROOT, rel), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        entries.append({"file": rel, "sha256": digest, "dtype": dtype, "shape": shape,
                        "torch": torch.__version__, "seed": SEED, "atol": ATOL, "rtol": RTOL})
    manifest = {
        "generator": "reference_data/ch05/generate_ch05.py",
        "torch": torch.__version__,
        "seed": SEED,
        "steps": STEPS,
        "batch": BATCH,
        "dims": list(DIMS),
        "params": PARAMS,
        "loss": "cross_entropy (mean)",
        "activation": "gelu (tanh approximation)",
        "runs": RUNS,
        "files": entries,
    }
    # Indented, but one line per file entry so that diffs stay readable.
    text = json.dumps({k: v for k, v in manifest.items() if k != "files"}, indent=1)
    lines = ",\n".join("  " + json.dumps(e) for e in entries)
    text = text[:-2] + ',\n "files": [\n' + lines + "\n ]\n}\n"
    json.loads(text)  # still valid JSON
    with open(os.path.join(ROOT, "MANIFEST.json"), "w") as f:
        f.write(text)
    print(f"wrote {len(entries)} files and MANIFEST.json")


if __name__ == "__main__":
    main()
