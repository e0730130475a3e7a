// Hopper's bf16 FlashAttention kernels (given code): chapter 11's causal and full-mode forward
// and its two-kernel backward (flash_attention_bf16.cu: same algorithm, same results up to the
// order of fp32 sums) on warpgroup MMA. Compiled for sm_90a only (wgmma is an
// architecture-specific feature of compute capability 9.0); flash_attention_bf16.cu launches
// them on such a device when set_flash_attention_bf16_hopper(true) (off by default: not faster
// yet, chapter 11's README, "Hopper: warpgroup MMA").
//
// What changes against the portable kernels:
//  - wgmma.mma_async m64nNk16: a warpgroup (4 warps, 128 threads) multiplies 64 rows at once,
//    reading both operands of S = Q K^T (and dP = dO V^T, S^T = K Q^T, dP^T = V dO^T) from
//    shared memory through matrix descriptors, and the A operand of O += P V (dQ += dS K,
//    dV += P^T dO, dK += dS^T Q) from registers: P and dS stay where the softmax left them, as
//    with mma.sync; the tensor cores fetch the shared operands themselves, where mma.sync needs
//    an ldmatrix per fragment and per warp;
//  - the tiles lie in shared memory in wgmma's "core matrix" layout without swizzle: 8 x 8 bf16
//    blocks of 128 contiguous bytes, row r, column c of a tile of D columns at element
//    ((r / 8) (D / 8) + c / 8) 64 + (r % 8) 8 + c % 8. A descriptor gives the start address and
//    two strides: for an operand read K-major (Q, K, V, dO when the reduction runs over the head
//    dimension, contiguous within a row) the leading byte offset (LBO, the next 8 columns) is 128
//    and the stride byte offset (SBO, the next 8 rows) 16 D; an operand whose reduction runs
//    over its rows (V in P V, K in dS K, dO and Q in the dK/dV products) is read MN-major, with
//    LBO = 16 D (the next 8 rows) and SBO = 128 (the next 8 columns). (Measured on an H200 with
//    .devrun/wgmma/micro.cu: the swapped conventions give wrong sums or a fault);
//  - copies into that layout go through cp.async as before (16 bytes, 8 consecutive lanes
//    filling one 128-byte block), and `fence.proxy.async` makes them visible to wgmma, which
//    reads shared memory through the async proxy.
// A block is 2 warpgroups of 64 rows; the forward streams K and V through 3 buffers and
// overlaps each warpgroup's softmax with its P V (see its kernel); the softmax is the shared
// softmax_step.
#include <cstdint>

#include "flash_bf16_device.cuh"
#include "flash_bf16_sm90a.h"
#include "tt/cuda_device.h"

namespace tt::cuda {

namespace {

using namespace flash_bf16;

// ----- warpgroup MMA ------------------------------------------------------------------------------

/// A shared-memory matrix descriptor (no swizzle): start address, leading and stride byte
/// offsets, each in units of 16 bytes (bits 0-13, 16-29, 32-45).
__device__ __forceinline__ uint64_t core_desc(const bf16* p, uint32_t lbo, uint32_t sbo) {
  return uint64_t{(smem_address(p) & 0x3FFFFu) >> 4} | uint64_t{(lbo & 0x3FFFFu) >> 4} << 16 |
         uint64_t{(sbo & 0x3FFFFu) >> 4} << 32;
}

__device__ __forceinline__ void wgmma_fence() {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
/// Makes this thread's shared-memory writes (cp.async included, once waited for) visible to
/// the async proxy through which wgmma reads its operands.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// wgmma(d, a, b, accumulate): d (64 x N fp32, the warp's 16 rows in C-fragment layout, d[j][e]) =
// A B (+ d when accumulate), A 64 x 16 from a descriptor (K-major) or from registers (the warp's
// 16 x 16 A fragment), B 16 x N from a descriptor, read MN-major when kTransB. Generated: the
// instruction names each of the N / 2 accumulator registers.
template <int kTransB>
__device__ __forceinline__ void wgmma(float (&d)[4][4], const uint32_t (&a)[4], uint64_t b,
                                      int accumulate) {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(kTransB));
#else
  __trap();
#endif
}

template <int kTransB>
__device__ __forceinline__ void wgmma(float (&d)[8][4], uint64_t a, uint64_t b, int accumulate) {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, %35;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(a), "l"(b), "r"(accumulate), "n"(kTransB));
#else
  __trap();
#endif
}

template <int kTransB>
__device__ __forceinline__ void wgmma(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b,
                                      int accumulate) {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(kTransB));
#else
  __trap();
#endif
}

