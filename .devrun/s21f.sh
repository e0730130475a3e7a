#!/usr/bin/env bash
# Session 21, one H200 host (.devbin/s21e.tar.xz again), ~3 min: issue 23 goal 4. Is the spread
# of the CPU mini step the cores? The host's load and each core's busy share over 2 s, then three
# alternating rounds of ours and PyTorch's on CPUs 8 and 9 instead of 0 and 1 (cpu_vs_torch with
# CPUS=8,9).
set -uo pipefail
. .devrun/lib.sh
begin_run "${1:-s21e}"
uptime
busy() { awk '/^cpu[0-9]/ {print $1, $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
busy >/tmp/b0; sleep 2; busy >/tmp/b1
paste /tmp/b0 /tmp/b1 | awk '{printf "%s %.0f%%  ", $1, 100 * ($5 - $2) / ($6 - $3 + 1e-9)} END {print ""}'
CPUS=8,9 cpu_vs_torch 3 build || status=1
logs_end
stamp "s21f done (status $status)"
exit $status
