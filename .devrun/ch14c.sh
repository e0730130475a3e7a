#!/usr/bin/env bash
# GPU run for the ch14c branch (issue 25: a pipeline's memory, AFAB vs 1F1B activation memory):
# .devrun/ch14b.sh on a 4-GPU H100 machine, from the repository root, with the GPT-2 1.3B shape
# (L24 H16 C2048) for the app, memory and PyTorch parts, under a 9-minute budget: what does not
# fit is skipped and says so (BUDGET_S, in ch14b.sh). Two runs of at most 9 minutes:
#   RUN=1 (first):  build, ch14 tests (np 1, 2, 4: the GPU pipeline, its gathered checkpoint),
#                   AFAB vs 1F1B activation memory (p=4, 2, m=8), the app runs (pp1 pp2 pp4
#                   dp2pp2 tp2pp2)
#   RUN=2:          build, the bubble sweep, PyTorch at 1.3B, then the app layouts again as time
#                   allows (LAYOUTS="..." for those run 1 skipped)
# The app runs end normally (KILL=0): 8 steps, a checkpoint in /dev/shm, the allocator's peak.
# Memory per GPU: nvidia-smi's peak in app.jsonl, torch.jsonl and the smi_peak_mib column of the
# bench CSVs; the allocator's in the bench CSVs and memory.log, and in train_gpt2's log lines.
set -uo pipefail
case ${RUN:-1} in
  1) default_parts="build tests memory app" ;;
  *) default_parts="build bubble torch app" ;;
esac
export PARTS=${PARTS:-$default_parts}
export SHAPES=${SHAPES:-1.3b} MEM_SHAPE=${MEM_SHAPE:-1.3b} BUDGET_S=${BUDGET_S:-530} KILL=${KILL:-0}
exec bash "$(dirname "$0")/ch14b.sh"