template <int kTransB>
__device__ __forceinline__ void wgmma(float (&d)[16][4], uint64_t a, uint64_t b, int accumulate) {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
        "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
        "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]),
        "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),
        "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]),
        "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]),
        "+f"(d[15][2]), "+f"(d[15][3])
      : "l"(a), "l"(b), "r"(accumulate), "n"(kTransB));
#else
  __trap();
#endif
}

template <int kTransB>
__device__ __forceinline__ void wgmma(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b,
                                      int accumulate) {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
        "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
        "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]),
        "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),
        "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]),
        "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]),
        "+f"(d[15][2]), "+f"(d[15][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(kTransB));
#else
  __trap();
#endif
}
// ----- the forward -------------------------------------------------------------------------------

constexpr int kRowsPerWg = 64;  // rows (queries or keys) a warpgroup owns: wgmma's M

/// Orders the compiler not to move accesses of `r` across this point: after wgmma.wait_group,
/// the registers an asynchronous wgmma wrote are read only once it is complete.
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(r[j][e])::"memory");
  }
}

/// Waits until at most kPending of this warpgroup's committed wgmma groups are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

/// One thread's share of the copies (cp.async, 16 bytes each) of tiles of kRows rows of D bf16
/// into wgmma's core-matrix layout (8 x 8 blocks of 128 contiguous bytes: element (r, c) at
/// ((r / 8) (D / 8) + c / 8) 64 + (r % 8) 8 + c % 8; 8 consecutive lanes fill one block), with the
/// per-piece arithmetic done once: the rows and source offsets (row * ld + column) of the
/// thread's kPieces pieces. A streamed tile goes through the same object at every step (the
/// kernels here have registers to spare for it; the portable ones do not).
template <int D, int kRows, int kThreads>
struct CoreTileCopy {
  static_assert(kRows * D / 8 % kThreads == 0, "the pieces of a tile divide over the threads");
  static constexpr int kPieces = kRows * D / 8 / kThreads;
  int row[kPieces];
  int64_t src[kPieces];
  __device__ explicit CoreTileCopy(int64_t ld) {
    constexpr int kBlocksPerRow = D / 8;
#pragma unroll
    for (int j = 0; j < kPieces; ++j) {
      const int i = threadIdx.x + j * kThreads;
      row[j] = i / (8 * kBlocksPerRow) * 8 + i % 8;
      src[j] = row[j] * ld + i / 8 % kBlocksPerRow * 8;
    }
  }
  /// Starts copying rows [row0, row0 + kRows) of n rows at `from` (rows ld apart, the ld given to
  /// the constructor) into `to`; rows at or beyond n become zeros. The caller commits.
  __device__ __forceinline__ void operator()(bf16* to, const bf16* from, int row0, int n,
                                             int64_t ld) const {
    const bf16* base = from + row0 * ld;
#pragma unroll
    for (int j = 0; j < kPieces; ++j) {
      const bool valid = row0 + row[j] < n;
      cp_async_16(to + (threadIdx.x + j * kThreads) * 8, valid ? base + src[j] : from, valid);
    }
  }
};

/// Starts copying rows [row0, row0 + kRows) of n rows of D bf16 (`ld` apart) into dst in the
/// core-matrix layout (CoreTileCopy, for a tile copied once); rows at or beyond n become zeros.
/// The caller commits.
template <int D, int kRows, int kThreads>
__device__ __forceinline__ void load_core_tile_async(bf16* dst, const bf16* src, int row0, int n,
                                                     int64_t ld) {
  const CoreTileCopy<D, kRows, kThreads> copy(ld);
  copy(dst, src, row0, n, ld);
}

