#!/usr/bin/env bash
# Session 19, one H200 (.devbin/s19f.tar.xz: the CI build of main 921fb5e, sm_90), ~2 min: the
# CUDA tests of chapters 07, 10, 11 and 15 with the final CPU allocator (the cache capped at
# 1 GiB). The CI build finds reference_data/ by its absolute path: hence the link.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s19f}"
mkdir -p /work && ln -sfn "$PWD" /work/ci-19b
for ch in 07 10 11 15; do
  gtests ch${ch}_cuda.log 300 build/bin/tt_ch${ch}_tests '*Cuda*' | tail -4 || status=1
done
stamp "s19f done (status $status)"
exit $status
