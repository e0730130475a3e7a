// The process grid (tt/process_grid.h): coordinates with the last dim innermost and one group
// per dim, split from the world group.
#include "tt/process_grid.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tt/error.h"

namespace tt::tp {

namespace {

std::string describe_dims(const std::vector<GridDim>& dims) {
  std::string s = "{";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    s += detail::str(i ? ", " : "", dims[i].name, "=", dims[i].size);
  }
  return s + "}";
}

}  // namespace

ProcessGrid::ProcessGrid(dist::ProcessGroup& world, std::vector<GridDim> dims)
    : world_(&world), dims_(std::move(dims)) {
  const std::string what = detail::str("ProcessGrid", describe_dims(dims_), " on a world of ",
                                       world.world_size(), " ranks (", world.where(), ")");
  TT_CHECK(!dims_.empty(), what, ": needs at least one dimension");
  std::set<std::string> names;
  int64_t product = 1;
  for (const GridDim& d : dims_) {
    TT_CHECK(!d.name.empty() && names.insert(d.name).second, what,
             ": dimension names must be non-empty and distinct");
    TT_CHECK(d.size >= 1, what, ": dimension '", d.name, "' has size ", d.size, " (needs >= 1)");
    product *= d.size;
  }
  TT_CHECK(product == world.world_size(), what, ": the sizes multiply to ", product,
           ", not to the world size ", world.world_size());
  // Every rank must lay out the same grid: a rank with other sizes would split the world into
  // groups its peers do not expect (and train on wrong data without an error). One small
  // all-gather of the sizes, compared on every rank, makes that an error everywhere instead.
  {
    constexpr int64_t kSlots = 8;
    TT_CHECK(static_cast<int64_t>(dims_.size()) < kSlots, what, ": at most ", kSlots - 1,
             " dimensions");
    std::vector<int64_t> mine(kSlots, 0);
    mine[0] = static_cast<int64_t>(dims_.size());
    for (std::size_t i = 0; i < dims_.size(); ++i) mine[i + 1] = dims_[i].size;
    Tensor all = empty({world.world_size(), kSlots}, {DType::kInt64, Device::cpu()});
    world.all_gather(all, from_vector(mine, {kSlots}));
    const std::vector<int64_t> v = all.to_vector<int64_t>();
    for (int r = 0; r < world.world_size(); ++r) {
      const std::vector<int64_t> theirs(v.begin() + r * kSlots, v.begin() + (r + 1) * kSlots);
      if (theirs == mine) continue;
      std::string sizes;
      for (int64_t i = 1; i <= theirs[0]; ++i) sizes += detail::str(i > 1 ? " x " : "", theirs[i]);
      TT_THROW(what, ": world rank ", r, " lays out a grid of ", sizes.empty() ? "?" : sizes,
               " instead; every rank must build the same grid, in the same order");
    }
  }
  coords_ = coordinates_of(world.rank());
  for (const GridDim& d : dims_) groups_.push_back(split_over({d.name}));
}

std::unique_ptr<dist::ProcessGroup> ProcessGrid::split_over(
    const std::vector<std::string>& names) const {
  TT_CHECK(!names.empty(), "ProcessGrid::split_over: no dimension named (", where(), ")");
  std::vector<bool> over(dims_.size(), false);
  for (const std::string& name : names) {
    const int d = dim_index(name);
    TT_CHECK(!over[d], "ProcessGrid::split_over: dimension '", name, "' named twice (", where(),
             ")");
    over[d] = true;
  }
  // The group: the ranks equal on every other coordinate. Color = this rank's world rank with
  // the named coordinates set to 0 (the same for the whole group, distinct between groups);
  // key = this rank's place in the sub-grid of the named dims (in grid order, the last
  // innermost), its rank inside the group.
  std::vector<int> base = coords_;
  int key = 0;
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    if (!over[d]) continue;
    key = key * dims_[d].size + coords_[d];
    base[d] = 0;
  }
  return world_->split(rank_of(base), key);
}

ProcessGrid ProcessGrid::dp_tp(dist::ProcessGroup& world, int tp) {
  const int n = world.world_size();
  TT_CHECK(tp >= 1 && n % tp == 0, "ProcessGrid::dp_tp(tp=", tp, ") on a world of ", n, " ranks (",
           world.where(),
           "): the tensor-parallel size must be >= 1 and divide the "
           "world size");
  return ProcessGrid(world, {{"dp", n / tp}, {"tp", tp}});
}

int ProcessGrid::dim_index(const std::string& name) const {
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].name == name) return static_cast<int>(i);
  }
  TT_THROW("ProcessGrid: no dimension '", name, "' in ", describe_dims(dims_));
}

std::vector<int> ProcessGrid::coordinates_of(int rank) const {
  TT_CHECK(rank >= 0 && rank < world_->world_size(), "ProcessGrid::coordinates_of(", rank,
           "): not a rank of a world of ", world_->world_size());
  std::vector<int> c(dims_.size());
  for (std::size_t i = dims_.size(); i-- > 0;) {
    c[i] = rank % dims_[i].size;
    rank /= dims_[i].size;
  }
  return c;
}

int ProcessGrid::rank_of(const std::vector<int>& coords) const {
  TT_CHECK(coords.size() == dims_.size(), "ProcessGrid::rank_of: ", coords.size(),
           " coordinates for the ", dims_.size(), " dims of ", describe_dims(dims_));
  int rank = 0;
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    TT_CHECK(coords[i] >= 0 && coords[i] < dims_[i].size, "ProcessGrid::rank_of: coordinate ",
             coords[i], " outside dimension '", dims_[i].name, "' of size ", dims_[i].size);
    rank = rank * dims_[i].size + coords[i];
  }
  return rank;
}

std::string ProcessGrid::where() const {
  std::string s = detail::str(world_->where(), " (");
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    s += detail::str(i ? ", " : "", dims_[i].name, " ", coords_[i], " of ", dims_[i].size);
  }
  return s + ")";
}

void connect_world_gpus(DeviceType type) {
  if (type == DeviceType::kCUDA) dist::world().init_cuda();
}

void release_world_gpus() {
  dist::world().release_cuda();
}

}  // namespace tt::tp