/// Grid (query tiles of 64 kW rows, B * NH): o and lse of one head (b, h) = blockIdx.y, as
/// flash_bf16_forward_kernel (kCausal: query i sees keys j <= i; else every query sees every one
/// of the nk keys), with kW warpgroups of 64 query rows and key tiles of kN keys in kStages = 3
/// buffers. A warpgroup overlaps its tensor cores with its softmax: it issues
/// S(kt + 1) = Q K(kt + 1)^T and O += P(kt) V(kt) together, computes the softmax of S(kt + 1)
/// while O += P(kt) V(kt) runs, and rescales O once that is done; key tile kt + 2 loads
/// meanwhile. (A warpgroup does not skip a key tile wholly after its rows: a branch around wgmma
/// that ptxas cannot prove uniform serializes the warpgroup's MMAs, C7520, which costs more.)
template <int D, bool kCausal, int kW, int kMinBlocks, int kN>
__global__ void __launch_bounds__(128 * kW, kMinBlocks)
    flash_bf16_sm90a_forward_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                                    const bf16* __restrict__ v, bf16* __restrict__ o,
                                    float* __restrict__ lse, int n, int nk, int nh, FlashLayout in,
                                    FlashLayout kv, FlashLayout out, float scale_log2) {
  constexpr int kThreads = 128 * kW, kRows = kRowsPerWg * kW, kStages = 3;
  constexpr int kKvElems = kN * D;
  constexpr uint32_t kRowGroup = 16 * D;  // bytes from one 8-row group to the next
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* sq = reinterpret_cast<bf16*>(smem_raw);  // [kRows x D], core-matrix layout
  bf16* sk = sq + kRows * D;                     // [kStages][kN x D]
  bf16* sv = sk + kStages * kKvElems;            // [kStages][kN x D]
  const int tile = gridDim.x - 1 - blockIdx.x;   // longest rows (most key tiles) start first
  const int64_t head = in.offset(blockIdx.y, nh), kvhead = kv.offset(blockIdx.y, nh);
  const int wg = threadIdx.x / 128, warp = threadIdx.x % 128 / 32, g = threadIdx.x % 32 / 4;
  const int row0 = tile * kRows + wg * kRowsPerWg + warp * 16;  // the warp's first query row
  const int last_key_tile = (nk - 1) / kN;
  const int last = kCausal ? min(((tile + 1) * kRows - 1) / kN, last_key_tile) : last_key_tile;
  const CoreTileCopy<D, kN, kThreads> copy_kv(kv.row);
  auto load_kv = [&](int kt) {  // key tile kt into buffer kt % kStages
    const int b = kt % kStages;
    copy_kv(sk + b * kKvElems, k + kvhead, kt * kN, nk, kv.row);
    copy_kv(sv + b * kKvElems, v + kvhead, kt * kN, nk, kv.row);
    cp_async_commit();
  };
  load_core_tile_async<D, kRows, kThreads>(sq, q + head, tile * kRows, n, in.row);
  load_kv(0);
  // Descriptors of the warpgroup's Q rows and of the first K and V buffers; a k-step of 16
  // columns of Q or K is 256 bytes further (16 in descriptor units), one of 16 keys of V 32 D
  // bytes, a buffer kKvElems bf16.
  const uint64_t dq = core_desc(sq + wg * kRowsPerWg * D, 128, kRowGroup);
  const uint64_t dk0 = core_desc(sk, 128, kRowGroup), dv0 = core_desc(sv, kRowGroup, 128);
  constexpr uint64_t kBufferStep = kKvElems * sizeof(bf16) / 16;
  float s[kN / 8][4];
  auto issue_s = [&](int kt) {  // S = Q K(kt)^T
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      wgmma<0>(s, dq + 16 * ks, dk0 + kt % kStages * kBufferStep + 16 * ks, ks > 0);
    }
    wgmma_commit();
  };
  float acc[D / 8][4] = {};      // unnormalized O of the warp's rows g and g + 8 (C layout)
  uint32_t p[kN / 16][4];        // P(kt) as the A fragments of O += P V
  auto issue_pv = [&](int kt) {  // O += P V(kt)
#pragma unroll
    for (int ks = 0; ks < kN / 16; ++ks) {
      wgmma<1>(acc, p[ks], dv0 + kt % kStages * kBufferStep + 2 * D * ks, 1);
    }
    wgmma_commit();
  };
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
  auto softmax = [&](int kt) {  // P(kt) from S(kt) in s, packed into p; alpha
    const int keys = kt * kN, rows = row0 + g;
    const bool masked_tile = kCausal ? keys + kN - 1 > row0 : kt == last && keys + kN > nk;
    softmax_step<kN>(s, m, l, alpha, scale_log2, masked_tile, [&](int key, int h) {
      return kCausal ? keys + key > rows + 8 * h : keys + key >= nk;
    });
  };
  auto pack = [&] {
#pragma unroll
    for (int ks = 0; ks < kN / 16; ++ks) a_fragment<kN>(p[ks], s, ks);
  };
  // Tile 0: S(0) and its softmax (O is still zero: nothing to rescale); tile 1 loads meanwhile.
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();
  if (last >= 1) load_kv(1);
  wgmma_fence();
  issue_s(0);
  wgmma_wait<0>();
  fence_operands(s);
  softmax(0);
  pack();
  for (int kt = 0; kt <= last; ++kt) {
    if (kt < last) {
      cp_async_wait<0>();  // key tile kt + 1
      fence_proxy_async();
      // Every warpgroup is done with iteration kt - 1, so with buffer (kt + 2) % kStages.
      __syncthreads();
      if (kt + 2 <= last) load_kv(kt + 2);
      wgmma_fence();
      issue_s(kt + 1);
      issue_pv(kt);
      wgmma_wait<1>();  // S(kt + 1) done; O += P(kt) V(kt) may still run
      fence_operands(s);
      softmax(kt + 1);
      wgmma_wait<0>();
      fence_operands(acc);
      rescale_rows<D>(acc, alpha);
      pack();
    } else {
      wgmma_fence();
      issue_pv(kt);
      wgmma_wait<0>();
      fence_operands(acc);
    }
  }
  softmax_finish<D>(acc, m, l, lse + int64_t{blockIdx.y} * n, row0, n);
  store_rows<D>(o + out.offset(blockIdx.y, nh), acc, row0, n, 1.f, out.row);
}

