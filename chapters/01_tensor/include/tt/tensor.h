/// @file tensor.h
/// @brief Tensor: a strided view of a shared Storage. Views share memory; copies are explicit.
///
/// Element (i0, ..., i{n-1}) of a tensor lives at
/// \f[ \text{offset} + \sum_k i_k \cdot \text{stride}_k \f]
/// elements from the start of its storage. View operations (view, permute, slice, expand,
/// squeeze, ...) only compute a new (shape, strides, offset) and share the storage.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tt/backend.h"
#include "tt/device.h"
#include "tt/dtype.h"
#include "tt/error.h"
#include "tt/generator.h"

namespace tt {

/// Sizes of each dimension.
using Shape = std::vector<int64_t>;
/// Distance, in elements, between neighbours along each dimension.
using Strides = std::vector<int64_t>;

/// Prints a shape as [2, 3].
std::ostream& operator<<(std::ostream& os, const Shape& shape);
/// Formats a shape as "[2, 3]".
std::string shape_str(const Shape& shape);
/// Number of elements of a shape (1 for the 0-d shape []); throws tt::Error when it overflows
/// int64.
int64_t shape_numel(const Shape& shape);

namespace autograd {
class Node;
struct PostAccumulateGradHooks;
}  // namespace autograd

/// A block of device memory shared by a tensor and all its views.
class Storage {
 public:
  /// Allocates `nbytes` on `device` through its backend's allocator.
  Storage(std::size_t nbytes, Device device);
  /// Returns the memory to the allocator.
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// Start of the memory (nullptr when nbytes is 0).
  void* data() const { return data_; }
  /// Size in bytes.
  std::size_t nbytes() const { return nbytes_; }
  /// Where the memory lives.
  Device device() const { return device_; }
  /// Exchanges the memory (and device) of two storages. Every tensor viewing either storage
  /// sees the swapped memory: this is how Module::to(device) moves parameters in place.
  void swap(Storage& other) noexcept;

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
};

/// Options of the creation functions: `zeros({2, 3}, {.dtype = DType::kFloat64})`.
struct TensorOptions {
  DType dtype = DType::kFloat32;  ///< element type
  Device device = Device::cpu();  ///< where the memory lives
};

struct AutogradMeta;
class TensorImpl;

/// A handle to a tensor. Copying a Tensor copies the handle (both refer to the same tensor, like
/// PyTorch); use clone() for a deep copy. A default-constructed Tensor is undefined.
class Tensor {
 public:
  /// An undefined tensor (defined() is false).
  Tensor() = default;
  /// A tensor viewing `storage` with the given geometry (checked against the storage size).
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset,
         DType dtype);

