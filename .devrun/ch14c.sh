#!/usr/bin/env bash
# GPU run for the ch14c branch (issue 25: a pipeline's memory, AFAB vs 1F1B activation memory):
# .devrun/ch14b.sh on a 4-GPU H100 machine, from the repository root, with the GPT-2 1.3B shape
# (L24 H16 C2048) for the app, memory and PyTorch parts, under a 9-minute budget: what does not
# fit is skipped and says so (BUDGET_S, in ch14b.sh).
#   RUN=1 (09:03, at 16f96af, before each rank kept only its stages): build, tests, the 1.3B app
#          at pp1 pp2 pp4 (each ended normally with a 1.3B checkpoint: ~150 s a run); the rest
#          was skipped for time.
#   RUN=2 (the default): build (~60 s), ch14 tests at np 2 and 4 (~30 s), the 1.3B app at pp2 pp4
#          dp2pp2 tp2pp2 (killed after step 6, memory line printed: ~35 s each), AFAB vs 1F1B
#          activation memory at p=4 then 2, m=8 (~30 s a run), PyTorch 1F1B at p=2 and 4 (~40 s
#          each), then the rest of the bubble sweep as time allows; PyTorch's GPipe and pp1 are
#          not rerun (TORCH_SCHEDULES, LAYOUTS to add them).
# Memory per GPU: nvidia-smi's peak in app.jsonl, torch.jsonl and the smi_peak_mib column of
# bubble.csv; the allocator's in app.jsonl (train_gpt2's memory line), bubble.csv and bench.log.
set -uo pipefail
export PARTS=${PARTS:-"build tests app memory torch bubble"}
export TEST_NP=${TEST_NP:-"2 4"} LAYOUTS=${LAYOUTS:-"pp2 pp4 dp2pp2 tp2pp2"}
export SHAPES=${SHAPES:-1.3b} SWEEP_SHAPE=${SWEEP_SHAPE:-1.3b} TORCH_SCHEDULES=${TORCH_SCHEDULES:-1f1b}
export BUDGET_S=${BUDGET_S:-530} KILL=${KILL:-6}
exec bash "$(dirname "$0")/ch14b.sh"
