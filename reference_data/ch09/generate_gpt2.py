#!/usr/bin/python3
"""Writes the PyTorch reference data of chapter 09 (GPT-2 model and training) and its MANIFEST.

Run with Debian's interpreter, which has python3-torch (CPU only, no downloads):

    /usr/bin/python3 reference_data/ch09/generate_gpt2.py

A minimal GPT-2 is written out below (no transformers, no downloads). The "tiny" model has
L=2 layers, C=64 channels, NH=4 heads, vocabulary V=512, context T=32, and one batch B=4. Its
weights are drawn once (seeded) and saved in llm.c's checkpoint format (gpt2_tiny.bin), so the
C++ test loads them through the llm.c importer. Files (float32 unless noted):

    gpt2_tiny.bin                  weights, llm.c format: 256 int32 header + fp32 parameters
    gpt2_tiny_idx.npy              int64 [B, T] input tokens
    gpt2_tiny_targets.npy          int64 [B, T] next tokens
    gpt2_tiny_logits.npy           [B, T, V] logits of the forward pass
    gpt2_tiny_loss.npy             0-d mean cross-entropy
    gpt2_tiny_grad_<param>.npy     gradient of every parameter (our names, '.' -> '_')
    gpt2_tiny_adamw_losses.npy     [10] losses of 10 AdamW steps on the same batch
    attention_qkv.npy, attention_dout.npy, attention_out.npy, attention_grad_qkv.npy
                                   causal self-attention alone (B=2, T=8, C=16, NH=4)

MANIFEST (this folder) has one line per file, paths relative to reference_data/:

    <file> sha256=<hex> dtype=<dtype> torch=<version> seed=<seed> atol=<a> rtol=<r>
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

SEED = 1234
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # reference_data/
sys.path.insert(0, ROOT)
from generate import write_manifest  # noqa: E402  (the MANIFEST writer of chapter 04's script)

# The tiny model and the training run the tests repeat.
L, C, NH, V, MAXT, B, T = 2, 64, 4, 512, 32, 4, 32
ADAMW = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
CLIP = 1.0
STEPS = 10


class Config:
    """A GPT-2 shape: L layers, C channels, NH heads, vocabulary V (wte has Vp >= V rows),
    context MAXT. check_gpt2_124m.py imports this file and uses GPT-2 124M's."""

    def __init__(self, L, C, NH, V, MAXT, Vp=None):
        self.L, self.C, self.NH, self.V, self.MAXT = L, C, NH, V, MAXT
        self.Vp = V if Vp is None else Vp


TINY = Config(L, C, NH, V, MAXT)

manifest = []  # (relative path, dtype, atol, rtol)


def record(rel, dtype, atol, rtol):
    manifest.append((rel, dtype, atol, rtol))


def save_npy(name, t, atol=1e-5, rtol=0.0):
    arr = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert arr.dtype in (np.float32, np.int64), (name, arr.dtype)
    arr = np.array(arr, order="C")
    rel = f"ch09/{name}.npy"
    np.save(os.path.join(ROOT, rel), arr)
    record(rel, str(arr.dtype), atol, rtol)


LAYER_KINDS = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
               "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]


def param_names(cfg=TINY):
    """Parameter names in llm.c's order, per layer (the C++ model uses the same names)."""
    names = ["wte.weight", "wpe.weight"]
    for l in range(cfg.L):
        names += [f"h.{l}.{kind}" for kind in LAYER_KINDS]
    return names + ["ln_f.weight", "ln_f.bias"]


def param_shape(name, cfg=TINY):
    """Shape of parameter `name` (nn.Linear convention: weight [out, in])."""
    C = cfg.C
    fixed = {"wte.weight": (cfg.Vp, C), "wpe.weight": (cfg.MAXT, C), "ln_f.weight": (C,),
             "ln_f.bias": (C,)}
    if name in fixed:
        return fixed[name]
    kind = name.split(".", 2)[2]
    return {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (3 * C, C),
            "attn.c_attn.bias": (3 * C,), "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,),
            "ln_2.weight": (C,), "ln_2.bias": (C,), "mlp.c_fc.weight": (4 * C, C),
            "mlp.c_fc.bias": (4 * C,), "mlp.c_proj.weight": (C, 4 * C),
            "mlp.c_proj.bias": (C,)}[kind]


def init_params(cfg=TINY, seed=SEED, device="cpu"):
    """Fixed weights: N(0, 0.02) matrices, small random biases, LayerNorm weights near 1."""
    g = torch.Generator().manual_seed(seed)
    params = {}
    for name in param_names(cfg):
        r = torch.randn(param_shape(name, cfg), generator=g)
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            t = 1.0 + 0.1 * r
        else:
            t = 0.02 * r
        params[name] = t.float().to(device).requires_grad_(True)
    return params