// ----- the backward ------------------------------------------------------------------------------
//
// The portable backward's two kernels (no atomics, deterministic), each warpgroup owning 64 rows:
// the dQ kernel 64 query rows (S = Q K^T and dP = dO V^T from shared memory, dQ += dS K with dS in
// registers and K read MN-major), the dK/dV kernel 64 keys (S^T = K Q^T and dP^T = V dO^T, then
// dV += P^T dO and dK += dS^T Q with P^T, dS^T in registers and dO, Q read MN-major). Streamed
// tiles hold kStream = 64 rows (keys for dQ, queries for dK/dV).

constexpr int kStream = 64;

/// Grid (query tiles of 64 kW rows, B * NH): dQ of the block's query rows and D = rowsum(dO o O)
/// of them (written to dsum for the dK/dV kernel), as flash_bf16_backward_dq_kernel.
template <int D, bool kCausal, int kW, int kMinBlocks>
__global__ void __launch_bounds__(128 * kW, kMinBlocks)
    flash_bf16_sm90a_backward_dq_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                                        const bf16* __restrict__ v, const bf16* __restrict__ dout,
                                        const bf16* __restrict__ o, const float* __restrict__ lse,
                                        float* __restrict__ dsum, bf16* __restrict__ dq, int n,
                                        int nk, int nh, FlashLayout in, FlashLayout kv,
                                        FlashLayout out, float scale_log2, float scale) {
  constexpr int kThreads = 128 * kW, kBlockRows = kRowsPerWg * kW;
  constexpr int kKvElems = kStream * D;
  constexpr uint32_t kRowGroup = 16 * D;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* sq = reinterpret_cast<bf16*>(smem_raw);  // [kBlockRows x D], core-matrix layout
  bf16* sdo = sq + kBlockRows * D;               // [kBlockRows x D]
  bf16* sk = sdo + kBlockRows * D;               // [2][kStream x D]
  bf16* sv = sk + 2 * kKvElems;                  // [2][kStream x D]
  const int tile = gridDim.x - 1 - blockIdx.x;
  const int64_t head = in.offset(blockIdx.y, nh), ohead = out.offset(blockIdx.y, nh);
  const bf16* kh = k + kv.offset(blockIdx.y, nh);
  const bf16* vh = v + kv.offset(blockIdx.y, nh);
  const CoreTileCopy<D, kStream, kThreads> copy_kv(kv.row);
  const int wg = threadIdx.x / 128, warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = tile * kBlockRows + wg * kRowsPerWg + warp * 16;  // the warp's first query row
  load_core_tile_async<D, kBlockRows, kThreads>(sq, q + head, tile * kBlockRows, n, in.row);
  load_core_tile_async<D, kBlockRows, kThreads>(sdo, dout + ohead, tile * kBlockRows, n, out.row);
  load_core_tile_async<D, kStream, kThreads>(sk, kh, 0, nk, kv.row);
  load_core_tile_async<D, kStream, kThreads>(sv, vh, 0, nk, kv.row);
  cp_async_commit();
  float lse2[2], drow[2];  // rows g, g+8: log-sum-exp in base 2, and D (while the tiles load)
  warp_rowdot<D>(drow, dout + ohead, o + ohead, dsum + int64_t{blockIdx.y} * n, row0, n, out.row);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + g + 8 * h;
    lse2[h] = row < n ? lse[int64_t{blockIdx.y} * n + row] * kLog2e : 0.f;
  }
  float acc[D / 8][4] = {};  // dQ * sqrt(hs) of rows g, g+8
  const int last_key_tile = (nk - 1) / kStream;
  const int last =
      kCausal ? min(((tile + 1) * kBlockRows - 1) / kStream, last_key_tile) : last_key_tile;
  const bf16* wq = sq + wg * kRowsPerWg * D;
  const bf16* wdo = sdo + wg * kRowsPerWg * D;
  for (int kt = 0; kt <= last; ++kt) {
    stage_next(kt < last, [&] {
      const int nb = (kt + 1) % 2;
      copy_kv(sk + nb * kKvElems, kh, (kt + 1) * kStream, nk, kv.row);
      copy_kv(sv + nb * kKvElems, vh, (kt + 1) * kStream, nk, kv.row);
    });
    fence_proxy_async();
    __syncthreads();
    const bf16* ck = sk + kt % 2 * kKvElems;
    const bf16* cv = sv + kt % 2 * kKvElems;
    float s[kStream / 8][4], dp[kStream / 8][4];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      wgmma<0>(s, core_desc(wq + ks * 128, 128, kRowGroup),
               core_desc(ck + ks * 128, 128, kRowGroup),
               ks > 0);  // S = Q K^T
      wgmma<0>(dp, core_desc(wdo + ks * 128, 128, kRowGroup),
               core_desc(cv + ks * 128, 128, kRowGroup), ks > 0);  // dP = dO V^T
    }
    wgmma_commit();
    wgmma_wait<0>();
    const int keys = kt * kStream;
    const bool masked_tile =
        kCausal ? keys + kStream - 1 > row0 : kt == last && keys + kStream > nk;
