#!/usr/bin/python3
"""Writes the PyTorch reference data of chapter 04 (CPU kernels) and its MANIFEST.

Run with Debian's interpreter, which has python3-torch (CPU only is enough):

    /usr/bin/python3 reference_data/generate.py

Every case re-seeds torch with SEED before drawing its inputs, so adding a case never changes
the files of another. Each case writes small float32 (int64 for indices) .npy files

    ch04/<op>_<case>_<tensor>.npy

where <tensor> is an input (x, a, b, weight, bias, indices, targets, mask), the upstream
gradient `dout` (the test calls backward with it), an output (`out`, plus `mean`/`rstd` for
layernorm), or the gradient of an input (`grad_x`, `grad_a`, `grad_weight`, ...).

MANIFEST has one line per file:

    <file> sha256=<hex> dtype=<float32|int64> torch=<version> seed=<seed> atol=<a> rtol=<r>

atol/rtol is the tolerance a test must use when it compares a computed tensor with that file
(inputs carry the tolerance of their case, which no test uses).
"""
import hashlib
import os

import numpy as np
import torch
import torch.nn.functional as F

SEED = 1234
ROOT = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(ROOT, "ch04")
ATOL = 1e-5  # f32 CPU vs PyTorch (DESIGN.md section 5)
RTOL = 0.0

manifest = []


def save(op, case, tensors, atol=ATOL, rtol=RTOL):
    """Saves each named tensor as ch04/<op>_<case>_<name>.npy and records it in the manifest."""
    for name, t in tensors.items():
        arr = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        if arr.dtype == np.bool_:
            arr = arr.astype(np.int64)
        assert arr.dtype in (np.float32, np.int64), (op, case, name, arr.dtype)
        arr = np.array(arr, order="C")  # (ascontiguousarray would turn 0-d into 1-d)
        rel = f"ch04/{op}_{case}_{name}.npy"
        np.save(os.path.join(ROOT, rel), arr)
        manifest.append((rel, str(arr.dtype), atol, rtol))


def leaf(t):
    return t.clone().requires_grad_(True)


def unary_case(op, case, fn, x, **tol):
    """out = fn(x); grads of sum(out * dout)."""
    x = leaf(x)
    out = fn(x)
    dout = torch.randn_like(out)
    out.backward(dout)
    save(op, case, {"x": x, "dout": dout, "out": out, "grad_x": x.grad}, **tol)


def binary_case(op, case, fn, a, b, **tol):
    a, b = leaf(a), leaf(b)
    out = fn(a, b)
    dout = torch.randn_like(out)
    out.backward(dout)
    save(op, case, {"a": a, "b": b, "dout": dout, "out": out, "grad_a": a.grad, "grad_b": b.grad},
         **tol)


def seeded(fn):
    def wrapped():
        torch.manual_seed(SEED)
        fn()
    return wrapped


# ----- NN ops (helper ch04b) -------------------------------------------------------------------

@seeded
def softmax_cases():
    unary_case("softmax", "rows", lambda x: torch.softmax(x, -1), torch.randn(4, 7) * 3)
    unary_case("softmax", "dim1", lambda x: torch.softmax(x, 1), torch.randn(2, 3, 5) * 3)
    unary_case("log_softmax", "rows", lambda x: torch.log_softmax(x, -1), torch.randn(4, 7) * 3)
    unary_case("log_softmax", "dim0", lambda x: torch.log_softmax(x, 0), torch.randn(5, 3, 2) * 3)


@seeded
def layernorm_cases():
    x = leaf(torch.randn(2, 5, 16) * 2 + 0.5)
    w = leaf(torch.randn(16))
    b = leaf(torch.randn(16))
    out, mean, rstd = torch.native_layer_norm(x, [16], w, b, 1e-5)
    dout = torch.randn_like(out)
    out.backward(dout)
    save("layernorm", "btc", {"x": x, "weight": w, "bias": b, "dout": dout, "out": out,
                              "mean": mean.reshape(2, 5), "rstd": rstd.reshape(2, 5),
                              "grad_x": x.grad, "grad_weight": w.grad, "grad_bias": b.grad})


@seeded
def gelu_cases():
    unary_case("gelu", "tanh", lambda x: F.gelu(x, approximate="tanh"), torch.randn(3, 33) * 2)


@seeded
def embedding_cases():
    w = leaf(torch.randn(10, 8))
    idx = torch.tensor([[1, 3, 3, 9, 0], [3, 1, 7, 7, 7], [2, 2, 9, 1, 3]], dtype=torch.int64)
    out = F.embedding(idx, w)
    dout = torch.randn_like(out)
    out.backward(dout)
    save("embedding", "repeats", {"weight": w, "indices": idx, "dout": dout, "out": out,
                                  "grad_weight": w.grad})


