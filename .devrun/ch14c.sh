#!/usr/bin/env bash
# GPU run for the ch14c branch (issue 25: a pipeline's memory, AFAB vs 1F1B activation memory):
# .devrun/ch14b.sh on a 4-GPU H100 machine, from the repository root, with the GPT-2 1.3B shape
# (L24 H16 C2048) for the app, memory and PyTorch parts, under a 9-minute budget: what does not
# fit is skipped and says so (BUDGET_S, in ch14b.sh).
#   run 1 (at 16f96af, before each rank kept only its stages): build, tests, the 1.3B app at
#          pp1 pp2 pp4, each ending normally with a 1.3B checkpoint (~150 s a run).
#   run 2 (at aa7082c): tests at np 2 and 4 passed; the 1.3B app at pp2 pp4 dp2pp2 tp2pp2 (killed
#          after step 6; ~80 s a run: $MPI pinned one thread, so the 1.3B init was slow); the
#          first bench (AFAB p=4 m=8 at 1.3B) hit its 150 s timeout; the rest was skipped.
#   run 3 (the defaults below): build (~60 s), the 1.3B app at pp2 pp4 and PyTorch 1F1B at 1.3B
#          p=2 and 4 in the same call (the >= 1.2x goal), AFAB vs 1F1B memory at p=4 then 2, m=8
#          on the 774M shape, then the bubble sweep as time allows; PREV_BUBBLE=FILE seeds
#          bubble.csv with an earlier call's rows, which are then not run again (run 4:
#          PARTS=bubble). PARTS="... app" LAYOUTS="..." to measure other app layouts, TEST_NP for
#          the tests.
# Memory per GPU: nvidia-smi's peak in app.jsonl, torch.jsonl and the smi_peak_mib column of
# bubble.csv; the allocator's in app.jsonl (train_gpt2's memory line), bubble.csv and bench.log.
set -uo pipefail
export PARTS=${PARTS:-"build app torch memory bubble"}
export TEST_NP=${TEST_NP:-"2 4"} LAYOUTS=${LAYOUTS:-"pp2 pp4"}
export SHAPES=${SHAPES:-1.3b} SWEEP_SHAPE=${SWEEP_SHAPE:-774m} TORCH_SCHEDULES=${TORCH_SCHEDULES:-1f1b}
export BUDGET_S=${BUDGET_S:-550} KILL=${KILL:-6}
if [ -n "${PREV_BUBBLE:-}" ]; then
  mkdir -p "${OUT:-out}" && cp "$PREV_BUBBLE" "${OUT:-out}/bubble.csv"
fi
exec bash "$(dirname "$0")/ch14b.sh"
