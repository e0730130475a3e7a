/// @file module.h
/// @brief Module: a tree of named parameters, buffers and submodules, with traversal
/// (parameters, named_parameters), train/eval, in-place device moves and state dicts.
///
/// A module owns its tensors by *name*, in registration order:
/// @code
/// struct Block : Module {
///   Block() : Module("Block") {
///     ln = register_module("ln", std::make_shared<LayerNorm>(8));
///     scale = register_parameter("scale", ones({8}));
///   }
///   std::shared_ptr<LayerNorm> ln;
///   Tensor scale;
/// };
/// @endcode
/// Members such as `scale` are handles to the registered tensors (a Tensor copy refers to the
/// same tensor), so traversal, optimizers and checkpoints all see the same objects. The full
/// name of a tensor is the dotted path from the root: "h.0.attn.c_attn.weight".
///
/// Sharing (weight tying): the same tensor may be registered more than once (e.g. GPT-2's
/// token embedding is also its output projection). parameters(), named_parameters() and
/// state_dict() list each distinct tensor (same TensorImpl) once, under the first name met in
/// traversal order, so an optimizer updates it once and a checkpoint stores it once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt/tensor.h"

namespace tt::nn {

/// A tensor with its (dotted) name.
using NamedTensor = std::pair<std::string, Tensor>;

/// An ordered list of named tensors: what state_dict() returns and a checkpoint stores.
/// The tensors are handles to the live ones (not copies): clone them for a snapshot.
using StateDict = std::vector<NamedTensor>;

/// Base class of every layer: ordered, named registration of parameters, buffers and children.
/// Modules are held by std::shared_ptr (a child may be shared by two parents); they are not
/// copyable.
class Module {
 public:
  /// A module whose type name (used when printing) is `type_name`, e.g. "Linear".
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // ----- registration -------------------------------------------------------------------
  /// Registers `param` as parameter `name` (no '.' allowed, unique among this module's
  /// parameters, buffers and children), marks it requires_grad, and returns the same handle.
  Tensor register_parameter(const std::string& name, Tensor param);
  /// Registers `buffer` as buffer `name`: state that is saved and moved but not trained.
  Tensor register_buffer(const std::string& name, Tensor buffer);
  /// Registers `child` as submodule `name` and returns it (typed), e.g.
  /// `fc = register_module("fc", std::make_shared<Linear>(4, 8));`.
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    add_child(name, child);
    return child;
  }

  // ----- traversal ----------------------------------------------------------------------
  /// Every distinct parameter of this module and, when `recurse`, of its descendants, each
  /// once (deduplicated by TensorImpl), in the order of named_parameters().
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// (dotted name, parameter) pairs in pre-order: this module's own parameters in registration
  /// order, then each child's (recursively) in registration order. A tensor met a second time
  /// (tied weights, a shared child) is skipped (exercise ch05.1).
  std::vector<NamedTensor> named_parameters(bool recurse = true) const;
  /// (dotted name, buffer) pairs, in the same order and with the same deduplication.
  std::vector<NamedTensor> named_buffers(bool recurse = true) const;
  /// This module's direct children, in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  /// Every module of the tree in pre-order with its dotted name ("" for this one); a module
  /// shared by two parents is listed once.
  std::vector<std::pair<std::string, Module*>> named_modules();
  /// This module's own parameters (no recursion), in registration order.
  const std::vector<NamedTensor>& own_parameters() const { return params_; }
  /// This module's own buffers (no recursion), in registration order.
  const std::vector<NamedTensor>& own_buffers() const { return buffers_; }
  /// Total number of elements of parameters() (tied tensors counted once).
  int64_t num_parameters() const;

  // ----- mode, device, gradients --------------------------------------------------------
  /// Sets training mode on this module and every descendant. Returns *this.
  Module& train(bool on = true);
  /// train(false).
  Module& eval() { return train(false); }
  /// True in training mode (the default).
  bool is_training() const { return training_; }
  /// Moves every parameter, buffer and gradient to `device` IN PLACE (see move_to_device_):
  /// the tensor objects stay the same, so handles held elsewhere (tied weights, an optimizer)
  /// see the new memory. A no-op for tensors already there. Returns *this.
  Module& to(Device device);
  /// Clears the gradient of every parameter: undefined (`set_to_none`, the default, frees the
  /// memory) or filled with zeros.
  void zero_grad(bool set_to_none = true);

  // ----- state --------------------------------------------------------------------------
  /// named_parameters() followed by named_buffers(): handles to the live tensors.
  StateDict state_dict() const;
  /// Copies the values of `state` into this module's tensors after validating all of them
  /// (see apply_state_dict: keys, shapes, dtypes); nothing is modified when anything is
  /// wrong. `source` names the origin (a file path) in error messages.
  void load_state_dict(const StateDict& state, const std::string& source = "<state_dict>",
                       bool strict = true);

  // ----- forward and printing -----------------------------------------------------------
  /// The computation of a single-input module. The default throws tt::Error naming the type
  /// (containers such as ModuleList have no forward).
  virtual Tensor forward(const Tensor& input);
  /// forward(input).
  Tensor operator()(const Tensor& input) { return forward(input); }
  /// The type name given to the constructor.
  const std::string& type_name() const { return type_name_; }
  /// Settings shown in to_string() between the parentheses, e.g. "in=4, out=8, bias=true".
  virtual std::string extra_repr() const { return ""; }
  /// The module tree, one child per line, PyTorch style:
  /// "MLP(\n  (c_fc): Linear(in=8, out=16, bias=true)\n  ...\n)".
  std::string to_string() const;

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> child);
  void check_new_name(const std::string& name, const char* what) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<NamedTensor> params_;
  std::vector<NamedTensor> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// Moves the storage of every tensor in `tensors` to `device` in place: a new Storage is
/// allocated there, the bytes are copied, and the two storages swap their memory
/// (Storage::swap), so every tensor and view sharing that storage now lives on `device`.
/// Storages shared by several tensors are moved once; undefined tensors are skipped.
void move_to_device_(const std::vector<Tensor>& tensors, Device device);

/// Clears the gradient of each tensor: undefined when `set_to_none`, else zeros (when defined).
void zero_grad_(const std::vector<Tensor>& params, bool set_to_none = true);

/// Validates `state` against `targets` and only then copies: every target name must be in
/// `state` (unless !strict), every key of `state` must be a target (unless !strict), no key may
/// appear twice, and each pair must have the same shape and dtype. On any problem it throws one
/// tt::Error that names `source` and lists every problem with its key, and no target is
/// modified; otherwise each target receives its value with copy_ (devices may differ)
/// (exercise ch05.6).
void apply_state_dict(const StateDict& targets, const StateDict& state, const std::string& source,
                      bool strict = true);

/// `state` with `prefix` + "." prepended to every name.
StateDict prefixed(const std::string& prefix, const StateDict& state);

}  // namespace tt::nn