#pragma unroll
    for (int j = 0; j < kStream / 8; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int h = i / 2, key = keys + j * 8 + 2 * t + (i & 1);
        const bool masked = masked_tile && (kCausal ? key > row0 + g + 8 * h : key >= nk);
        const float p = masked ? 0.f : exp2_ftz(s[j][i] * scale_log2 - lse2[h]);  // P recomputed
        s[j][i] = p * (dp[j][i] - drow[h]);                                       // dS
      }
    }
    uint32_t ds[kStream / 16][4];
#pragma unroll
    for (int ks = 0; ks < kStream / 16; ++ks) a_fragment<kStream>(ds[ks], s, ks);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kStream / 16; ++ks) {  // dQ += dS K, 16 keys per step
      wgmma<1>(acc, ds[ks], core_desc(ck + ks * 16 * D, kRowGroup, 128), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();
  }
  store_rows<D>(dq + head, acc, row0, n, scale, in.row);
}

/// Grid (key tiles of 64 kW rows, B * NKV): dK and dV of the block's keys of key/value head
/// blockIdx.y, looping over the kv.group query heads that read it (in order: a deterministic
/// sum) and, for each, over the query tiles that see the keys (Q, dO, lse and D double-buffered
/// with cp.async), as flash_bf16_backward_dkdv_kernel.
template <int D, bool kCausal, int kW, int kMinBlocks>
__global__ void __launch_bounds__(128 * kW, kMinBlocks)
    flash_bf16_sm90a_backward_dkdv_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                                          const bf16* __restrict__ v, const bf16* __restrict__ dout,
                                          const float* __restrict__ lse,
                                          const float* __restrict__ dsum, bf16* __restrict__ dk,
                                          bf16* __restrict__ dv, int n, int nk, int nh,
                                          FlashLayout in, FlashLayout kv, FlashLayout out,
                                          float scale_log2, float scale) {
  constexpr int kThreads = 128 * kW, kBlockRows = kRowsPerWg * kW;
  constexpr int kQElems = kStream * D;
  constexpr uint32_t kRowGroup = 16 * D;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* sk = reinterpret_cast<bf16*>(smem_raw);             // [kBlockRows x D], core layout
  bf16* sv = sk + kBlockRows * D;                           // [kBlockRows x D]
  bf16* sq = sv + kBlockRows * D;                           // [2][kStream x D]
  bf16* sdo = sq + 2 * kQElems;                             // [2][kStream x D]
  float* sl = reinterpret_cast<float*>(sdo + 2 * kQElems);  // [2][kStream] lse (natural log)
  float* sd = sl + 2 * kStream;                             // [2][kStream] D
  const int tile = blockIdx.x;  // key tile; tile 0 is seen by every query tile: first
  const int group = static_cast<int>(kv.group), nkv = nh / group;
  const int bh0 =
      static_cast<int>(blockIdx.y) / nkv * nh + static_cast<int>(blockIdx.y) % nkv * group;
  const int wg = threadIdx.x / 128, warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = tile * kBlockRows + wg * kRowsPerWg + warp * 16;  // the warp's first key
  const int tiles = (n + kStream - 1) / kStream;                     // query tiles
  // Step it: query head bh0 + it / span, query tile qt0 + it % span (causal: from the first
  // query tile that reaches the block's first key; full: all).
  const int qt0 = kCausal ? tile * kBlockRows / kStream : 0, span = tiles - qt0;
  const int steps = group * span;
  const CoreTileCopy<D, kStream, kThreads> copy_q(in.row), copy_do(out.row);
  auto stage = [&](int it) {
    const int bh = bh0 + it / span, qt = qt0 + it % span, b = it % 2;
    copy_q(sq + b * kQElems, q + in.offset(bh, nh), qt * kStream, n, in.row);
    copy_do(sdo + b * kQElems, dout + out.offset(bh, nh), qt * kStream, n, out.row);
    if (threadIdx.x < 2 * kStream) {
      const int i = threadIdx.x % kStream, row = qt * kStream + i;
      const float* src = (threadIdx.x < kStream ? lse : dsum) + int64_t{bh} * n;
      cp_async_4((threadIdx.x < kStream ? sl : sd) + b * kStream + i, row < n ? src + row : src,
                 row < n);
    }
  };
  load_core_tile_async<D, kBlockRows, kThreads>(sk, k + kv.offset(bh0, nh), tile * kBlockRows, nk,
                                                kv.row);
  load_core_tile_async<D, kBlockRows, kThreads>(sv, v + kv.offset(bh0, nh), tile * kBlockRows, nk,
                                                kv.row);
  stage(0);
  cp_async_commit();
  float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};  // keys g, g+8 of the warp
  const bf16* wk = sk + wg * kRowsPerWg * D;
  const bf16* wv = sv + wg * kRowsPerWg * D;
  for (int it = 0; it < steps; ++it) {
    const int qt = qt0 + it % span;
    stage_next(it + 1 < steps, [&] { stage(it + 1); });
    fence_proxy_async();
    __syncthreads();
    const int b = it % 2;
    const bf16* cq = sq + b * kQElems;
    const bf16* cdo = sdo + b * kQElems;
    const float* cl = sl + b * kStream;
    const float* cd = sd + b * kStream;
    float st[kStream / 8][4], dpt[kStream / 8][4];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      wgmma<0>(st, core_desc(wk + ks * 128, 128, kRowGroup),
               core_desc(cq + ks * 128, 128, kRowGroup), ks > 0);  // S^T = K Q^T
      wgmma<0>(dpt, core_desc(wv + ks * 128, 128, kRowGroup),
               core_desc(cdo + ks * 128, 128, kRowGroup), ks > 0);  // dP^T = V dO^T
    }
    wgmma_commit();
    wgmma_wait<0>();
    const int queries = qt * kStream;
    const bool masked_tile = kCausal && queries < row0 + 15;  // a query before a key of the warp
