// Tensor: construction, metadata, the views built from the exercises, data movement, creation.
#include "tt/tensor.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <sstream>

namespace tt {

namespace {
std::atomic<int64_t> g_live_impls{0};
}  // namespace

std::ostream& operator<<(std::ostream& os, const Shape& shape) {
  detail::put(os, shape);
  return os;
}

std::string shape_str(const Shape& shape) {
  return detail::str(shape);
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    TT_CHECK(!__builtin_mul_overflow(n, s, &n), "shape ", shape,
             ": the number of elements overflows int64");
  }
  return n;
}

namespace {
// Both wrap_dim overloads: `shape`, when given, is named in the error instead of the rank.
int64_t wrap_dim_impl(int64_t dim, int64_t ndim, const Shape* shape, const char* op) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1
  if (dim < -n || dim >= n) [[unlikely]] {
    if (shape != nullptr) {
      TT_THROW(op, ": dim ", dim, " is out of range [", -n, ", ", n - 1, "] for shape ", *shape);
    }
    TT_THROW(op, ": dim ", dim, " is out of range [", -n, ", ", n - 1, "] for a tensor with ", ndim,
             " dims");
  }
  return dim < 0 ? dim + n : dim;
}
}  // namespace

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  return wrap_dim_impl(dim, ndim, nullptr, op);
}

int64_t wrap_dim(int64_t dim, const Shape& shape, const char* op) {
  return wrap_dim_impl(dim, static_cast<int64_t>(shape.size()), &shape, op);
}

Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer_at = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TT_CHECK(infer_at < 0, op, ": only one dimension can be -1, got shape ", shape);
      infer_at = static_cast<int64_t>(i);
    } else {
      TT_CHECK(shape[i] >= 0, op, ": invalid size ", shape[i], " in shape ", shape);
      known *= shape[i];
    }
  }
  if (infer_at >= 0) {
    TT_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape, " is invalid for ", numel,
             " elements");
    out[infer_at] = numel / known;
  } else {
    TT_CHECK(known == numel, op, ": shape ", shape, " is invalid for ", numel, " elements");
  }
  return out;
}

// ----- strides ---------------------------------------------------------------------------

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t running = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = running;
    TT_CHECK(!__builtin_mul_overflow(running, std::max<int64_t>(shape[d], 1), &running),
             "contiguous_strides: shape ", shape, " has strides that overflow int64");
  }
  return strides;
}

bool Tensor::is_contiguous() const {
  // Size-1 dims can have any stride; an empty tensor is contiguous.
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (size(d) == 1) continue;
    if (stride(d) != expected) return false;
    expected *= size(d);
  }
  return true;
}

// ----- Storage ---------------------------------------------------------------------------

Storage::Storage(std::size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  allocator_ = &backend_for(device.type).allocator(device.index);
  data_ = allocator_->allocate(nbytes);
}

Storage::~Storage() {
  if (data_ != nullptr) allocator_->deallocate(data_, nbytes_);
}

void Storage::swap(Storage& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(nbytes_, other.nbytes_);
  std::swap(device_, other.device_);
  std::swap(allocator_, other.allocator_);
}

// ----- TensorImpl ------------------------------------------------------------------------

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage_, Shape shape_, Strides strides_,
                       int64_t offset_, DType dtype_)
    : storage(std::move(storage_)),
      shape(std::move(shape_)),
      strides(std::move(strides_)),
      offset(offset_),
      dtype(dtype_) {
  g_live_impls.fetch_add(1, std::memory_order_relaxed);
}

TensorImpl::~TensorImpl() {
  g_live_impls.fetch_sub(1, std::memory_order_relaxed);
}

int64_t TensorImpl::live_count() {
  return g_live_impls.load(std::memory_order_relaxed);
}

