"""The cost model shared by the project's planning tools (tools/scaling_model, chapter 12;
tools/plan_layout, chapter 16): parameter and FLOP counts of a GPT-2, and the alpha-beta times
of a ring all-reduce, flat inside a node and hierarchical across nodes, with DDP's buckets
overlapped with backward. `a` is an argparse namespace with the link inputs (nvlink_gbs,
nvlink_alpha_us, ib_gbits, ib_alpha_us, gpus_per_node, bucket_mb): add_link_arguments adds them.
Python standard library only.
"""
import math


def add_link_arguments(p):
    """The link inputs of the alpha-beta model, as options of the argparse parser `p`."""
    p.add_argument("--nvlink-gbs", type=float, default=450.0,
                   help="NVLink bandwidth per GPU and direction, GB/s (H100 SXM: 900 GB/s "
                        "bidirectional = 450 per direction)")
    p.add_argument("--nvlink-alpha-us", type=float, default=3.0, help="NVLink latency per ring step, us")
    p.add_argument("--ib-gbits", type=float, default=400.0,
                   help="InfiniBand per GPU (one NDR NIC each), Gbit/s")
    p.add_argument("--ib-alpha-us", type=float, default=8.0, help="InfiniBand latency per ring step, us")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket capacity, MiB")


def gpt2_params(layers, channels, vocab=50257, block=1024):
    """Parameters of a GPT-2 (tied head): wte + wpe + L blocks + final LayerNorm."""
    return vocab * channels + block * channels + layers * (12 * channels**2 + 13 * channels) + 2 * channels


def flops_per_token(params, layers, channels, seq):
    """6N + 12 L C T, as tt::gpt2::flops_per_token (chapter 09)."""
    return 6 * params + 12 * layers * channels * seq


def ring_allreduce_s(nbytes, peers, bw, alpha):
    """Ring all-reduce of `nbytes` over `peers` ranks: 2(n-1)/n S/BW + 2(n-1) alpha."""
    if peers <= 1:
        return 0.0
    return 2 * (peers - 1) / peers * nbytes / bw + 2 * (peers - 1) * alpha


def allreduce_s(nbytes, gpus, a):
    """All-reduce time of one bucket on `gpus` GPUs, hierarchical beyond one node."""
    g = a.gpus_per_node
    if gpus <= g:
        return ring_allreduce_s(nbytes, gpus, a.nvlink_gbs * 1e9, a.nvlink_alpha_us * 1e-6)
    nodes = gpus // g
    # Reduce-scatter and all-gather inside the node: (g-1)/g S/BW + (g-1) alpha each.
    intra = 2 * ((g - 1) / g * nbytes / (a.nvlink_gbs * 1e9) + (g - 1) * a.nvlink_alpha_us * 1e-6)
    inter = ring_allreduce_s(nbytes / g, nodes, a.ib_gbits / 8 * 1e9, a.ib_alpha_us * 1e-6)
    return intra + inter


def step_time_s(compute_s, micro_s, grad_bytes, gpus, a, overlap=True):
    """Step time: `compute_s` of forward + backward on each GPU, of which the last
    micro-batch's backward (2/3 of `micro_s`) has the buckets' all-reduces queued behind it
    (the micro-batches before it run under no_sync and communicate nothing)."""
    if gpus <= 1:
        return compute_s
    bwd = micro_s * 2 / 3
    fwd = compute_s - bwd
    cap = a.bucket_mb * 1024 * 1024
    k = max(1, math.ceil(grad_bytes / cap))
    sizes = [cap] * (k - 1) + [grad_bytes - cap * (k - 1)]
    done = 0.0  # from the start of backward
    for i, s in enumerate(sizes):
        ready = bwd * (i + 1) / k if overlap else bwd
        done = max(done, ready) + allreduce_s(s, gpus, a)
    return fwd + max(done, bwd)
