# Shared preamble of the .devrun scripts (source it from the repository root on a GPU machine):
# $OUT created, NCCL's NVLink multicast off, $MPI (one process per GPU), Debian's pcre2 and
# nlohmann-json unpacked from .devdeps (the device image lacks them), stamp "what" (seconds since
# start), and tt_build TARGET... (configure once: solution, sm_90, warnings not errors because
# the device's compiler is newer; the log in $OUT/build.log).
OUT=${OUT:-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
# $MPI pins one CPU thread per rank (tests: 4 ranks on the host's cores); $MPI_APP leaves the
# thread count alone (a 1.3B model's random init on the CPU took 80 s on one thread).
MPI_APP="mpirun --oversubscribe --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE"
MPI="$MPI_APP -x OMP_NUM_THREADS=1"
if [ -d .devdeps ] && [ ! -f /usr/include/pcre2.h ]; then
  for f in .devdeps/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
t0=$SECONDS
stamp() { echo "=== [$((SECONDS - t0)) s] $* ==="; }
tt_build() {
  stamp "build $*"
  { [ -f build/build.ninja ] || cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DTT_STARTER_TESTS=OFF -DTT_WARNINGS_AS_ERRORS=OFF; } >>"$OUT/build.log" 2>&1 &&
    cmake --build build -j16 --target "$@" >>"$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; return 1; }
  tail -1 "$OUT/build.log"
}