@seeded
def cross_entropy_cases():
    for case, targets in (("basic", [3, 0, 10, 5, 5, 7]), ("ignore", [3, -100, 10, 5, -100, 7])):
        logits = leaf(torch.randn(6, 11) * 2)
        t = torch.tensor(targets, dtype=torch.int64)
        out = F.cross_entropy(logits, t, ignore_index=-100)
        dout = torch.tensor(0.7)
        out.backward(dout)
        save("cross_entropy", case, {"logits": logits, "targets": t, "dout": dout, "out": out,
                                     "grad_logits": logits.grad})


@seeded
def masked_fill_cases():
    mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)  # causal: j > i
    x = leaf(torch.randn(2, 3, 5, 5))
    out = x.masked_fill(mask, -1e9)
    dout = torch.randn_like(out)
    out.backward(dout)
    save("masked_fill", "causal", {"x": x, "mask": mask, "dout": dout, "out": out,
                                   "grad_x": x.grad})
    # Causal attention probabilities: softmax(masked_fill(x, mask, -inf)) over the last dim.
    unary_case("causal_softmax", "attn",
               lambda x: torch.softmax(x.masked_fill(mask, float("-inf")), -1),
               torch.randn(2, 3, 5, 5))


# ----- elementwise, reductions, matmul, views (helper ch04a) -----------------------------------

@seeded
def elementwise_cases():
    for op, fn in (("add", torch.add), ("sub", torch.sub), ("mul", torch.mul)):
        binary_case(op, "bcast", fn, torch.randn(2, 3, 4), torch.randn(3, 1))
        binary_case(op, "outer", fn, torch.randn(4, 1), torch.randn(3))
    sign = lambda t: torch.where(torch.rand_like(t) < 0.5, -1.0, 1.0)
    b = torch.rand(3, 1) + 0.5
    binary_case("div", "bcast", torch.div, torch.randn(2, 3, 4), b * sign(b))
    b = torch.rand(3) + 0.5
    binary_case("div", "outer", torch.div, torch.randn(4, 1), b * sign(b))


@seeded
def reduce_cases():
    unary_case("sum", "dim1_keepdim", lambda x: x.sum(dim=[1], keepdim=True), torch.randn(3, 4, 5))
    unary_case("sum", "dims02", lambda x: x.sum(dim=[0, 2]), torch.randn(3, 4, 5))
    unary_case("mean", "dim1_keepdim", lambda x: x.mean(dim=[1], keepdim=True),
               torch.randn(3, 4, 5))
    unary_case("mean", "dims02", lambda x: x.mean(dim=[0, 2]), torch.randn(3, 4, 5))
    unary_case("max", "dim2_keepdim", lambda x: x.max(dim=2, keepdim=True).values,
               torch.randn(3, 4, 5))
    unary_case("max", "dim0", lambda x: x.max(dim=0).values, torch.randn(3, 4, 5))


@seeded
def matmul_cases():
    binary_case("matmul", "2d", torch.matmul, torch.randn(5, 7), torch.randn(7, 3))
    binary_case("matmul", "batched_bcast", torch.matmul, torch.randn(2, 1, 4, 6),
                torch.randn(3, 6, 5))


@seeded
def view_cases():
    unary_case("view", "6x4", lambda x: x.view(6, 4), torch.randn(2, 3, 4))
    unary_case("permute", "201", lambda x: x.permute(2, 0, 1), torch.randn(2, 3, 4))
    unary_case("transpose", "02", lambda x: x.transpose(0, 2), torch.randn(2, 3, 4))


def main():
    torch.set_num_threads(1)  # reproducible float rounding
    os.makedirs(OUT_DIR, exist_ok=True)
    for f in os.listdir(OUT_DIR):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT_DIR, f))
    for gen in (softmax_cases, layernorm_cases, gelu_cases, embedding_cases, cross_entropy_cases,
                masked_fill_cases, elementwise_cases, reduce_cases, matmul_cases, view_cases):
        gen()
    write_manifest(os.path.join(ROOT, "MANIFEST"),
                   ["# Reference data of chapter 04, written by reference_data/generate.py "
                    "(do not edit)."], manifest, SEED)


def write_manifest(path, header, entries, seed):
    """Writes a MANIFEST: the `header` comment lines, the format line, then one line per
    (file relative to reference_data/, dtype, atol, rtol) entry with the file's sha256, the torch
    version and `seed`. Shared with the scripts of later chapters (ch09/generate_gpt2.py)."""
    lines = header + ["# <file> sha256=<hex> dtype=<dtype> torch=<version> seed=<seed> "
                      "atol=<a> rtol=<r>"]
    total = 0
    for rel, dtype, atol, rtol in sorted(entries):
        data = open(os.path.join(ROOT, rel), "rb").read()
        total += len(data)
        lines.append(f"{rel} sha256={hashlib.sha256(data).hexdigest()} dtype={dtype} "
                     f"torch={torch.__version__} seed={seed} atol={atol:g} rtol={rtol:g}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(entries)} files ({total} bytes) and {os.path.relpath(path, ROOT)}")

if __name__ == "__main__":
    main()
