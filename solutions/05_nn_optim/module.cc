// Chapter 05 exercise ch05.1: the pre-order traversal behind parameters(), named_parameters()
// and named_buffers(), with dotted names and deduplication of shared tensors. The rest of
// Module (registration, train/eval, in-place device moves, printing) is given.
#include <functional>
#include <sstream>
#include <unordered_set>

#include "tt/module.h"
#include "tt/todo.h"

namespace tt::nn {

namespace {

/// "prefix.name", or "name" when prefix is empty.
std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

/// The tensors of `root`'s tree with their dotted names, pre-order: first `root`'s own list
/// (`own(m)` gives it: parameters or buffers), then each child's, recursively when `recurse`,
/// in registration order. A tensor whose TensorImpl was already listed is skipped.
std::vector<NamedTensor> named_tensors(
    const Module& root, bool recurse,
    const std::function<const std::vector<NamedTensor>&(const Module&)>& own) {
#if TT_SOLUTION
  std::vector<NamedTensor> out;
  std::unordered_set<const TensorImpl*> seen;
  // Module trees are shallow (a GPT-2 is 4 levels deep), so plain recursion is fine here.
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m,
                                                                     const std::string& prefix) {
    for (const auto& [name, t] : own(m)) {
      if (seen.insert(t.impl().get()).second) out.emplace_back(join_name(prefix, name), t);
    }
    if (!recurse) return;
    for (const auto& [name, child] : m.named_children()) visit(*child, join_name(prefix, name));
  };
  visit(root, "");
  return out;
#else
  TT_TODO("ch05.1",
          "Module::named_parameters: root's tensors with dotted names ('h.0.attn.weight'), "
          "pre-order in registration order (own list first, then each child's, only when "
          "recurse); a tensor whose TensorImpl was already listed appears once, under its first "
          "name");
#endif
}

}  // namespace

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

void Module::check_new_name(const std::string& name, const char* what) const {
  TT_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name_, "::register_", what,
           ": invalid name '", name, "' (it must be non-empty and contain no '.')");
  auto taken = [&](const auto& list) {
    for (const auto& entry : list) {
      if (entry.first == name) return true;
    }
    return false;
  };
  TT_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), type_name_, "::register_",
           what, ": the name '", name, "' is already used by a parameter, buffer or submodule");
}

Tensor Module::register_parameter(const std::string& name, Tensor param) {
  check_new_name(name, "parameter");
  TT_CHECK(param.defined(), type_name_, "::register_parameter: '", name, "' is undefined");
  TT_CHECK(is_floating(param.dtype()), type_name_, "::register_parameter: '", name,
           "' must be float32 or float64, got ", param.describe());
  TT_CHECK(param.is_leaf(), type_name_, "::register_parameter: '", name,
           "' is the result of an operation; register a leaf (use detach())");
  param.set_requires_grad(true);
  params_.emplace_back(name, param);
  return param;
}

Tensor Module::register_buffer(const std::string& name, Tensor buffer) {
  check_new_name(name, "buffer");
  TT_CHECK(buffer.defined(), type_name_, "::register_buffer: '", name, "' is undefined");
  buffers_.emplace_back(name, buffer);
  return buffer;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_new_name(name, "module");
  TT_CHECK(child != nullptr, type_name_, "::register_module: '", name, "' is null");
  for (const auto& [unused, m] : child->named_modules()) {
    TT_CHECK(m != this, type_name_, "::register_module: '", name,
             "' contains this module (a module tree cannot have cycles)");
  }
  children_.emplace_back(name, std::move(child));
}

std::vector<NamedTensor> Module::named_parameters(bool recurse) const {
  return named_tensors(*this, recurse, [](const Module& m) -> const std::vector<NamedTensor>& {
    return m.own_parameters();
  });
}

std::vector<NamedTensor> Module::named_buffers(bool recurse) const {
  return named_tensors(*this, recurse, [](const Module& m) -> const std::vector<NamedTensor>& {
    return m.own_buffers();
  });
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(std::move(t));
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  std::unordered_set<const Module*> seen;
  std::function<void(Module&, const std::string&)> visit = [&](Module& m,
                                                               const std::string& prefix) {
    if (!seen.insert(&m).second) return;
    out.emplace_back(prefix, &m);
    for (const auto& [name, child] : m.children_) visit(*child, join_name(prefix, name));
  };
  visit(*this, "");
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

Module& Module::train(bool on) {
  for (auto& [name, m] : named_modules()) m->training_ = on;
  return *this;
}

Module& Module::to(Device device) {
  std::vector<Tensor> tensors;
  for (const Tensor& p : parameters()) {
    tensors.push_back(p);
    tensors.push_back(p.grad());
  }
  for (auto& [name, b] : named_buffers()) tensors.push_back(b);
  move_to_device_(tensors, device);
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  zero_grad_(parameters(), set_to_none);
}

StateDict Module::state_dict() const {
  StateDict out = named_parameters();
  for (auto& entry : named_buffers()) out.push_back(std::move(entry));
  return out;
}

void Module::load_state_dict(const StateDict& state, const std::string& source, bool strict) {
  apply_state_dict(state_dict(), state, source, strict);
}

Tensor Module::forward(const Tensor&) {
  TT_THROW(type_name_, " has no forward(Tensor): call its children (or the model's own forward)");
}

std::string Module::to_string() const {
  std::ostringstream os;
  os << type_name_ << '(' << extra_repr();
  if (!children_.empty()) {
    os << '\n';
    for (const auto& [name, child] : children_) {
      // Indent the child's (possibly multi-line) text by two spaces.
      std::istringstream lines(child->to_string());
      std::string line;
      bool first = true;
      while (std::getline(lines, line)) {
        os << "  " << (first ? "(" + name + "): " : "") << line << '\n';
        first = false;
      }
    }
  }
  os << ')';
  return os.str();
}

void zero_grad_(const std::vector<Tensor>& params, bool set_to_none) {
  for (const Tensor& p : params) {
    if (set_to_none) {
      p.set_grad(Tensor());
    } else if (p.grad().defined()) {
      p.grad().fill_(0.0);
    }
  }
}

void move_to_device_(const std::vector<Tensor>& tensors, Device device) {
  std::unordered_set<const Storage*> done;
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.device() == device || !done.insert(t.storage().get()).second) continue;
    Storage& storage = *t.storage();
    // The whole storage, seen as a flat tensor of t's dtype (views may cover only part of it).
    const auto n = static_cast<int64_t>(storage.nbytes() / dtype_size(t.dtype()));
    Tensor moved = empty({n}, {t.dtype(), device});
    if (n > 0) moved.copy_(Tensor(t.storage(), {n}, {1}, 0, t.dtype()));
    storage.swap(*moved.storage());  // `moved` now holds the old memory and frees it
  }
}

}  // namespace tt::nn
