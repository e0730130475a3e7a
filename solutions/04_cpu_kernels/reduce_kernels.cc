// Chapter 04 exercises ch04.3 and ch04.4: the CPU reduction kernels (sum over any dims in fixed
// blocks, max over one dim with its index). ReduceSplit, the geometry both use, is given.
#include <cmath>
#include <optional>
#include <type_traits>
#include <vector>

#include "tt/dispatcher.h"
#include "tt/ops_reduce.h"
#include "tt/parallel.h"
#include "tt/todo.h"

namespace tt::cpu {
namespace {

/// Elements of work per parallel chunk.
constexpr int64_t kReduceGrain = 1 << 15;
/// Outputs per task of sum's column path (rows outer, outputs inner): 64 columns make 6 tasks
/// of a [2048, 384] bias gradient, where 512 made one (one thread). The columns are independent,
/// so this choice changes no bit.
constexpr int64_t kReduceCols = 64;

/// Accumulator type: double for floating inputs (float32 sums keep ~16 digits), int64 for int64.
template <typename T>
using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

/// The dims of `in` split into those `out` keeps (out.size(d) == in.size(d)) and those it
/// reduces (out.size(d) == 1). Output j (row-major over the kept dims) sums the elements at
/// kept_offset(j) + reduced_offset(r) for r = 0 .. n_red-1 (row-major over the reduced dims).
struct ReduceSplit {
  Shape kept_shape, red_shape;
  Strides kept_strides, red_strides;
  int64_t n_out = 1;                ///< number of outputs
  int64_t n_red = 1;                ///< number of elements reduced into each output
  std::optional<int64_t> red_step;  ///< set when reduced_offset(r) == r * red_step