// ----- Tensor: metadata ------------------------------------------------------------------

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset,
               DType dtype) {
  TT_CHECK(storage != nullptr, "Tensor: null storage");
  TT_CHECK(shape.size() == strides.size(), "Tensor: shape ", shape, " and strides ", strides,
           " have different lengths");
  TT_CHECK(offset >= 0, "Tensor: negative offset ", offset);
  // The largest element reached must lie inside the storage.
  int64_t max_off = offset;
  bool empty = false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    TT_CHECK(shape[d] >= 0, "Tensor: negative size in shape ", shape);
    TT_CHECK(strides[d] >= 0, "Tensor: negative stride in strides ", strides);
    if (shape[d] == 0)
      empty = true;
    else
      max_off += (shape[d] - 1) * strides[d];
  }
  if (!empty) {
    TT_CHECK(static_cast<std::size_t>(max_off + 1) * dtype_size(dtype) <= storage->nbytes(),
             "Tensor: shape ", shape, " strides ", strides, " offset ", offset,
             " reach past the storage of ", storage->nbytes(), " bytes");
  }
  impl_ = std::make_shared<TensorImpl>(std::move(storage), std::move(shape), std::move(strides),
                                       offset, dtype);
}

TensorImpl& Tensor::checked_impl() const {
  TT_CHECK(impl_ != nullptr, "Tensor: use of an undefined tensor");
  return *impl_;
}

const Shape& Tensor::shape() const {
  return checked_impl().shape;
}
const Strides& Tensor::strides() const {
  return checked_impl().strides;
}
int64_t Tensor::offset() const {
  return checked_impl().offset;
}
DType Tensor::dtype() const {
  return checked_impl().dtype;
}
Device Tensor::device() const {
  return checked_impl().storage->device();
}
const std::shared_ptr<Storage>& Tensor::storage() const {
  return checked_impl().storage;
}
int64_t Tensor::numel() const {
  return shape_numel(shape());
}

int64_t Tensor::size(int64_t d) const {
  TT_CHECK(dim() > 0, "Tensor::size(", d, "): a 0-d tensor (shape []) has no dims");
  return shape()[wrap_dim(d, shape(), "Tensor::size")];
}
int64_t Tensor::stride(int64_t d) const {
  TT_CHECK(dim() > 0, "Tensor::stride(", d, "): a 0-d tensor (shape []) has no dims");
  return strides()[wrap_dim(d, shape(), "Tensor::stride")];
}

void* Tensor::data_ptr() const {
  auto* base = static_cast<std::byte*>(storage()->data());
  return base == nullptr ? nullptr : base + offset() * static_cast<int64_t>(dtype_size(dtype()));
}

std::string Tensor::describe() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(shape=" << shape() << ", dtype=" << dtype_name(dtype()) << ", device=" << device()
     << ")";
  return os.str();
}

Tensor Tensor::make_view(Shape shape, Strides strides, int64_t offset) const {
  return Tensor(storage(), std::move(shape), std::move(strides), offset, dtype());
}

// ----- Tensor: views built on the exercises -----------------------------------------------

Tensor Tensor::view(Shape new_shape) const {
  new_shape = infer_shape(new_shape, numel(), "Tensor::view");
  auto st = compute_view_strides(shape(), strides(), new_shape);
  TT_CHECK(st.has_value(), "Tensor::view: shape ", new_shape,
           " is not compatible with the strides ", strides(), " of a tensor of shape ", shape(),
           " (the view would need a copy); use reshape() or contiguous() first");
  return make_view(std::move(new_shape), std::move(*st), offset());
}

