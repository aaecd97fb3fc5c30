// Constant sharing across methods. See constant_sharing.hpp.
#include "runtime/constant_sharing.hpp"

#include <cstdio>

#include "common/cuda.hpp"
#include "common/env.hpp"
#include "shim/handle_capture.hpp"

namespace aoti_cuda::runtime {
namespace {

// Same dtype, device, sizes, strides and storage offset: one may stand in for the other.
bool same_layout(AtenTensorHandle a, AtenTensorHandle b) {
  int32_t da = 0, db = 0, ta = 0, tb = 0;
  int64_t na = 0, nb = 0, oa = 0, ob = 0;
  int64_t *sa = nullptr, *sb = nullptr, *st_a = nullptr, *st_b = nullptr;
  if (aoti_torch_get_dtype(a, &da) || aoti_torch_get_dtype(b, &db) || aoti_torch_get_device_type(a, &ta) ||
      aoti_torch_get_device_type(b, &tb) || aoti_torch_get_dim(a, &na) || aoti_torch_get_dim(b, &nb) ||
      aoti_torch_get_storage_offset(a, &oa) || aoti_torch_get_storage_offset(b, &ob) ||
      aoti_torch_get_sizes(a, &sa) || aoti_torch_get_sizes(b, &sb) || aoti_torch_get_strides(a, &st_a) ||
      aoti_torch_get_strides(b, &st_b)) {
    return false;
  }
  if (da != db || ta != tb || na != nb || oa != ob) return false;
  for (int64_t i = 0; i < na; ++i) {
    if (sa[i] != sb[i] || st_a[i] != st_b[i]) return false;
  }
  return true;
}

// The non-folded constants of a container, in table order (the order in
// which installing a weights blob creates their handles). False when the
// library cannot describe them.
bool list_constants(const ContainerApi& api, ContainerHandle c, std::vector<ConstantEntry>& out) {
  out.clear();
  if (api.get_num_constants == nullptr || api.get_constant_name == nullptr || api.get_constant_original_fqn == nullptr ||
      api.get_constant_from_folded == nullptr || api.get_constant_dtype == nullptr ||
      api.get_constant_data_size == nullptr) {
    return false;
  }
  std::size_t n = 0;
  if (api.get_num_constants(c, &n) != 0) return false;
  for (std::size_t i = 0; i < n; ++i) {
    bool folded = false;
    const char* name = nullptr;
    const char* fqn = nullptr;
    ConstantEntry e;
    if (api.get_constant_from_folded(c, i, &folded) != 0) return false;
    if (folded) continue;
    if (api.get_constant_name(c, i, &name) != 0 || name == nullptr || api.get_constant_original_fqn(c, i, &fqn) != 0 ||
        api.get_constant_dtype(c, i, &e.dtype) != 0 || api.get_constant_data_size(c, i, &e.data_size) != 0) {
      return false;
    }
    e.name = name;
    e.fqn = fqn != nullptr ? fqn : "";
    out.push_back(std::move(e));
  }
  return true;
}

}  // namespace

void ConstantSharing::read_table(Delegate& d) {
  d.constants_known = list_constants(d.library->api(), d.container, d.constants);
}

void ConstantSharing::remember(const Delegate& d) {
  const std::vector<ConstantEntry>& entries = d.constants;
  if (!d.constants_known || entries.size() != d.constant_handles.size()) return;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    if (entries[k].fqn.empty()) continue;
    held_.emplace(entries[k].fqn, HeldConstant{d.constant_handles[k], entries[k].dtype, entries[k].data_size});
  }
}

bool ConstantSharing::try_adopt_all(Delegate& d, std::uint64_t weights_bytes) {
  const ContainerApi& api = d.library->api();
  if (held_.empty() || api.update_user_managed_constant_buffer_pairs == nullptr) return false;
  if (!d.constants_known || d.constants.empty()) return false;
  std::vector<ContainerApi::ConstantMapEntry> pairs;
  for (const ConstantEntry& e : d.constants) {
    const auto it = held_.find(e.fqn);
    if (e.fqn.empty() || it == held_.end() || it->second.dtype != e.dtype || it->second.data_size != e.data_size) {
      if (env_flag("AOTI_CUDA_TRACE_SHARING")) {
        std::fprintf(stderr, "[aoti_cuda] %s: uploads its own weights: constant '%s' (fqn '%s', dtype %d, %zu bytes) %s\n",
                     d.label.c_str(), e.name.c_str(), e.fqn.c_str(), e.dtype, e.data_size,
                     it == held_.end() ? "is not held by an earlier method" : "differs from the held copy");
      }
      return false;
    }
    pairs.push_back({e.name.c_str(), it->second.handle});
  }
  common::DeviceGuard on_device(target_.ordinal());
  aoti_cuda_shim_clear_error();
  std::vector<AtenTensorHandle> aliases;
  bool ok;
  {
    shim::HandleCapture capture(shim::CreatedBy::kAlias, &aliases);
    ok = api.update_user_managed_constant_buffer_pairs(d.container, pairs.data(), pairs.size(), /*use_inactive=*/false,
                                                       /*validate_full_update=*/true) == 0;
  }
  if (!ok) {
    // The library refused: release what it made; the caller uploads its own weights instead.
    for (AtenTensorHandle h : aliases) (void)aoti_torch_delete_tensor_object(h);
    aoti_cuda_shim_clear_error();
    return false;
  }
  d.shared_aliases.insert(d.shared_aliases.end(), aliases.begin(), aliases.end());
  d.constants_adopted = true;
  shared_constants_ += pairs.size();
  shared_weights_bytes_ += weights_bytes;
  return true;
}

bool ConstantSharing::bind_delegate(Delegate& d) {
  const ContainerApi& api = d.library->api();
  const std::vector<ConstantEntry>& entries = d.constants;
  // The handles must pair up one-to-one with the constants, else the layout
  // is unknown and this delegate keeps its own copies.
  if (api.update_user_managed_constant_buffer_pairs == nullptr || !d.constants_known ||
      entries.size() != d.constant_handles.size()) {
    return false;
  }
  std::vector<ContainerApi::ConstantMapEntry> pairs;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const auto it = held_.find(entries[k].fqn);  // empty FQNs are never held
    if (it == held_.end() || it->second.handle == d.constant_handles[k]) continue;
    if (same_layout(it->second.handle, d.constant_handles[k])) pairs.push_back({entries[k].name.c_str(), it->second.handle});
  }
  if (pairs.empty()) return false;
  common::DeviceGuard on_device(target_.ordinal());
  aoti_cuda_shim_clear_error();
  shim::HandleCapture capture(shim::CreatedBy::kAlias, &d.shared_aliases);
  if (api.update_user_managed_constant_buffer_pairs(d.container, pairs.data(), pairs.size(),
                                                    /*use_inactive=*/false, /*validate_full_update=*/false) != 0) {
    throw Error(ErrorCode::kModel, d.label + ": sharing " + std::to_string(pairs.size()) +
                                       " constant(s) with an earlier method failed: " + model_failure_detail(api) +
                                       " (load with LoadOptions::share_constants_across_methods = false to keep "
                                       "per-method copies)");
  }
  shared_constants_ += pairs.size();
  return true;
}

void ConstantSharing::bind_remaining(const std::vector<std::unique_ptr<Method>>& methods) {
  for (const auto& method : methods) {
    for (const auto& d : method->delegates) {
      if (!d->constants_adopted) (void)bind_delegate(*d);  // adopted ones are bound to earlier copies already
    }
  }
}

}  // namespace aoti_cuda::runtime
