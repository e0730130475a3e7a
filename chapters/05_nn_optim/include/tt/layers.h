/// @file layers.h
/// @brief The layers of a GPT-2: Linear, LayerNorm, Embedding, GELU, MLP, and the containers
/// Sequential and ModuleList; GPT-2 style initialisation.
///
/// Each layer is a Module whose forward calls chapter 04's differentiable ops, so autograd
/// records it like any other computation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tt/generator.h"
#include "tt/module.h"

namespace tt::nn {

/// \f$ y = x W^\top + b \f$ with weight W [out, in] (PyTorch's layout) and optional bias [out].
/// x may have any number of leading dims: [..., in] -> [..., out].
class Linear : public Module {
 public:
  /// Weight and bias drawn from \f$ U(-1/\sqrt{in}, 1/\sqrt{in}) \f$ (PyTorch's default) with
  /// `gen`; float32 on the CPU unless `options` says otherwise.
  Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen,
         TensorOptions options = {});
  /// As above with the default generator.
  Linear(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions options = {});
  /// x W^T + b. Throws tt::Error naming the shapes when x is not [..., in_features], and
  /// naming dtypes and devices when x's differ from the weight's.
  Tensor forward(const Tensor& x) override;
  /// "in=4, out=8, bias=true".
  std::string extra_repr() const override;

  int64_t in_features;   ///< size of the last input dim
  int64_t out_features;  ///< size of the last output dim
  Tensor weight;         ///< [out, in]
  Tensor bias;           ///< [out], undefined without bias
};

/// Layer normalisation over the last dim,
/// \f$ y = (x - \mu)/\sqrt{\sigma^2 + \epsilon}\,\gamma + \beta \f$, with \f$ \gamma = 1,
/// \beta = 0 \f$ initially.
class LayerNorm : public Module {
 public:
  /// Normalises a last dim of size `dim`.
  explicit LayerNorm(int64_t dim, double eps = 1e-5, TensorOptions options = {});
  /// layernorm(x, weight, bias, eps).
  Tensor forward(const Tensor& x) override;
  /// "dim=8, eps=1e-05".
  std::string extra_repr() const override;

  int64_t dim;    ///< normalised size
  double eps;     ///< added to the variance
  Tensor weight;  ///< gamma [dim]
  Tensor bias;    ///< beta [dim]
};

/// A lookup table: int64 indices of any shape -> rows of weight [num_embeddings, dim].
class Embedding : public Module {
 public:
  /// Weight drawn from N(0, 1) (PyTorch's default) with `gen`.
  Embedding(int64_t num_embeddings, int64_t dim, Generator& gen, TensorOptions options = {});
  /// As above with the default generator.
  Embedding(int64_t num_embeddings, int64_t dim, TensorOptions options = {});
  /// embedding(weight, indices): shape indices.shape + [dim].
  Tensor forward(const Tensor& indices) override;
  /// "num=50257, dim=768".
  std::string extra_repr() const override;

  int64_t num_embeddings;  ///< number of rows
  int64_t dim;             ///< size of a row
  Tensor weight;           ///< [num_embeddings, dim]
};

/// GELU with the tanh approximation (no parameters).
class GELU : public Module {
 public:
  GELU() : Module("GELU") {}
  /// gelu(x).
  Tensor forward(const Tensor& x) override;
};

/// An indexable list of modules (GPT-2's blocks "h.0", "h.1", ...), named "0", "1", ...; it
/// has no forward.
class ModuleList : public Module {
 public:
  /// An empty list.
  ModuleList() : Module("ModuleList") {}
  /// Appends a module (named by its index) and returns it.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    return register_module(std::to_string(named_children().size()), std::move(module));
  }
  /// Number of modules.
  std::size_t size() const { return named_children().size(); }
  /// Module number i (throws when out of range).
  Module& operator[](std::size_t i) const;
  /// Module number i as its concrete type M (throws tt::Error when it is not an M).
  template <typename M>
  M& at(std::size_t i) const {
    auto* m = dynamic_cast<M*>(&(*this)[i]);
    TT_CHECK(m != nullptr, type_name(), "::at: module ", i, " is a ", (*this)[i].type_name());
    return *m;
  }

 protected:
  /// For subclasses that are lists with another type name.
  explicit ModuleList(std::string type_name) : Module(std::move(type_name)) {}
};

/// A ModuleList whose forward runs its children one after the other:
/// forward(x) = child_n(... child_1(x)).
class Sequential : public ModuleList {
 public:
  /// An empty sequence.
  Sequential() : ModuleList("Sequential") {}
  /// Feeds x through every child in order.
  Tensor forward(const Tensor& x) override;
};

/// GPT-2's feed-forward block: c_fc (dim -> hidden), GELU, c_proj (hidden -> out).
class MLP : public Module {
 public:
  /// Linear(dim, hidden) -> GELU -> Linear(hidden, out), weights drawn from `gen`.
  MLP(int64_t dim, int64_t hidden, int64_t out, Generator& gen, TensorOptions options = {});
  /// c_proj(gelu(c_fc(x))).
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<Linear> c_fc;    ///< dim -> hidden
  std::shared_ptr<GELU> gelu;      ///< activation
  std::shared_ptr<Linear> c_proj;  ///< hidden -> out
};

// ----- initialisation ----------------------------------------------------------------------

/// Fills `t` in place (any device) with samples of \f$ N(0, \mathrm{std}^2) \f$ drawn from
/// `gen` in row-major order. Returns t. Throws tt::Error for a non-float `t` or a negative or
/// non-finite std.
const Tensor& normal_(const Tensor& t, double std, Generator& gen);

/// True for names of GPT-2's residual projections: the weight of a module named "c_proj"
/// (attention output and MLP output), whose outputs are added to the residual stream.
bool is_residual_projection(const std::string& name);

/// GPT-2 initialisation, in named_parameters() order with one generator: every Linear and
/// Embedding weight \f$ \sim N(0, 0.02^2) \f$, residual projections (`is_residual`)
/// \f$ \sim N(0, (0.02/\sqrt{2 n_{layer}})^2) \f$ so that the variance of the residual stream
/// does not grow with depth, Linear biases 0, LayerNorm weight 1 and bias 0. Tensors keep their
/// identity (filled in place).
void init_gpt2_(
    Module& model, int64_t n_layer, Generator& gen,
    const std::function<bool(const std::string&)>& is_residual = is_residual_projection);

}  // namespace tt::nn