  // ----- metadata -----------------------------------------------------------------------
  /// False for a default-constructed tensor.
  bool defined() const { return impl_ != nullptr; }
  /// Sizes of each dimension.
  const Shape& shape() const;
  /// Strides, in elements, of each dimension.
  const Strides& strides() const;
  /// Number of dimensions.
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  /// Size of dimension `d` (negative d counts from the end); throws for a 0-d tensor.
  int64_t size(int64_t d) const;
  /// Stride of dimension `d` (negative d counts from the end); throws for a 0-d tensor.
  int64_t stride(int64_t d) const;
  /// Offset of element 0 from the start of the storage, in elements.
  int64_t offset() const;
  /// Product of the shape.
  int64_t numel() const;
  /// Element type.
  DType dtype() const;
  /// Device of the storage.
  Device device() const;
  /// The shared storage.
  const std::shared_ptr<Storage>& storage() const;
  /// Address of element 0 (storage data + offset * element size).
  void* data_ptr() const;
  /// Typed address of element 0; throws if T does not match dtype().
  template <typename T>
  T* data() const {
    TT_CHECK(dtype_of<T> == dtype(), "Tensor::data<", dtype_name(dtype_of<T>),
             ">: tensor has dtype ", dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }
  /// True when two handles refer to the same tensor.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  /// A short description "Tensor(shape=[2, 3], dtype=float32, device=cpu)" for error messages.
  std::string describe() const;

  // ----- layout (exercises ch01.1 - ch01.6) -----------------------------------------------
  /// True when the strides are the row-major strides of the shape (size-1 dims ignored).
  bool is_contiguous() const;
  /// Offset, in elements from the storage start, of the element at `index` (one entry per
  /// dimension, negative entries count from the end); throws tt::Error when out of range.
  int64_t element_offset(const std::vector<int64_t>& index) const;
  /// A view with a new shape (one entry may be -1); throws when the strides do not allow it.
  Tensor view(Shape shape) const;
  /// view() when possible, otherwise a contiguous copy with the new shape.
  Tensor reshape(Shape shape) const;
  /// Collapses dims start..end (inclusive) into one (reshape).
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// Reorders dimensions: result.size(i) == size(dims[i]).
  Tensor permute(const std::vector<int64_t>& dims) const;
  /// Swaps two dimensions (a 0-d tensor accepts dims 0 and -1 and returns a view of itself).
  Tensor transpose(int64_t d0, int64_t d1) const;
  /// Elements start, start+step, ... < end along `dim` (end is clamped to size(dim)); throws
  /// for a 0-d tensor.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  /// `length` elements from `start` along `dim` (throws for a 0-d tensor).
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// Index `index` along `dim`, removing that dimension (throws for a 0-d tensor).
  Tensor select(int64_t dim, int64_t index) const;
  /// Broadcasts size-1 dims (and new leading dims) to `shape` with stride 0; -1 keeps a size.
  Tensor expand(const Shape& shape) const;
  /// Removes dimension `dim`, which must have size 1 (a 0-d tensor accepts dims 0 and -1 and
  /// returns a view of itself).
  Tensor squeeze(int64_t dim) const;
  /// Removes every size-1 dimension.
  Tensor squeeze() const;
  /// Inserts a size-1 dimension at position `dim` (0..dim()).
  Tensor unsqueeze(int64_t dim) const;

  // ----- data ---------------------------------------------------------------------------
  /// This tensor when contiguous, otherwise a contiguous copy.
  Tensor contiguous() const;
  /// A deep, contiguous copy.
  Tensor clone() const;
  /// Copies `src` (same shape, or broadcastable by expand) into this tensor, converting dtype
  /// and crossing devices as needed. Returns *this. A conversion to or from bfloat16 is done by
  /// the bfloat16 cast that chapter 11 installs (set_bfloat16_cast in tt/backend.h), through
  /// float32 for the float64 and int64 side (a float64 is rounded to float32 first, then to
  /// bfloat16); without chapter 11 it throws tt::Error saying so.
  const Tensor& copy_(const Tensor& src) const;
  /// Sets every element to `value`. Returns *this. A bfloat16 tensor receives
  /// float32(value) rounded to bfloat16 by the bfloat16 cast (chapter 11), as copy_.
  const Tensor& fill_(double value) const;
  /// This tensor on `device` (itself when already there).
  Tensor to(Device device) const;
  /// This tensor converted to `dtype` (itself when already of that dtype).
  Tensor to(DType dtype) const;
  /// Reference to one element (CPU only); `index` as in element_offset.
  template <typename T>
  T& at(const std::vector<int64_t>& index) const {
    TT_CHECK(device().is_cpu(), "Tensor::at: tensor is on ", device().str(),
             "; copy it to the CPU first with .to(Device::cpu())");
    TT_CHECK(dtype_of<T> == dtype(), "Tensor::at<", dtype_name(dtype_of<T>), ">: tensor has dtype ",
             dtype_name(dtype()));
    return static_cast<T*>(storage()->data())[element_offset(index)];
  }
  /// The value of a one-element tensor, converted to double (any device; a bfloat16 value is
  /// read exactly with bfloat16_to_float, without chapter 11).
  double item() const;
  /// The elements in row-major order (any device; T must match dtype()).
  template <typename T>
  std::vector<T> to_vector() const;

  // ----- autograd state (used from chapter 03 on) ---------------------------------------
  /// True when gradients should be computed for this tensor.
  bool requires_grad() const;
  /// Marks a leaf tensor as requiring (or not) a gradient. Returns *this.
  const Tensor& set_requires_grad(bool requires_grad = true) const;
  /// The accumulated gradient (undefined until backward reaches this tensor).
  Tensor grad() const;
  /// Replaces the accumulated gradient (pass an undefined Tensor to clear it).
  void set_grad(const Tensor& grad) const;
  /// The autograd node that produced this tensor (null for leaves).
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  /// Which output of grad_fn() this tensor is.
  uint32_t output_nr() const;
  /// Records the producing node (called by chapter 03's Function::apply).
  void set_grad_fn(std::shared_ptr<autograd::Node> node, uint32_t output_nr) const;
  /// True for tensors that no recorded operation produced.
  bool is_leaf() const { return grad_fn() == nullptr; }
  /// A tensor sharing storage and geometry but with no autograd history.
  Tensor detach() const;

  // ----- printing -----------------------------------------------------------------------
  /// PyTorch-style text: "tensor([[1., 2.],\n        [3., 4.]])".
  std::string to_string() const;

  /// The shared implementation (advanced use).
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

 private:
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  TensorImpl& checked_impl() const;
  Tensor make_view(Shape shape, Strides strides, int64_t offset) const;

  std::shared_ptr<TensorImpl> impl_;
};

/// Prints t.to_string().
std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// Autograd fields of a tensor, allocated on first use (chapter 03 explains them).
struct AutogradMeta {
  bool requires_grad = false;               ///< leaf flag set by set_requires_grad
  Tensor grad;                              ///< accumulated gradient of a leaf
  std::shared_ptr<autograd::Node> grad_fn;  ///< producer of a non-leaf
  uint32_t output_nr = 0;                   ///< index among grad_fn's outputs
  /// Hooks called when a leaf's .grad is final in a backward (chapter 03's
  /// register_post_accumulate_grad_hook); null until one is registered.
  std::shared_ptr<autograd::PostAccumulateGradHooks> post_accumulate_grad_hooks;
};

/// The state behind a Tensor handle.
class TensorImpl {
 public:
  /// Builds the impl; geometry is validated by Tensor's constructor.
  TensorImpl(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset,
             DType dtype);
  ~TensorImpl();