#pragma unroll
    for (int j = 0; j < kStream / 8; ++j) {
      const int col = j * 8 + 2 * t;  // queries col, col + 1 of the tile
      const float2 lj = *reinterpret_cast<const float2*>(cl + col);
      const float2 dj = *reinterpret_cast<const float2*>(cd + col);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int h = i / 2, e = i & 1;
        const bool masked = masked_tile && row0 + g + 8 * h > queries + col + e;
        const float p = masked ? 0.f : exp2_ftz(st[j][i] * scale_log2 - (e ? lj.y : lj.x) * kLog2e);
        st[j][i] = p;                                     // P^T
        dpt[j][i] = p * (dpt[j][i] - (e ? dj.y : dj.x));  // dS^T
      }
    }
    uint32_t pa[kStream / 16][4], dsa[kStream / 16][4];
#pragma unroll
    for (int ks = 0; ks < kStream / 16; ++ks) {
      a_fragment<kStream>(pa[ks], st, ks);
      a_fragment<kStream>(dsa[ks], dpt, ks);
    }
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kStream / 16; ++ks) {  // 16 queries per step
      wgmma<1>(dv_acc, pa[ks], core_desc(cdo + ks * 16 * D, kRowGroup, 128), 1);  // dV += P^T dO
      wgmma<1>(dk_acc, dsa[ks], core_desc(cq + ks * 16 * D, kRowGroup, 128), 1);  // dK += dS^T Q
    }
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();
  }
  store_rows<D>(dk + kv.offset(bh0, nh), dk_acc, row0, nk, scale, kv.row);
  store_rows<D>(dv + kv.offset(bh0, nh), dv_acc, row0, nk, 1.f, kv.row);
}

