// Chapter 15's bfloat16 decode projections at TinyLlama-1.1B's shape (C 2048, 32 query and 4
// key/value heads of 64, FFN 5632, V 32000, 22 layers), batch M rows, the two ways
// Llama::run_bf16 can compute them:
//
//   decode_proj/{gemv,lt}/<proj>/M   one projection of every layer, back to back (22 different
//                                    weight matrices, so each is read from DRAM as in a decode
//                                    step; the head: 4 copies of its 131 MB table)
//   decode_layers/{gemv,lt}/M        a step's projections in order: per layer qkv, o, gate/up,
//                                    down (22 layers), then the head: attention left out
//   decode_attn/{fused,two}/n        a step's attention over 22 layers' caches of n positions
//                                    (one row; 32 query and 4 key/value heads): "fused" =
//                                    llama_decode_attention, "two" = llama_rope_append then
//                                    kv_cache_attend, the launches it replaces
//   decode_step/{one,many}/n         a whole decode step of one row (22 layers and the head,
//                                    caches of 2,048 positions holding n): "one" =
//                                    llama_decode_step, "many" = the launches it replaces (the
//                                    four GEMVs of each layer, llama_decode_attention, the head);
//                                    GB/s counts the caches' n rows too
//   decode_step_7b/{one,many}/n      the same at LLaMA-2-7B's shape (C 4096, 32 layers, 32
//                                    heads of 128 without grouping, FFN 11008: 13.5 GB of
//                                    weights)
//   copy/1GiB                        the device's copy bandwidth (bytes read + written), the
//                                    number tt_generate --copy-bandwidth compares with
//
// M = 1, 4, 8 (the GEMV takes at most 4 rows: at 8 it declines and the step uses cuBLASLt).
// gemv: "llama_decode_gemv" (the prologue, RMSNorm or SwiGLU, inside the GEMV; residual added in
// its epilogue). lt: the prologue's own kernel (RMSNorm, SwiGLU) then chapter 10's cuBLASLt GEMM
// ("matmul_lt_gemm", residual as beta = 1). <proj>: qkv (N 2560, K 2048, RMSNorm), o (2048 x
// 2048, + residual), gate_up (11264 x 2048, RMSNorm), down (2048 x 5632, SwiGLU of the [M, 11264]
// gate/up output, + residual), head (32000 x 2048, RMSNorm, float32 logits).
//
// Each benchmark captures its launches in one CUDA graph (chapter 06's CudaGraph, as the
// decode step runs) and times replays with CUDA events. GB/s = weight bytes read per replay /
// time (the activations, < 0.1% of the bytes, are not counted): compare it with the device's
// copy bandwidth (tt_generate --copy-bandwidth). CUDA only; a GEMV that declines a shape (M * K
// over its shared memory) reports "gemv declines".
//
//   build/bin/bench_decode [--benchmark_filter=decode_layers]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_common.h"
#include "tt/dispatcher.h"
#include "tt/llama.h"
#include "tt/llama_ops.h"
#include "tt/ops_elementwise.h"