  std::shared_ptr<Storage> storage;        ///< shared memory
  Shape shape;                             ///< sizes
  Strides strides;                         ///< strides in elements
  int64_t offset = 0;                      ///< element offset of element 0
  DType dtype = DType::kFloat32;           ///< element type
  std::unique_ptr<AutogradMeta> autograd;  ///< null until autograd state is set

  /// Number of TensorImpl objects alive in the process (leak tests).
  static int64_t live_count();
};

// ----- layout helpers (exercises) ---------------------------------------------------------

/// Row-major ("C order") strides of `shape`: the last dim has stride 1, each earlier dim the
/// product of the sizes to its right (size-0 dims counted as 1); throws tt::Error when a
/// stride overflows int64 (e.g. [0, 2^40, 2^40]).
Strides contiguous_strides(const Shape& shape);

/// Strides that let a tensor of (old_shape, old_strides) be viewed as new_shape without a copy,
/// or std::nullopt when that is impossible (exercise ch01.2). numel must match.
std::optional<Strides> compute_view_strides(const Shape& old_shape, const Strides& old_strides,
                                            const Shape& new_shape);

/// Replaces a single -1 in `shape` so that its numel equals `numel`; throws tt::Error naming
/// `op` on a second -1, a negative size, or a numel mismatch.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op);

/// Normalizes a possibly negative dimension index into [0, ndim); throws naming `op` otherwise.
/// A 0-d tensor accepts dim 0 and -1 (as in PyTorch's reductions).
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
/// wrap_dim for a tensor of `shape`; the error names the shape.
int64_t wrap_dim(int64_t dim, const Shape& shape, const char* op);

/// Element offsets of a strided walk: for the row-major linear indices begin .. begin+count-1
/// of `shape`, writes into off_a[i] / off_b[i] the offset (in elements, relative to element 0)
/// of that element in a tensor with strides `sa` / `sb` (exercise ch01.7). Kernels call it in
/// chunks so that any layout (transposed, sliced, broadcast) is handled by one loop.
void strided_offsets(const Shape& shape, const Strides& sa, const Strides& sb, int64_t begin,
                     int64_t count, int64_t* off_a, int64_t* off_b);

/// Copies src into dst element by element on the CPU (same shape; any strides; dtypes may
/// differ), using strided_offsets for non-contiguous layouts. bfloat16 is copied to bfloat16
/// only (bits unchanged); a conversion to or from bfloat16 throws (Tensor::copy_ sends those to
/// the bfloat16 cast, see set_bfloat16_cast in tt/backend.h).
void cpu_copy_strided(const Tensor& dst, const Tensor& src);

/// The loop of every CPU copy: `dst[i] = f(src[i])` for each element i of dst (row-major order
/// of its shape), with D and S the C++ element types of dst and src (checked: throws tt::Error
/// naming `op` on a mismatch), any strides of dst and src (src may be broadcast with stride 0).
/// cpu_copy_strided is `f = static_cast<D>`; chapter 11's bfloat16 cast passes its rounding.
template <typename D, typename S, typename F>
void cpu_map_strided(const Tensor& dst, const Tensor& src, const char* op, F&& f) {
  TT_CHECK(dst.shape() == src.shape() && dst.device().is_cpu() && src.device().is_cpu() &&
               dst.dtype() == dtype_of<D> && src.dtype() == dtype_of<S>,
           op, ": expected CPU tensors of one shape, dst ", dtype_name(dtype_of<D>), " and src ",
           dtype_name(dtype_of<S>), ", got dst ", dst.describe(), " and src ", src.describe());
  const int64_t n = dst.numel();
  if (n == 0) return;
  D* out = static_cast<D*>(dst.data_ptr());
  const S* in = static_cast<const S*>(src.data_ptr());
  if (dst.is_contiguous() && src.is_contiguous()) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
    return;
  }
  constexpr int64_t kChunk = 256;
  int64_t od[kChunk], os[kChunk];
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t count = n - begin < kChunk ? n - begin : kChunk;
    strided_offsets(dst.shape(), dst.strides(), src.strides(), begin, count, od, os);
    for (int64_t i = 0; i < count; ++i) out[od[i]] = f(in[os[i]]);
  }
}