Tensor Tensor::reshape(Shape new_shape) const {
  new_shape = infer_shape(new_shape, numel(), "Tensor::reshape");
  if (auto st = compute_view_strides(shape(), strides(), new_shape)) {
    return make_view(std::move(new_shape), std::move(*st), offset());
  }
  return contiguous().view(std::move(new_shape));
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim(start_dim, shape(), "Tensor::flatten");
  const int64_t e = wrap_dim(end_dim, shape(), "Tensor::flatten");
  TT_CHECK(s <= e, "Tensor::flatten: start_dim ", s, " > end_dim ", e);
  Shape ns(shape().begin(), shape().begin() + s);
  int64_t m = 1;
  for (int64_t d = s; d <= e; ++d) m *= size(d);
  ns.push_back(m);
  ns.insert(ns.end(), shape().begin() + e + 1, shape().end());
  return reshape(std::move(ns));
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  const int64_t w0 = wrap_dim(d0, shape(), "Tensor::transpose");
  const int64_t w1 = wrap_dim(d1, shape(), "Tensor::transpose");
  std::vector<int64_t> perm(dim());
  for (int64_t i = 0; i < dim(); ++i) perm[i] = i;
  if (dim() > 0) std::swap(perm[w0], perm[w1]);  // a 0-d tensor is its own transpose
  return permute(perm);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  TT_CHECK(dim() > 0, "Tensor::narrow: cannot narrow a 0-d tensor (shape [])");
  const int64_t dd = wrap_dim(d, shape(), "Tensor::narrow");
  TT_CHECK(start >= 0 && length >= 0 && start + length <= size(dd), "Tensor::narrow: start ", start,
           " length ", length, " do not fit dim ", dd, " of shape ", shape());
  return slice(dd, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  TT_CHECK(dim() > 0, "Tensor::select: cannot select from a 0-d tensor (shape [])");
  const int64_t dd = wrap_dim(d, shape(), "Tensor::select");
  const int64_t n = size(dd);
  TT_CHECK(index >= -n && index < n, "Tensor::select: index ", index, " out of range for dim ", dd,
           " of shape ", shape());
  if (index < 0) index += n;
  return slice(dd, index, index + 1).squeeze(dd);
}

Tensor Tensor::squeeze() const {
  Tensor t = *this;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (size(d) == 1) t = t.squeeze(d);
  }
  return t;
}

// ----- Tensor: data ----------------------------------------------------------------------

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), {dtype(), device()});
  out.copy_(*this);
  return out;
}

namespace {

// dst = src for two tensors of one device type (the backend's copy), except that a copy with a
// bfloat16 side goes to chapter 11's bfloat16 cast: all of them but a CPU bfloat16 -> bfloat16
// copy (bits unchanged, chapter 01 does it). float64 and int64 meet bfloat16 through float32.
void copy_on_device(const Tensor& dst, const Tensor& src, const char* op) {
  const DType dt = dst.dtype(), st = src.dtype();
  const bool bf_dst = dt == DType::kBFloat16, bf_src = st == DType::kBFloat16;
  const DeviceType type = dst.device().type;
  if ((!bf_dst && !bf_src) || (bf_dst && bf_src && type == DeviceType::kCPU)) {
    backend_for(type).copy(dst, src);
    return;
  }
  if (bf_dst && st != DType::kFloat32 && !bf_src) {  // float64/int64 -> float32 -> bfloat16
    const Tensor f32 = empty(src.shape(), {DType::kFloat32, src.device()});
    backend_for(type).copy(f32, src);
    copy_on_device(dst, f32, op);
    return;
  }
  if (bf_src && dt != DType::kFloat32 && !bf_dst) {  // bfloat16 -> float32 -> float64/int64
    const Tensor f32 = empty(src.shape(), {DType::kFloat32, src.device()});
    copy_on_device(f32, src, op);
    backend_for(type).copy(dst, f32);
    return;
  }
  bfloat16_cast(op, dt, st, dst.device())(dst, src);
}

}  // namespace

const Tensor& Tensor::copy_(const Tensor& src_in) const {
  TT_CHECK(src_in.defined(), "Tensor::copy_: source is undefined");
  const Tensor src = src_in.shape() == shape() ? src_in : src_in.expand(shape());
  const Device dd = device(), sd = src.device();
  if (dd.type == sd.type && (dd == sd || dd.is_cpu())) {
    copy_on_device(*this, src, "Tensor::copy_");
    return *this;
  }
  // Crossing devices: stage through contiguous buffers of the source dtype.
  if (sd.is_cpu()) {
    const Tensor host = src.contiguous();
    Tensor staged =
        (is_contiguous() && dtype() == src.dtype()) ? *this : empty(shape(), {src.dtype(), dd});
    backend_for(dd.type).copy_from_host(staged.data_ptr(), host.data_ptr(),
                                        static_cast<std::size_t>(numel()) * dtype_size(src.dtype()),
                                        dd.index);
    if (!staged.is_same(*this)) copy_on_device(*this, staged, "Tensor::copy_");
    return *this;
  }
  if (dd.is_cpu()) {
    const Tensor dev = src.contiguous();
    Tensor host =
        (is_contiguous() && dtype() == src.dtype()) ? *this : empty(shape(), {src.dtype()});
    backend_for(sd.type).copy_to_host(host.data_ptr(), dev.data_ptr(),
                                      static_cast<std::size_t>(numel()) * dtype_size(src.dtype()),
                                      sd.index);
    if (!host.is_same(*this)) copy_on_device(*this, host, "Tensor::copy_");
    return *this;
  }
  // Device to another device: go through the host.
  copy_(src.to(Device::cpu()));
  return *this;
}