namespace {

using tt::Device;
using tt::DType;
using tt::Tensor;
using tt::llama::GemvPrologue;

constexpr int64_t kC = 2048, kF = 5632, kV = 32000;
[[maybe_unused]] constexpr int64_t kLayers = 22;
[[maybe_unused]] constexpr double kEps = 1e-5;

struct Projection {
  const char* name;
  int64_t N, K;
  GemvPrologue prologue;
  bool residual;  // out += (the residual stream)
  bool logits;    // float32 out
};

const Projection kQkv{"qkv", 2560, kC, GemvPrologue::kRmsNorm, false, false};
const Projection kO{"o", kC, kC, GemvPrologue::kNone, true, false};
const Projection kGateUp{"gate_up", 2 * kF, kC, GemvPrologue::kRmsNorm, false, false};
const Projection kDown{"down", kC, kF, GemvPrologue::kSwiglu, true, false};
const Projection kHead{"head", kV, kC, GemvPrologue::kRmsNorm, false, true};

#if TT_WITH_CUDA
// A projection's tensors: `copies` weight matrices, the input rows a (after the previous op),
// the norm weight and the output.
struct Operands {
  std::vector<Tensor> w;
  Tensor a, g, out;
};

Operands make_operands(const Projection& p, int64_t M, int copies, Device device) {
  const tt::TensorOptions bf16{DType::kBFloat16, device};
  Operands o;
  // Weights of a trained model's size (|w| < 0.04; the values do not change the time), one set
  // of values copied into distinct matrices on the device (filling each on the host is slow).
  const Tensor first = tt::mul(tt::bench::filled({p.N, p.K}, 10, device), 0.02).to(bf16.dtype);
  for (int i = 0; i < copies; ++i) {
    Tensor w = i == 0 ? first : tt::empty({p.N, p.K}, bf16);
    if (i > 0) w.copy_(first);
    o.w.push_back(w);
  }
  const int64_t in = p.prologue == GemvPrologue::kSwiglu ? 2 * p.K : p.K;
  o.a = tt::bench::filled({M, in}, 1, device).to(DType::kBFloat16);
  o.g = tt::bench::filled({p.K}, 2, device).to(DType::kBFloat16);
  o.out = tt::zeros({M, p.N}, {p.logits ? DType::kFloat32 : DType::kBFloat16, device});
  return o;
}

// out (+)= prologue(a) w^T: the decode GEMV itself ("llama_decode_gemv", at any M it takes;
// false when it declines), or the model's projection with the GEMV off (llama::project_bf16:
// the prologue's kernel, then cuBLASLt).
bool project(bool gemv, const Projection& p, const Operands& o, const Tensor& w) {
  if (gemv) {
    return tt::call_kernel<tt::llama::DecodeGemvKernel>("llama_decode_gemv", w.device(), o.out, o.a,
                                                        w, o.g, kEps, p.prologue, p.residual);
  }
  const bool was_on = tt::llama::decode_gemv_enabled();
  tt::llama::set_decode_gemv(false);
  tt::llama::project_bf16(o.out, o.a, w, p.prologue, o.g, kEps, p.residual);
  tt::llama::set_decode_gemv(was_on);
  return true;
}

// Captures `work` in a CUDA graph and times its replays (GB/s from `bytes` a replay); skips
// with `why` when work returns false.
void time_graph(benchmark::State& state, Device device, double bytes,
                const std::function<bool()>& work) {
  if (!work()) {  // eagerly once: the GEMV's decision, cuBLASLt's plan cache, allocations
    state.SkipWithError("gemv declines");
    return;
  }
  tt::cuda::CudaGraph graph(device.index);
  graph.capture([&] { (void)work(); });
  tt::bench::measure(state, device, bytes, [&] { graph.replay(); });
}
#endif

void proj_bench(benchmark::State& state, Device device, bool gemv, const Projection& p, int64_t M) {
#if TT_WITH_CUDA
  const int copies = p.logits ? 4 : static_cast<int>(kLayers);
  const Operands o = make_operands(p, M, copies, device);
  time_graph(state, device, static_cast<double>(copies) * p.N * p.K * 2, [&] {
    bool ok = true;
    for (const Tensor& w : o.w) ok = ok && project(gemv, p, o, w);
    return ok;
  });
#else
  (void)state, (void)device, (void)gemv, (void)p, (void)M;
#endif
}

void layers_bench(benchmark::State& state, Device device, bool gemv, int64_t M) {
#if TT_WITH_CUDA
  const std::vector<const Projection*> per_layer = {&kQkv, &kO, &kGateUp, &kDown};
  std::vector<Operands> ops;
  double bytes = 0;
  for (const Projection* p : per_layer) {
    ops.push_back(make_operands(*p, M, static_cast<int>(kLayers), device));
    bytes += static_cast<double>(kLayers) * p->N * p->K * 2;
  }
  const Operands head = make_operands(kHead, M, 1, device);
  bytes += static_cast<double>(kHead.N) * kHead.K * 2;
  time_graph(state, device, bytes, [&] {
    bool ok = true;
    for (int64_t l = 0; l < kLayers; ++l) {
      for (std::size_t i = 0; i < per_layer.size(); ++i) {
        ok = ok && project(gemv, *per_layer[i], ops[i], ops[i].w[static_cast<std::size_t>(l)]);
      }
    }
    return ok && project(gemv, kHead, head, head.w[0]);
  });
#else
  (void)state, (void)device, (void)gemv, (void)M;
#endif
}

void attn_bench(benchmark::State& state, Device device, bool fused, int64_t n) {
#if TT_WITH_CUDA
  constexpr int64_t kNH = 32, kNKV = 4, kHs = 64, kTmax = 2048, kW = (kNH + 2 * kNKV) * kHs;
  const tt::TensorOptions bf16{DType::kBFloat16, device};
  const tt::RopeTables tables = tt::rope_tables(kTmax, kHs, 10000.0, {}, {DType::kFloat32, device});
  std::vector<Tensor> kc, vc;
  for (int64_t l = 0; l < kLayers; ++l) {
    kc.push_back(tt::bench::filled({1, kNKV, kTmax, kHs}, 3, device).to(DType::kBFloat16));
    vc.push_back(tt::bench::filled({1, kNKV, kTmax, kHs}, 4, device).to(DType::kBFloat16));
  }
  const Tensor qkv = tt::bench::filled({1, 1, kW}, 5, device).to(DType::kBFloat16);
  const Tensor pos = tt::full({1, 1}, static_cast<double>(n - 1), {DType::kInt64, device});
  const Tensor start = tt::full({1}, static_cast<double>(n - 1), {DType::kInt64, device});
  const Tensor counters = tt::zeros({kNKV}, {DType::kInt64, device});
  const Tensor q = tt::empty({1, kNH, 1, kHs}, bf16), y = tt::empty({1, kNH, 1, kHs}, bf16);
  // Bytes: the keys and values attended (n rows of each layer's 4 heads), read once.
  const double bytes = 2.0 * kLayers * kNKV * static_cast<double>(n) * kHs * 2;
  time_graph(state, device, bytes, [&] {
    bool ok = true;
    for (std::size_t l = 0; l < kc.size(); ++l) {
      if (fused) {
        ok = ok && tt::call_kernel<tt::llama::DecodeAttentionKernel>(
                       "llama_decode_attention", device, y, qkv, tables.cos, tables.sin, pos, start,
                       kc[l], vc[l], counters);
      } else {
        tt::call_kernel<tt::llama::RopeAppendKernel>(
            "llama_rope_append", device, q, qkv, tables.cos, tables.sin, pos, start, kc[l], vc[l]);
        tt::call_kernel<tt::llama::KvCacheAttendKernel>("kv_cache_attend", device, y, q, Tensor(),
                                                        Tensor(), kc[l], vc[l], start);
      }
    }
    return ok;
  });
#else
  (void)state, (void)device, (void)fused, (void)n;
#endif
}

// A LLaMA shape of the decode_step rows: TinyLlama-1.1B's (the chapter's) and LLaMA-2-7B's.
struct DecodeShape {
  int64_t C, F, V, layers, NH, NKV, hs;
};
const DecodeShape kTinyLlama{kC, kF, kV, kLayers, 32, 4, 64};
const DecodeShape kLlama7b{4096, 11008, 32000, 32, 32, 32, 128};

void step_bench(benchmark::State& state, Device device, const DecodeShape& sh, bool one,
                int64_t n) {
#if TT_WITH_CUDA
  constexpr int64_t kTmax = 2048;
  const int64_t kNH = sh.NH, kNKV = sh.NKV, kHs = sh.hs, kW = (kNH + 2 * kNKV) * kHs;
  const int64_t L = sh.layers;
  const tt::TensorOptions bf16{DType::kBFloat16, device};
  const Projection pq{"qkv", kW, sh.C, GemvPrologue::kRmsNorm, false, false};
  const Projection po{"o", sh.C, kNH * kHs, GemvPrologue::kNone, true, false};
  const Projection pgu{"gate_up", 2 * sh.F, sh.C, GemvPrologue::kRmsNorm, false, false};
  const Projection pd{"down", sh.C, sh.F, GemvPrologue::kSwiglu, true, false};
  const Projection ph{"head", sh.V, sh.C, GemvPrologue::kRmsNorm, false, true};
  const Operands qkv = make_operands(pq, 1, static_cast<int>(L), device);
  const Operands o = make_operands(po, 1, static_cast<int>(L), device);
  const Operands gate_up = make_operands(pgu, 1, static_cast<int>(L), device);
  const Operands down = make_operands(pd, 1, static_cast<int>(L), device);
  const Operands head = make_operands(ph, 1, 1, device);
  const Tensor& norm = qkv.g;  // every norm weight [C]
  std::vector<Tensor> weights, kc, vc;
  for (std::size_t l = 0; l < static_cast<std::size_t>(L); ++l) {
    weights.insert(weights.end(), {qkv.w[l], norm, o.w[l], norm, gate_up.w[l], down.w[l]});
    kc.push_back(tt::bench::filled({1, kNKV, kTmax, kHs}, 3, device).to(DType::kBFloat16));
    vc.push_back(tt::bench::filled({1, kNKV, kTmax, kHs}, 4, device).to(DType::kBFloat16));
  }
  const tt::RopeTables tables = tt::rope_tables(kTmax, kHs, 10000.0, {}, {DType::kFloat32, device});
  const Tensor pos = tt::full({1, 1}, static_cast<double>(n - 1), {DType::kInt64, device});
  const Tensor start = tt::full({1}, static_cast<double>(n - 1), {DType::kInt64, device});
  const Tensor x0 = tt::bench::filled({1, sh.C}, 6, device).to(DType::kBFloat16);
  const Tensor x = tt::empty({1, sh.C}, bf16);
  const Tensor logits = tt::empty({1, sh.V}, {DType::kFloat32, device});
  const Tensor packed = tt::empty({1, 1, kW}, bf16), y = tt::empty({1, kNH, 1, kHs}, bf16);
  const Tensor gu = tt::empty({1, 2 * sh.F}, bf16),
               counters = tt::zeros({kNKV}, {DType::kInt64, device});
  // Bytes: the weights read once, and the caches' n rows.
  double bytes = 2.0 * static_cast<double>(sh.V * sh.C);
  for (const Projection* p : {&pq, &po, &pgu, &pd}) bytes += 2.0 * L * p->N * p->K;
  bytes += 2.0 * L * kNKV * static_cast<double>(n) * kHs * 2;
  const auto gemv = [&](const Tensor& out, const Tensor& a, const Tensor& w, GemvPrologue pr,
                        bool acc) {
    return tt::call_kernel<tt::llama::DecodeGemvKernel>("llama_decode_gemv", device, out, a, w,
                                                        norm, kEps, pr, acc);
  };
  const auto work = [&] {
    x.copy_(x0);  // the embedded token (each replay starts from the same residual stream)
    if (one) {
      return tt::call_kernel<tt::llama::DecodeStepKernel>(
          "llama_decode_step", device, logits, x, weights, norm, head.w[0], kEps, tables.cos,
          tables.sin, pos, start, kc, vc);
    }
    bool ok = true;
    for (std::size_t l = 0; l < static_cast<std::size_t>(L); ++l) {
      ok = ok && gemv(packed.view({1, kW}), x, qkv.w[l], GemvPrologue::kRmsNorm, false);
      ok = ok && tt::call_kernel<tt::llama::DecodeAttentionKernel>(
                     "llama_decode_attention", device, y, packed, tables.cos, tables.sin, pos,
                     start, kc[l], vc[l], counters);
      ok = ok && gemv(x, y.view({1, kNH * kHs}), o.w[l], GemvPrologue::kNone, true);
      ok = ok && gemv(gu, x, gate_up.w[l], GemvPrologue::kRmsNorm, false);
      ok = ok && gemv(x, gu, down.w[l], GemvPrologue::kSwiglu, true);
    }
    return ok && gemv(logits, x, head.w[0], GemvPrologue::kRmsNorm, false);
  };
  // With TT_DECODE_STEP_TRACE set, three eager steps first: each prints its trace (the first
  // with cold caches).
  if (one && std::getenv("TT_DECODE_STEP_TRACE") != nullptr) {
    for (int i = 0; i < 3; ++i) (void)work();
  }
  time_graph(state, device, bytes, work);
#else
  (void)state, (void)device, (void)sh, (void)one, (void)n;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const Device cuda = Device::cuda();
  // The device's copy bandwidth in the same process, as tt_generate --copy-bandwidth measures
  // it: 1 GiB copied device to device, GB/s = bytes read + written / time.
  tt::bench::register_on("copy/1GiB", cuda, [](benchmark::State& s, Device d) {
    const Tensor src = tt::zeros({int64_t{1} << 28}, {DType::kFloat32, d});
    const Tensor dst = tt::empty({int64_t{1} << 28}, {DType::kFloat32, d});
    tt::bench::measure(s, d, 2.0 * (int64_t{1} << 30), [&] { dst.copy_(src); });
  });
  for (int64_t n : {130, 512, 2048}) {
    for (bool fused : {true, false}) {
      tt::bench::register_on(
          std::string("decode_attn/") + (fused ? "fused" : "two") + "/" + std::to_string(n), cuda,
          [fused, n](benchmark::State& s, Device d) { attn_bench(s, d, fused, n); });
    }
  }
  for (const DecodeShape* sh : {&kTinyLlama, &kLlama7b}) {
    for (int64_t n : {130, 1600}) {
      for (bool one : {true, false}) {
        tt::bench::register_on(
            std::string(sh == &kLlama7b ? "decode_step_7b/" : "decode_step/") +
                (one ? "one" : "many") + "/" + std::to_string(n),
            cuda, [sh, one, n](benchmark::State& s, Device d) { step_bench(s, d, *sh, one, n); });
      }
    }
  }
  for (int64_t M : {1, 4, 8}) {
    for (bool gemv : {true, false}) {
      const std::string variant = gemv ? "gemv" : "lt";
      tt::bench::register_on(
          "decode_layers/" + variant + "/" + std::to_string(M), cuda,
          [gemv, M](benchmark::State& s, Device d) { layers_bench(s, d, gemv, M); });
      for (const Projection* p : {&kQkv, &kO, &kGateUp, &kDown, &kHead}) {
        tt::bench::register_on(
            "decode_proj/" + variant + "/" + p->name + "/" + std::to_string(M), cuda,
            [gemv, p, M](benchmark::State& s, Device d) { proj_bench(s, d, gemv, *p, M); });
      }
    }
  }
  return tt::bench::run_main(argc, argv, "bench_decode");
}