  ReduceSplit(const Tensor& out, const Tensor& in) {
    for (int64_t d = 0; d < in.dim(); ++d) {
      const bool reduced = out.size(d) != in.size(d);
      (reduced ? red_shape : kept_shape).push_back(in.size(d));
      (reduced ? red_strides : kept_strides).push_back(in.stride(d));
    }
    n_out = shape_numel(kept_shape);
    n_red = shape_numel(red_shape);
    // Chapter 01's view logic tells whether the reduced dims collapse into one strided run.
    if (auto st = compute_view_strides(red_shape, red_strides, {n_red})) red_step = (*st)[0];
  }
  /// True when output j starts at in's element j (the kept dims collapse to one unit-stride run).
  bool kept_unit_stride() const {
    const auto st = compute_view_strides(kept_shape, kept_strides, {n_out});
    return st && (n_out == 1 || (*st)[0] == 1);
  }
  /// Offsets (from in's element 0) of outputs [begin, begin+count) into off[0..count).
  void kept_offsets(int64_t begin, int64_t count, int64_t* off) const {
    std::vector<int64_t> unused(static_cast<std::size_t>(count));
    strided_offsets(kept_shape, kept_strides, kept_strides, begin, count, off, unused.data());
  }
  /// Offsets of reduced elements [begin, begin+count) into off[0..count).
  void reduced_offsets(int64_t begin, int64_t count, int64_t* off) const {
    if (red_step) {
      for (int64_t i = 0; i < count; ++i) off[i] = (begin + i) * *red_step;
      return;
    }
    std::vector<int64_t> unused(static_cast<std::size_t>(count));
    strided_offsets(red_shape, red_strides, red_strides, begin, count, off, unused.data());
  }
};

}  // namespace

void sum(const Tensor& out, const Tensor& in) {
#if TT_SOLUTION
  dispatch_dtype(in.dtype(), "sum", [&]<typename T>() {
    const ReduceSplit split(out, in);
    const T* x = static_cast<const T*>(in.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    if (split.n_out == 0) return;
    // Task t = (output t / nblk, block t % nblk). The blocks depend only on the shapes.
    const int64_t nblk = std::max<int64_t>(1, (split.n_red + kReduceBlock - 1) / kReduceBlock);
    const int64_t block_len = std::min(split.n_red, kReduceBlock);
    std::vector<Acc<T>> partial(static_cast<std::size_t>(split.n_out * nblk));
    if (split.red_step && split.kept_unit_stride()) {
      // Outputs side by side in memory, reduced elements one strided run (e.g. a bias gradient:
      // the sum over the rows of [N, C]). Same blocks and the same order per output as below,
      // but rows outer and outputs inner: contiguous loads that vectorize.
      const int64_t step = *split.red_step;
      const int64_t ncol = (split.n_out + kReduceCols - 1) / kReduceCols;
      parallel_for(0, ncol * nblk, 1, [&](int64_t tb, int64_t te) {
        Acc<T> acc[kReduceCols];
        for (int64_t t = tb; t < te; ++t) {
          const int64_t j0 = (t / nblk) * kReduceCols, b = t % nblk;
          const int64_t cols = std::min(kReduceCols, split.n_out - j0);
          const int64_t r0 = b * kReduceBlock, len = std::min(kReduceBlock, split.n_red - r0);
          std::fill(acc, acc + cols, Acc<T>(0));
          for (int64_t r = r0; r < r0 + len; ++r) {
            const T* row = x + r * step + j0;
            for (int64_t j = 0; j < cols; ++j) acc[j] += static_cast<Acc<T>>(row[j]);
          }
          for (int64_t j = 0; j < cols; ++j) partial[(j0 + j) * nblk + b] = acc[j];
        }
      });
    } else {
      const int64_t grain = std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(1, block_len));
      parallel_for(0, split.n_out * nblk, grain, [&](int64_t tb, int64_t te) {
        std::vector<int64_t> roff(static_cast<std::size_t>(block_len));
        const int64_t o0 = tb / nblk, o1 = (te - 1) / nblk;
        std::vector<int64_t> base(static_cast<std::size_t>(o1 - o0 + 1));
        split.kept_offsets(o0, o1 - o0 + 1, base.data());
        for (int64_t t = tb; t < te; ++t) {
          const int64_t b = t % nblk;
          const int64_t r0 = b * kReduceBlock;
          const int64_t len = std::min(kReduceBlock, split.n_red - r0);
          split.reduced_offsets(r0, len, roff.data());
          const T* xo = x + base[t / nblk - o0];
          Acc<T> acc = 0;
          for (int64_t r = 0; r < len; ++r) acc += static_cast<Acc<T>>(xo[roff[r]]);
          partial[t] = acc;
        }
      });
    }
    // Combine the block sums of each output in block order.
    for (int64_t j = 0; j < split.n_out; ++j) {
      Acc<T> acc = 0;
      for (int64_t b = 0; b < nblk; ++b) acc += partial[j * nblk + b];
      o[j] = static_cast<T>(acc);
    }
  });
#else
  TT_TODO(
      "ch04.3",
      "cpu::sum: out[j] = the sum of the elements of in reduced into j (out: in's shape with size 1 on the reduced dims; any strides) in double (int64 for int64), in kReduceBlock blocks added in order: the same bits for any thread count and layout");
#endif
}

void max_dim(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) {
#if TT_SOLUTION
  dispatch_dtype(in.dtype(), "max_dim", [&]<typename T>() {
    const ReduceSplit split(values, in);
    const int64_t n = in.size(dim), step = in.stride(dim);
    const T* x = static_cast<const T*>(in.data_ptr());
    T* v = static_cast<T*>(values.data_ptr());
    int64_t* idx = static_cast<int64_t*>(indices.data_ptr());
    const int64_t grain = std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(1, n));
    parallel_for(0, split.n_out, grain, [&](int64_t jb, int64_t je) {
      std::vector<int64_t> base(static_cast<std::size_t>(je - jb));
      split.kept_offsets(jb, je - jb, base.data());
      for (int64_t j = jb; j < je; ++j) {
        const T* xj = x + base[j - jb];
        T best = xj[0];
        int64_t arg = 0;
        for (int64_t r = 1; r < n; ++r) {
          const T y = xj[r * step];
          bool take = y > best;
          if constexpr (std::is_floating_point_v<T>)
            take = take || (std::isnan(y) && !std::isnan(best));
          if (take) best = y, arg = r;
        }
        v[j] = best;
        idx[j] = arg;
      }
    });
  });
#else
  TT_TODO(
      "ch04.4",
      "cpu::max_dim: values and indices (out shape: in's with size 1 at dim) = the maximum along dim and the index of its first occurrence, NaN counting as larger than any number");
#endif
}

void max_dim_backward(const Tensor& grad_in, const Tensor& grad_values, const Tensor& indices,
                      int64_t dim) {
  dispatch_floating(grad_in.dtype(), "max_dim_backward", [&]<typename T>() {
    const ReduceSplit split(grad_values, grad_in);
    const int64_t step = grad_in.stride(dim);
    T* gi = static_cast<T*>(grad_in.data_ptr());
    const T* gv = static_cast<const T*>(grad_values.data_ptr());
    const int64_t* idx = static_cast<const int64_t*>(indices.data_ptr());
    std::vector<int64_t> base(static_cast<std::size_t>(split.n_out));
    split.kept_offsets(0, split.n_out, base.data());
    for (int64_t j = 0; j < split.n_out; ++j) gi[base[j] + idx[j] * step] = gv[j];
  });
}

TT_REGISTER_KERNEL("sum", DeviceType::kCPU, sum);
TT_REGISTER_KERNEL("max_dim", DeviceType::kCPU, max_dim);
TT_REGISTER_KERNEL("max_dim_backward", DeviceType::kCPU, max_dim_backward);

}  // namespace tt::cpu