def attention(qkv, nh, sdpa=False):
    """Causal self-attention of qkv [B, T, 3C] -> [B, T, C] (before the output projection);
    sdpa=True uses PyTorch's fused scaled_dot_product_attention (same math, other rounding)."""
    Bq, Tq, C3 = qkv.shape
    Cq = C3 // 3
    q, k, v = qkv.split(Cq, dim=2)
    q, k, v = (t.view(Bq, Tq, nh, Cq // nh).transpose(1, 2) for t in (q, k, v))
    if sdpa:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).contiguous().view(Bq, Tq, Cq)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(Cq // nh))
    mask = torch.ones(Tq, Tq, dtype=torch.bool, device=qkv.device).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).contiguous().view(Bq, Tq, Cq)


def forward(p, idx, cfg=TINY, sdpa=False):
    """GPT-2 forward: logits [B, T, V]; lm_head is tied to wte (its first V rows). sdpa: the
    attention through PyTorch's scaled_dot_product_attention."""
    C = cfg.C
    Tn = idx.shape[1]
    x = p["wte.weight"][idx] + p["wpe.weight"][torch.arange(Tn, device=idx.device)]
    for l in range(cfg.L):
        h = f"h.{l}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        a = F.linear(a, p[h + "attn.c_attn.weight"], p[h + "attn.c_attn.bias"])
        a = F.linear(attention(a, cfg.NH, sdpa), p[h + "attn.c_proj.weight"],
                     p[h + "attn.c_proj.bias"])
        x = x + a
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        m = F.gelu(F.linear(m, p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"]),
                   approximate="tanh")
        x = x + F.linear(m, p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    wte = p["wte.weight"]
    return x @ (wte if cfg.Vp == cfg.V else wte[: cfg.V]).t()


def write_llmc(path, p, cfg=TINY):
    """llm.c checkpoint: header int32[256] = magic 20240326, version 3 (fp32), maxT, V, L, NH, C,
    Vp; then each parameter kind stacked over layers, in llm.c's order."""
    hdr = np.zeros(256, dtype=np.int32)
    hdr[:8] = [20240326, 3, cfg.MAXT, cfg.V, cfg.L, cfg.NH, cfg.C, cfg.Vp]

    def raw(name):
        return p[name].detach().cpu().numpy().astype(np.float32).tobytes()

    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        for name in ["wte.weight", "wpe.weight"]:
            f.write(raw(name))
        for kind in LAYER_KINDS:
            for l in range(cfg.L):
                f.write(raw(f"h.{l}.{kind}"))
        for name in ["ln_f.weight", "ln_f.bias"]:
            f.write(raw(name))


def gpt2_cases():
    params = init_params()
    write_llmc(os.path.join(HERE, "gpt2_tiny.bin"), params)
    record("ch09/gpt2_tiny.bin", "llmc-fp32", 0, 0)

    g = torch.Generator().manual_seed(SEED + 1)
    data = torch.randint(0, V, (B, T + 1), generator=g)
    idx, targets = data[:, :T].contiguous(), data[:, 1:].contiguous()
    save_npy("gpt2_tiny_idx", idx)
    save_npy("gpt2_tiny_targets", targets)

    logits = forward(params, idx)
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
    loss.backward()
    save_npy("gpt2_tiny_logits", logits, atol=1e-5)
    save_npy("gpt2_tiny_loss", loss, atol=1e-5)
    for name in param_names():
        save_npy("gpt2_tiny_grad_" + name.replace(".", "_"), params[name].grad, atol=1e-5,
                 rtol=1e-4)

    # 10 AdamW steps on the same batch: weight decay on matrices only (GPT-2 practice), global
    # gradient-norm clipping at CLIP, constant learning rate. losses[i] is the loss before step i.
    for t in params.values():
        t.grad = None
    decay = [params[n] for n in param_names() if params[n].dim() >= 2]
    no_decay = [params[n] for n in param_names() if params[n].dim() < 2]
    opt = torch.optim.AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
                            **ADAMW)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(params, idx).view(-1, V), targets.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), CLIP)
        opt.step()
        losses.append(loss.item())
    save_npy("gpt2_tiny_adamw_losses", torch.tensor(losses, dtype=torch.float32), atol=1e-4)


def attention_cases():
    g = torch.Generator().manual_seed(SEED + 2)
    qkv = torch.randn(2, 8, 3 * 16, generator=g).requires_grad_(True)
    out = attention(qkv, 4)
    dout = torch.randn(out.shape, generator=g)
    out.backward(dout)
    save_npy("attention_qkv", qkv)
    save_npy("attention_dout", dout)
    save_npy("attention_out", out, atol=1e-5)
    save_npy("attention_grad_qkv", qkv.grad, atol=1e-5)


def main():
    torch.set_num_threads(1)  # reproducible float rounding
    for f in os.listdir(HERE):
        if f.endswith(".npy") or f == "gpt2_tiny.bin":
            os.remove(os.path.join(HERE, f))
    gpt2_cases()
    attention_cases()
    write_manifest(os.path.join(HERE, "MANIFEST"),
                   ["# Reference data of chapter 09, written by reference_data/ch09/generate_gpt2.py"
                    " (do not edit).",
                    f"# model: L={L} C={C} NH={NH} V={V} maxT={MAXT}; batch B={B} T={T}; AdamW "
                    f"lr={ADAMW['lr']} betas={ADAMW['betas'][0]},{ADAMW['betas'][1]} "
                    f"eps={ADAMW['eps']} weight_decay={ADAMW['weight_decay']} (matrices only) "
                    f"clip={CLIP} steps={STEPS}"], manifest, SEED)

if __name__ == "__main__":
    main()