// ----- creation ---------------------------------------------------------------------------

/// Uninitialized contiguous tensor.
Tensor empty(const Shape& shape, TensorOptions options = {});
/// All zeros.
Tensor zeros(const Shape& shape, TensorOptions options = {});
/// All ones.
Tensor ones(const Shape& shape, TensorOptions options = {});
/// Every element equal to `value`.
Tensor full(const Shape& shape, double value, TensorOptions options = {});
/// Zeros with the shape, dtype and device of `like`.
Tensor zeros_like(const Tensor& like);
/// start, start+step, ... < end (1-D). Throws on step == 0.
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
/// Samples of N(0, 1) from `gen` (generated on the CPU in row-major order, then moved).
Tensor randn(const Shape& shape, Generator& gen, TensorOptions options = {});
/// Samples of N(0, 1) from the default generator.
Tensor randn(const Shape& shape, TensorOptions options = {});
/// Samples of U[low, high) from `gen`.
Tensor uniform(const Shape& shape, double low, double high, Generator& gen,
               TensorOptions options = {});
/// A CPU tensor holding `values` (row-major) with the given shape (1-D when shape is empty
/// and values.size() != 1). Throws when the sizes do not match.
template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape = {});
/// A 1-D float32 tensor from a list: `tensor({1.f, 2.f})`.
Tensor tensor(std::initializer_list<float> values);
/// A 1-D int64 tensor from a list of indices.
Tensor tensor_i64(std::initializer_list<int64_t> values);
/// A 0-d (scalar) tensor.
Tensor scalar_tensor(double value, TensorOptions options = {});

/// Returns true when `a` and `b` have the same shape and all |a-b| <= atol + rtol*|b|
/// (compared on the CPU in float64).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

// ----- template definitions -----------------------------------------------------------------

// Explicit instantiations (defined in tensor.cc); not part of the documented API.
/// @cond
extern template Tensor from_vector<float>(const std::vector<float>&, Shape);
extern template Tensor from_vector<double>(const std::vector<double>&, Shape);
extern template Tensor from_vector<int64_t>(const std::vector<int64_t>&, Shape);
extern template Tensor from_vector<bfloat16>(const std::vector<bfloat16>&, Shape);
extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<double> Tensor::to_vector<double>() const;
extern template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
extern template std::vector<bfloat16> Tensor::to_vector<bfloat16>() const;
/// @endcond

}  // namespace tt