const Tensor& Tensor::fill_(double value) const {
  if (dtype() == DType::kBFloat16) {  // float32(value), rounded by the bfloat16 cast
    const Tensor v = scalar_tensor(value, {DType::kFloat32, device()});
    copy_on_device(*this, v.expand(shape()), "Tensor::fill_");
    return *this;
  }
  backend_for(device().type).fill(*this, value);
  return *this;
}

Tensor Tensor::to(Device device_) const {
  if (device() == device_) return *this;
  Tensor out = empty(shape(), {dtype(), device_});
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype_) const {
  if (dtype() == dtype_) return *this;
  Tensor out = empty(shape(), {dtype_, device()});
  out.copy_(*this);
  return out;
}

double Tensor::item() const {
  TT_CHECK(numel() == 1, "Tensor::item: expected one element, got shape ", shape());
  if (dtype() == DType::kBFloat16) {  // exact: no cast needed to read a bfloat16
    return bfloat16_to_float(*to(Device::cpu()).data<bfloat16>());
  }
  const Tensor host = to(Device::cpu()).to(DType::kFloat64).contiguous();
  return *static_cast<const double*>(host.data_ptr());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  TT_CHECK(dtype_of<T> == dtype(), "Tensor::to_vector<", dtype_name(dtype_of<T>),
           ">: tensor has dtype ", dtype_name(dtype()));
  const Tensor host = to(Device::cpu()).contiguous();
  const T* p = static_cast<const T*>(host.data_ptr());
  return std::vector<T>(p, p + numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bfloat16> Tensor::to_vector<bfloat16>() const;

// ----- Tensor: autograd state -------------------------------------------------------------

namespace {
AutogradMeta& meta(TensorImpl& impl) {
  if (!impl.autograd) impl.autograd = std::make_unique<AutogradMeta>();
  return *impl.autograd;
}
const std::shared_ptr<autograd::Node> kNoNode;
}  // namespace

bool Tensor::requires_grad() const {
  const auto& a = checked_impl().autograd;
  return a != nullptr && (a->requires_grad || a->grad_fn != nullptr);
}

const Tensor& Tensor::set_requires_grad(bool requires_grad_) const {
  TT_CHECK(is_leaf(), "Tensor::set_requires_grad: only leaf tensors can change requires_grad; ",
           "use detach() to get a leaf from ", describe());
  TT_CHECK(!requires_grad_ || is_floating(dtype()),
           "Tensor::set_requires_grad: only floating tensors can require grad, got ", describe());
  meta(checked_impl()).requires_grad = requires_grad_;
  return *this;
}

Tensor Tensor::grad() const {
  const auto& a = checked_impl().autograd;
  return a ? a->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined()) {
    TT_CHECK(g.shape() == shape(), "Tensor::set_grad: gradient shape ", g.shape(),
             " does not match tensor shape ", shape());
  }
  meta(checked_impl()).grad = g;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  const auto& a = checked_impl().autograd;
  return a ? a->grad_fn : kNoNode;
}

uint32_t Tensor::output_nr() const {
  const auto& a = checked_impl().autograd;
  return a ? a->output_nr : 0;
}

void Tensor::set_grad_fn(std::shared_ptr<autograd::Node> node, uint32_t nr) const {
  auto& m = meta(checked_impl());
  m.grad_fn = std::move(node);
  m.output_nr = nr;
}

Tensor Tensor::detach() const {
  return make_view(shape(), strides(), offset());
}

// ----- creation --------------------------------------------------------------------------

Tensor empty(const Shape& shape, TensorOptions options) {
  // Sizes, strides (products of sizes, 0 counted as 1) and the byte count must fit in int64:
  // no signed overflow anywhere later.
  int64_t span = static_cast<int64_t>(dtype_size(options.dtype));
  for (int64_t s : shape) {
    TT_CHECK(s >= 0, "empty: negative size in shape ", shape);
    TT_CHECK(!__builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span), "empty: shape ", shape,
             " of ", dtype_name(options.dtype), " needs more than 2^63 bytes");
  }
  const int64_t n = shape_numel(shape);
  auto storage = std::make_shared<Storage>(static_cast<std::size_t>(n) * dtype_size(options.dtype),
                                           options.device);
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, options.dtype);
}

