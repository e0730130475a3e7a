#!/usr/bin/env python3
"""Hugging Face anchor for chapter 15's tt_generate: eager `generate` of a LlamaForCausalLM.

The same shape as `tt_generate --random tinyllama-1.1b` (TinyLlama-1.1B: V 32000, C 2048, L 22,
NH 32, NKV 4, F 5632), random weights (transformers' own init), in bfloat16 on one GPU; greedy,
exactly --new-tokens new tokens per row (EOS disabled), prompts of --prompt-len seeded random ids,
batch sizes --batch. No torch.compile, no static cache: `model.generate` as a user calls it.

Per batch size B, one JSON line:
  ttft_ms          time of generate(max_new_tokens=1): prefill of the prompt + the first token
  decode_ms_per_step, tokens_per_s
                   from generate(max_new_tokens=N) minus generate(max_new_tokens=1): the N - 1
                   decode steps, B tokens each
Each timing is the best of --runs after one warm-up call.

  python3 benchmarks/hf_generate_bench.py --batch 1,8,32 --prompt-len 128 --new-tokens 256
  python3 benchmarks/hf_generate_bench.py --batch 1 --prompt-len 512 --new-tokens 2   # TTFT
"""
import argparse
import json
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM


def tinyllama_config(attn):
    return LlamaConfig(vocab_size=32000, hidden_size=2048, num_hidden_layers=22,
                       num_attention_heads=32, num_key_value_heads=4, intermediate_size=5632,
                       max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
                       tie_word_embeddings=False, attn_implementation=attn)


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", default="1,8,32", help="comma-separated batch sizes")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"],
                    help="transformers' attention implementation (sdpa is its default)")
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    config = tinyllama_config(args.attn)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(dtype).eval()
    n_params = sum(p.numel() for p in model.parameters())
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)

    for batch in [int(b) for b in args.batch.split(",")]:
        ids = torch.randint(0, config.vocab_size, (batch, args.prompt_len), generator=gen)
        ids = ids.cuda()
        mask = torch.ones_like(ids)

        def run(n):
            with torch.inference_mode():
                out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n,
                                     do_sample=False, eos_token_id=None,
                                     pad_token_id=0, use_cache=True)
            assert out.shape == (batch, args.prompt_len + n), out.shape

        run(2)  # warm-up (cuBLAS heuristics, allocator)
        t1 = min(timed(lambda: run(1)) for _ in range(args.runs))
        tn = min(timed(lambda: run(args.new_tokens)) for _ in range(args.runs))
        steps = max(args.new_tokens - 1, 1)
        decode = max(tn - t1, 1e-9)
        print(json.dumps({
            "impl": "hf", "dtype": args.dtype, "attn": args.attn, "batch": batch,
            "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
            "ttft_ms": round(1e3 * t1, 3), "decode_ms_per_step": round(1e3 * decode / steps, 4),
            "tokens_per_s": round(batch * steps / decode, 2), "parameters": n_params,
            "torch": torch.__version__, "transformers": transformers.__version__,
            "gpu": torch.cuda.get_device_name(0)}), flush=True)


if __name__ == "__main__":
    main()