/// Dynamic shared memory `bytes` allowed for kKernel on device `dev` (chapter 06's
/// allow_dynamic_shared_memory), else a tt::Error.
template <auto kKernel>
void allow_shared(int dev, int bytes) {
  TT_CHECK(allow_dynamic_shared_memory(reinterpret_cast<const void*>(kKernel),
                                       static_cast<std::size_t>(bytes), dev),
           "cuda::flash_attention_bf16 (sm_90a): ", bytes,
           " bytes of shared memory per block, device ", dev, " allows ",
           max_shared_memory_optin(dev));
}

/// Calls f.template operator()<D>() for hs 32, 64 or 128 (else a tt::Error).
template <typename F>
void dispatch_hs(int hs, F&& f) {
  switch (hs) {
    case 32:
      f.template operator()<32>();
      break;
    case 64:
      f.template operator()<64>();
      break;
    case 128:
      f.template operator()<128>();
      break;
    default:
      TT_THROW("cuda::flash_attention_bf16 (sm_90a): hs = ", hs, " is not 32, 64 or 128");
  }
}

/// The backward's configuration: two warpgroups a block, one block a multiprocessor (dK/dV keeps
/// 2 x 64 fp32 accumulators a thread at hs 128; one warpgroup a block measured slower).
template <bool kCausal>
void launch_backward(const FlashSm90aBackward& f) {
  constexpr int kW = 2, kMinBlocks = 1, kThreads = 128 * kW, kBlockRows = kRowsPerWg * kW;
  dispatch_hs(f.hs, [&]<int D>() {
    constexpr auto dqk = flash_bf16_sm90a_backward_dq_kernel<D, kCausal, kW, kMinBlocks>;
    constexpr int smem_q = (2 * kBlockRows + 4 * kStream) * D * static_cast<int>(sizeof(bf16));
    allow_shared<dqk>(f.device, smem_q);
    const dim3 grid((f.n + kBlockRows - 1) / kBlockRows, f.bh);
    dqk<<<grid, kThreads, smem_q, f.stream>>>(f.q, f.k, f.v, f.dout, f.o, f.lse, f.dsum, f.dq, f.n,
                                              f.nk, f.nh, f.in, f.kv, f.out, f.scale_log2, f.scale);
    TT_CUDA_CHECK_LAUNCH("flash_bf16_sm90a_backward_dq_kernel");
    constexpr auto dkdv = flash_bf16_sm90a_backward_dkdv_kernel<D, kCausal, kW, kMinBlocks>;
    constexpr int smem_kv = (2 * kBlockRows + 4 * kStream) * D * static_cast<int>(sizeof(bf16)) +
                            4 * kStream * static_cast<int>(sizeof(float));
    allow_shared<dkdv>(f.device, smem_kv);
    const dim3 grid_kv((f.nk + kBlockRows - 1) / kBlockRows, f.bkv);
    dkdv<<<grid_kv, kThreads, smem_kv, f.stream>>>(f.q, f.k, f.v, f.dout, f.lse, f.dsum, f.dk, f.dv,
                                                   f.n, f.nk, f.nh, f.in, f.kv, f.out, f.scale_log2,
                                                   f.scale);
    TT_CUDA_CHECK_LAUNCH("flash_bf16_sm90a_backward_dkdv_kernel");
  });
}

