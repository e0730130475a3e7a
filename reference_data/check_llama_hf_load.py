#!/usr/bin/env python3
"""The other direction of chapter 15's interop: a model saved by this project (tt_generate
--save DIR, which also writes DIR/logits.npy and DIR/input_ids.npy) loads in transformers'
LlamaForCausalLM and gives the same logits (fp32, CPU, max abs difference <= --atol).

    python3 reference_data/check_llama_hf_load.py DIR [--atol 1e-4] [--resave DIR2]

--resave DIR2 also writes the loaded model with transformers' save_pretrained (float32
safetensors), for the round trip ours -> transformers -> ours (.devrun/ch15_ref.sh compares the
file that tt_generate --save writes from DIR2 with DIR's, byte for byte).
"""
import argparse
import os
import sys

import numpy as np
import torch
import transformers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--resave", help="save_pretrained the loaded model into this directory")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = transformers.LlamaForCausalLM.from_pretrained(
        args.dir, attn_implementation="eager").float().eval()
    ids = torch.from_numpy(np.load(os.path.join(args.dir, "input_ids.npy")))
    ours = np.load(os.path.join(args.dir, "logits.npy"))
    with torch.no_grad():
        theirs = model(ids).logits.numpy()
    err = float(np.abs(theirs - ours).max())
    print(f"transformers loaded {args.dir}: logits {list(theirs.shape)}, max abs diff {err:.3g} "
          f"(atol {args.atol})")
    if args.resave:
        model.save_pretrained(args.resave, safe_serialization=True)
        print(f"transformers saved it again to {args.resave}")
    sys.exit(0 if err <= args.atol else 1)


if __name__ == "__main__":
    main()
