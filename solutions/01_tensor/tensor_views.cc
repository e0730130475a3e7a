// Chapter 01 exercises: strides, element offsets, views and the strided copy.
// The reference solutions live here; tools/sync_starters generates the learner's starter
// chapters/01_tensor/src/tensor_views.cc from this file.
#include <algorithm>
#include <numeric>

#include "tt/tensor.h"
#include "tt/todo.h"

namespace tt {

int64_t Tensor::element_offset(const std::vector<int64_t>& index) const {
#if TT_SOLUTION
  TT_CHECK(static_cast<int64_t>(index.size()) == dim(), "Tensor::element_offset: index has ",
           index.size(), " entries but the tensor of shape ", shape(), " has ", dim(), " dims");
  int64_t off = offset();
  for (int64_t d = 0; d < dim(); ++d) {
    int64_t i = index[d];
    if (i < 0) i += size(d);
    TT_CHECK(i >= 0 && i < size(d), "Tensor::element_offset: index ", index[d],
             " is out of range for dim ", d, " of size ", size(d), " (shape ", shape(), ")");
    off += i * stride(d);
  }
  return off;
#else
  TT_TODO(
      "ch01.1",
      "Tensor::element_offset: offset() + sum over d of index[d] * stride(d), in elements, for one index per dim (negative ones count from the end); throws naming the shape when an index is out of range or the number of indices is not dim()");
#endif
}

std::optional<Strides> compute_view_strides(const Shape& old_shape, const Strides& old_strides,
                                            const Shape& new_shape) {
#if TT_SOLUTION
  Strides new_strides(new_shape.size());
  if (shape_numel(old_shape) == 0) {
    // Nothing to address: any consistent strides will do.
    return contiguous_strides(new_shape);
  }
  if (old_shape.empty()) {
    // A 0-d tensor has one element: every new shape (all sizes 1) can view it.
    return contiguous_strides(new_shape);
  }
  // Walk the old dims in chunks that are contiguous among themselves (stride[d] ==
  // stride[d+1] * size[d+1]); each chunk can be re-split into new dims of the same numel.
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    // A chunk ends at d == 0 or where dim d-1 is not contiguous with dim d.
    if (d == 0 ||
        (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
#else
  TT_TODO(
      "ch01.2",
      "compute_view_strides: strides under which new_shape (same numel) reads the elements of (old_shape, old_strides) in the same row-major order, or nullopt when no strides can (the view would need a copy); size-1, stride-0, 0-d and empty shapes included");
#endif
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
#if TT_SOLUTION
  TT_CHECK(static_cast<int64_t>(dims.size()) == dim(), "Tensor::permute: got ", dims.size(),
           " dims for a tensor of shape ", shape());
  std::vector<bool> seen(dims.size(), false);
  Shape new_shape(dims.size());
  Strides new_strides(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], shape(), "Tensor::permute");
    TT_CHECK(!seen[d], "Tensor::permute: dim ", d, " appears twice in the permutation for shape ",
             shape());
    seen[d] = true;
    new_shape[i] = size(d);
    new_strides[i] = stride(d);
  }
  return make_view(std::move(new_shape), std::move(new_strides), offset());
#else
  TT_TODO(
      "ch01.3",
      "Tensor::permute: a view (same storage and offset) with size(i) == old size(dims[i]) and stride(i) == old stride(dims[i]); throws naming the shape unless dims is a permutation of the dims (negative dims wrap)");
#endif
}

Tensor Tensor::slice(int64_t dim_, int64_t start, int64_t end, int64_t step) const {
#if TT_SOLUTION
  TT_CHECK(dim() > 0, "Tensor::slice: cannot slice a 0-d tensor (shape [])");
  const int64_t d = wrap_dim(dim_, shape(), "Tensor::slice");
  TT_CHECK(step > 0, "Tensor::slice: step must be positive, got ", step);
  const int64_t n = size(d);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape new_shape = shape();
  Strides new_strides = strides();
  new_shape[d] = (end - start + step - 1) / step;
  new_strides[d] = stride(d) * step;
  return make_view(std::move(new_shape), std::move(new_strides), offset() + start * stride(d));
#else
  TT_TODO(
      "ch01.4",
      "Tensor::slice: a view of the elements start, start+step, ... < end along dim (negative start/end count from the end, both clamped to [0, size]); throws when step <= 0, dim is out of range or the tensor is 0-d");
#endif
}

Tensor Tensor::expand(const Shape& target) const {
#if TT_SOLUTION
  const int64_t nd = static_cast<int64_t>(target.size());
  TT_CHECK(nd >= dim(), "Tensor::expand: cannot expand shape ", shape(), " to ", target,
           " with fewer dims");
  Shape new_shape(nd);
  Strides new_strides(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t src = i - (nd - dim());  // aligned from the right
    if (src < 0) {
      TT_CHECK(target[i] >= 0, "Tensor::expand: -1 is not allowed for new leading dim ", i,
               " (target ", target, ")");
      new_shape[i] = target[i];
      new_strides[i] = 0;
      continue;
    }
    const int64_t want = target[i] == -1 ? size(src) : target[i];
    if (size(src) == want) {
      new_shape[i] = want;
      new_strides[i] = stride(src);
    } else {
      TT_CHECK(size(src) == 1, "Tensor::expand: size ", size(src), " of dim ", src, " in shape ",
               shape(), " must be 1 to expand to ", want, " (target ", target, ")");
      new_shape[i] = want;
      new_strides[i] = 0;
    }
  }
  return make_view(std::move(new_shape), std::move(new_strides), offset());
#else
  TT_TODO(
      "ch01.5",
      "Tensor::expand: a view of shape `shape` (aligned from the right, new leading dims allowed, -1 keeps a size) in which every broadcast index reads the same element; only size-1 dims may grow, else throw naming both shapes");
#endif
}

Tensor Tensor::squeeze(int64_t dim_) const {
#if TT_SOLUTION
  const int64_t d = wrap_dim(dim_, shape(), "Tensor::squeeze");
  if (dim() == 0) return make_view({}, {}, offset());  // a 0-d tensor has nothing to squeeze
  TT_CHECK(size(d) == 1, "Tensor::squeeze: dim ", d, " of shape ", shape(), " has size ", size(d),
           ", not 1");
  Shape new_shape = shape();
  Strides new_strides = strides();
  new_shape.erase(new_shape.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  return make_view(std::move(new_shape), std::move(new_strides), offset());
#else
  TT_TODO(
      "ch01.6",
      "Tensor::squeeze: a view without dim, which must have size 1 (else throw naming the shape and the size); a 0-d tensor accepts dim 0 and -1 and returns a view of itself");
#endif
}

Tensor Tensor::unsqueeze(int64_t dim_) const {
#if TT_SOLUTION
  // The new dim may go anywhere in 0..dim(): the valid range is that of a tensor with one more dim.
  TT_CHECK(dim_ >= -(dim() + 1) && dim_ <= dim(), "Tensor::unsqueeze: dim ", dim_,
           " is out of range [", -(dim() + 1), ", ", dim(), "] for shape ", shape());
  const int64_t d = wrap_dim(dim_, dim() + 1, "Tensor::unsqueeze");
  Shape new_shape = shape();
  Strides new_strides = strides();
  // Any stride works for a size-1 dim; pick the one that keeps a contiguous tensor contiguous.
  const int64_t st = d < dim() ? stride(d) * size(d) : 1;
  new_shape.insert(new_shape.begin() + d, 1);
  new_strides.insert(new_strides.begin() + d, st);
  return make_view(std::move(new_shape), std::move(new_strides), offset());
#else
  TT_TODO(
      "ch01.6",
      "Tensor::unsqueeze: a view with a size-1 dim inserted at position dim in [-(dim()+1), dim()] (else throw); a contiguous tensor stays contiguous");
#endif
}

void strided_offsets(const Shape& shape, const Strides& sa, const Strides& sb, int64_t begin,
                     int64_t count, int64_t* off_a, int64_t* off_b) {
#if TT_SOLUTION
  if (count <= 0) return;
  const int64_t nd = static_cast<int64_t>(shape.size());
  // Decompose `begin` into a multi-index (last dim fastest), then advance like an odometer,
  // updating both offsets incrementally instead of recomputing the dot product.
  std::vector<int64_t> idx(nd, 0);
  int64_t oa = 0, ob = 0, rem = begin;
  for (int64_t d = nd - 1; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    oa += idx[d] * sa[d];
    ob += idx[d] * sb[d];
  }
  for (int64_t i = 0; i < count; ++i) {
    off_a[i] = oa;
    off_b[i] = ob;
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      oa -= (shape[d] - 1) * sa[d];
      ob -= (shape[d] - 1) * sb[d];
      idx[d] = 0;
    }
  }
#else
  TT_TODO(
      "ch01.7",
      "strided_offsets: off_a[i] and off_b[i] = the offsets (strides sa and sb, relative to element 0) of the element with row-major linear index begin + i of shape, for i < count, in O(1) amortized time per element");
#endif
}

}  // namespace tt