/// The forward's configuration, measured on an H200 (B8, T = 1024-4096, README): two
/// warpgroups a block and 64 keys a tile; two blocks a multiprocessor up to hs 64 (128 registers
/// a thread), one at hs 128, whose 64 fp32 accumulators a thread spill under that cap.
template <bool kCausal>
void launch_forward(const FlashSm90aForward& f) {
  constexpr int kW = 2, kN = 64, kThreads = 128 * kW, kBlockRows = kRowsPerWg * kW;
  dispatch_hs(f.hs, [&]<int D>() {
    constexpr int kMinBlocks = D <= 64 ? 2 : 1;
    constexpr auto kernel = flash_bf16_sm90a_forward_kernel<D, kCausal, kW, kMinBlocks, kN>;
    constexpr int smem = (kBlockRows + 2 * 3 * kN) * D * static_cast<int>(sizeof(bf16));
    static_assert(smem <= 227 * 1024, "a Hopper block has at most 227 KB of shared memory");
    allow_shared<kernel>(f.device, smem);
    const dim3 grid((f.n + kBlockRows - 1) / kBlockRows, f.bh);
    kernel<<<grid, kThreads, smem, f.stream>>>(f.q, f.k, f.v, f.o, f.lse, f.n, f.nk, f.nh, f.in,
                                               f.kv, f.out, f.scale_log2);
    TT_CUDA_CHECK_LAUNCH("flash_bf16_sm90a_forward_kernel");
  });
}

}  // namespace

void flash_bf16_sm90a_backward(const FlashSm90aBackward& f, bool causal) {
  if (causal) {
    launch_backward<true>(f);
  } else {
    launch_backward<false>(f);
  }
}

void flash_bf16_sm90a_forward(const FlashSm90aForward& f, bool causal) {
  if (causal) {
    launch_forward<true>(f);
  } else {
    launch_forward<false>(f);
  }
}

}  // namespace tt::cuda
