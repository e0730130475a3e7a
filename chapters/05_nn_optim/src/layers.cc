// The layers (tt/layers.h): thin Modules over chapter 04's differentiable ops, and GPT-2 style
// initialisation.
#include <cmath>
#include <sstream>
#include <unordered_set>

#include "tt/autograd.h"
#include "tt/functional.h"
#include "tt/layers.h"

namespace tt::nn {

namespace {

std::string bool_str(bool b) {
  return b ? "true" : "false";
}

}  // namespace

// ----- Linear ------------------------------------------------------------------------------

Linear::Linear(int64_t in, int64_t out, bool with_bias, Generator& gen, TensorOptions options)
    : Module("Linear"), in_features(in), out_features(out) {
  TT_CHECK(in > 0 && out > 0, "Linear: in_features and out_features must be > 0, got ", in, " and ",
           out);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = register_parameter("weight", uniform({out, in}, -bound, bound, gen, options));
  if (with_bias) bias = register_parameter("bias", uniform({out}, -bound, bound, gen, options));
}

Linear::Linear(int64_t in, int64_t out, bool with_bias, TensorOptions options)
    : Linear(in, out, with_bias, default_generator(), options) {}

Tensor Linear::forward(const Tensor& x) {
  TT_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_features,
           "Linear::forward: expected input [..., ", in_features, "], got ",
           x.defined() ? x.describe() : std::string("an undefined tensor"));
  TT_CHECK(x.dtype() == weight.dtype() && x.device() == weight.device(), "Linear::forward: input ",
           x.describe(), " must have the dtype and device of the weight ", weight.describe());
  Tensor y = matmul(x, transpose(weight, 0, 1));
  return bias.defined() ? add(y, bias) : y;
}

std::string Linear::extra_repr() const {
  std::ostringstream os;
  os << "in=" << in_features << ", out=" << out_features << ", bias=" << bool_str(bias.defined());
  return os.str();
}

// ----- LayerNorm ---------------------------------------------------------------------------

LayerNorm::LayerNorm(int64_t dim_, double eps_, TensorOptions options)
    : Module("LayerNorm"), dim(dim_), eps(eps_) {
  TT_CHECK(dim > 0, "LayerNorm: dim must be > 0, got ", dim);
  weight = register_parameter("weight", ones({dim}, options));
  bias = register_parameter("bias", zeros({dim}, options));
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layernorm(x, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << "dim=" << dim << ", eps=" << eps;
  return os.str();
}

// ----- Embedding ---------------------------------------------------------------------------

Embedding::Embedding(int64_t num, int64_t dim_, Generator& gen, TensorOptions options)
    : Module("Embedding"), num_embeddings(num), dim(dim_) {
  TT_CHECK(num > 0 && dim > 0, "Embedding: sizes must be > 0, got ", num, " and ", dim);
  weight = register_parameter("weight", randn({num, dim}, gen, options));
}

Embedding::Embedding(int64_t num, int64_t dim_, TensorOptions options)
    : Embedding(num, dim_, default_generator(), options) {}

Tensor Embedding::forward(const Tensor& indices) {
  return embedding(weight, indices);
}

std::string Embedding::extra_repr() const {
  std::ostringstream os;
  os << "num=" << num_embeddings << ", dim=" << dim;
  return os.str();
}

// ----- GELU, containers, MLP ---------------------------------------------------------------

Tensor GELU::forward(const Tensor& x) {
  return gelu(x);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& [name, child] : named_children()) y = child->forward(y);
  return y;
}

Module& ModuleList::operator[](std::size_t i) const {
  TT_CHECK(i < size(), "ModuleList: index ", i, " out of range for ", size(), " modules");
  return *named_children()[i].second;
}

MLP::MLP(int64_t dim, int64_t hidden, int64_t out, Generator& gen, TensorOptions options)
    : Module("MLP") {
  c_fc = register_module("c_fc", std::make_shared<Linear>(dim, hidden, true, gen, options));
  gelu = register_module("gelu", std::make_shared<GELU>());
  c_proj = register_module("c_proj", std::make_shared<Linear>(hidden, out, true, gen, options));
}

Tensor MLP::forward(const Tensor& x) {
  return c_proj->forward(gelu->forward(c_fc->forward(x)));
}

// ----- initialisation ----------------------------------------------------------------------

const Tensor& normal_(const Tensor& t, double std, Generator& gen) {
  TT_CHECK(t.defined() && is_floating(t.dtype()), "normal_: expected a float tensor, got ",
           t.describe());
  TT_CHECK(std::isfinite(std) && std >= 0, "normal_: std must be finite and >= 0, got ", std,
           " (for ", t.describe(), ")");
  std::vector<double> v = randn(t.shape(), gen, {.dtype = DType::kFloat64}).to_vector<double>();
  for (double& x : v) x *= std;
  t.copy_(from_vector<double>(v, t.shape()));
  return t;
}

bool is_residual_projection(const std::string& name) {
  return name == "c_proj.weight" || name.ends_with(".c_proj.weight");
}

void init_gpt2_(Module& model, int64_t n_layer, Generator& gen,
                const std::function<bool(const std::string&)>& is_residual) {
  TT_CHECK(n_layer > 0, "init_gpt2_: n_layer must be > 0, got ", n_layer);
  constexpr double kStd = 0.02;
  const double residual_std = kStd / std::sqrt(2.0 * static_cast<double>(n_layer));
  std::unordered_set<const TensorImpl*> done;  // tied weights are initialised once
  auto first_time = [&](const Tensor& t) {
    return t.defined() && done.insert(t.impl().get()).second;
  };
  auto join = [](const std::string& prefix, const char* name) {
    return prefix.empty() ? std::string(name) : prefix + "." + name;
  };
  for (auto& [prefix, m] : model.named_modules()) {
    if (auto* lin = dynamic_cast<Linear*>(m)) {
      if (first_time(lin->weight)) {
        normal_(lin->weight, is_residual(join(prefix, "weight")) ? residual_std : kStd, gen);
      }
      if (first_time(lin->bias)) lin->bias.fill_(0.0);
    } else if (auto* emb = dynamic_cast<Embedding*>(m)) {
      if (first_time(emb->weight)) normal_(emb->weight, kStd, gen);
    } else if (auto* ln = dynamic_cast<LayerNorm*>(m)) {
      if (first_time(ln->weight)) ln->weight.fill_(1.0);
      if (first_time(ln->bias)) ln->bias.fill_(0.0);
    }
  }
}

}  // namespace tt::nn