Tensor full(const Shape& shape, double value, TensorOptions options) {
  Tensor t = empty(shape, options);
  t.fill_(value);
  return t;
}
Tensor zeros(const Shape& shape, TensorOptions options) {
  return full(shape, 0.0, options);
}
Tensor ones(const Shape& shape, TensorOptions options) {
  return full(shape, 1.0, options);
}
Tensor zeros_like(const Tensor& like) {
  return zeros(like.shape(), {like.dtype(), like.device()});
}

Tensor scalar_tensor(double value, TensorOptions options) {
  return full({}, value, options);
}

Tensor arange(double start, double end, double step, TensorOptions options) {
  TT_CHECK(step != 0.0, "arange: step must be non-zero");
  TT_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
           "arange: start, end and step must be finite, got ", start, ", ", end, ", ", step);
  const double count = std::ceil((end - start) / step);
  TT_CHECK(count < 0x1p62, "arange: [", start, ", ", end, ") with step ", step, " has ", count,
           " elements (too many)");
  if (options.dtype == DType::kBFloat16) {  // the float32 values, rounded by the bfloat16 cast
    return arange(start, end, step, {DType::kFloat32, options.device}).to(DType::kBFloat16);
  }
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  Tensor host = empty({n}, {options.dtype});
  dispatch_dtype(options.dtype, "arange", [&]<typename T>() {
    T* p = host.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return host.to(options.device);
}

namespace {
template <typename Sample>
Tensor sample(const Shape& shape, TensorOptions options, const char* op, Sample&& next) {
  if (options.dtype == DType::kBFloat16) {  // float32 samples, rounded by the bfloat16 cast
    return sample(shape, {DType::kFloat32, options.device}, op, next).to(DType::kBFloat16);
  }
  Tensor host = empty(shape, {options.dtype});
  dispatch_floating(options.dtype, op, [&]<typename T>() {
    T* p = host.data<T>();
    for (int64_t i = 0; i < host.numel(); ++i) p[i] = static_cast<T>(next());
  });
  return host.to(options.device);
}
}  // namespace

Tensor randn(const Shape& shape, Generator& gen, TensorOptions options) {
  return sample(shape, options, "randn", [&] { return gen.next_normal(); });
}
Tensor randn(const Shape& shape, TensorOptions options) {
  return randn(shape, default_generator(), options);
}
Tensor uniform(const Shape& shape, double low, double high, Generator& gen, TensorOptions options) {
  TT_CHECK(low <= high, "uniform: low ", low, " > high ", high);
  return sample(shape, options, "uniform", [&] { return low + (high - low) * gen.next_uniform(); });
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape) {
  const int64_t n = static_cast<int64_t>(values.size());
  if (shape.empty() && n != 1) shape = {n};
  TT_CHECK(shape_numel(shape) == n, "from_vector: ", n, " values do not fill shape ", shape);
  Tensor t = empty(shape, {dtype_of<T>});
  if (n > 0) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(T));
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, Shape);
template Tensor from_vector<double>(const std::vector<double>&, Shape);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, Shape);
template Tensor from_vector<bfloat16>(const std::vector<bfloat16>&, Shape);

Tensor tensor(std::initializer_list<float> values) {
  return from_vector(std::vector<float>(values), {static_cast<int64_t>(values.size())});
}
Tensor tensor_i64(std::initializer_list<int64_t> values) {
  return from_vector(std::vector<int64_t>(values), {static_cast<int64_t>(values.size())});
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  const auto x = a.to(DType::kFloat64).to_vector<double>();
  const auto y = b.to(DType::kFloat64).to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return false;
    if (std::abs(x[i] - y[i]) > atol + rtol * std::abs(y[i])) return false;
  }
  return true;
}

}  // namespace tt
