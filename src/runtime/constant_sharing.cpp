// Constants of different methods: deduplication and explicit state sharing.
// See constant_sharing.hpp.
#include "runtime/constant_sharing.hpp"

#include <algorithm>
#include <set>

#include "aoti_cuda/log.hpp"
#include "common/cuda.hpp"
#include "common/env.hpp"
#include "common/text.hpp"
#include "runtime/weights_io.hpp"
#include "shim/handle_capture.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda::runtime {
namespace {

using common::Clock;
using common::ms_since;

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
// library cannot describe them. A library without GetConstantType reports
// every constant as kNotReported (never deduplicated; counted as state).
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
    int32_t type = 0;
    ConstantEntry e;
    if (api.get_constant_from_folded(c, i, &folded) != 0) return false;
    if (folded) continue;
    if (api.get_constant_name(c, i, &name) != 0 || name == nullptr || api.get_constant_original_fqn(c, i, &fqn) != 0 ||
        api.get_constant_dtype(c, i, &e.dtype) != 0 || api.get_constant_data_size(c, i, &e.data_size) != 0) {
      return false;
    }
    if (api.get_constant_type != nullptr && api.get_constant_type(c, i, &type) == 0 && type >= 0 && type <= 3) {
      e.type = static_cast<ConstantType>(type);
    }
    e.name = name;
    e.fqn = fqn != nullptr ? fqn : "";
    out.push_back(std::move(e));
  }
  return true;
}

// Where the delegate's blob puts each constant (aoti-abi.md §8.2/§8.4):
// chunks in table order, unpadded for all-CUDA models, 64-byte padded for
// models with host constants. The variant whose total is the blob size wins.
void locate_in_blob(Delegate& d) {
  d.blob_layout_known = false;
  if (!d.constants_known || d.constants.empty() || d.spec->weights.empty()) return;
  std::uint64_t blob = d.spec->weights.size;
  std::uint64_t reported = 0;
  const ContainerApi& api = d.library->api();
  if (api.get_constants_blob_size != nullptr && api.get_constants_blob_size(d.container, &reported) == 0 &&
      reported > 0 && reported <= blob) {
    blob = reported;
  }
  std::vector<std::size_t> sizes;
  for (const ConstantEntry& e : d.constants) sizes.push_back(e.data_size);
  for (bool padded : {false, true}) {
    std::uint64_t total = 0;
    const std::vector<std::uint64_t> offsets = blob_offsets(sizes, padded, &total);
    if (total != blob) continue;
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      d.constants[i].blob_offset = offsets[i];
      d.constants[i].initial = ByteView{d.spec->weights.data + offsets[i], d.constants[i].data_size};
    }
    d.blob_layout_known = true;
    return;
  }
}

void trace(const Delegate& d, const std::string& why) {
  if (env_flag("AOTI_CUDA_TRACE_SHARING")) log(LogLevel::kDebug, d.label + ": " + why);
}

const char* type_name(ConstantType t) {
  switch (t) {
    case ConstantType::kParameter: return "parameter";
    case ConstantType::kBuffer: return "buffer";
    case ConstantType::kTensorConstant: return "tensor constant";
    case ConstantType::kFolded: return "folded constant";
    case ConstantType::kUnknown: return "constant of type Unknown";
    case ConstantType::kNotReported: break;
  }
  return "constant whose type the library does not report";
}

}  // namespace

bool bind_pairs(Delegate& d, int device, const std::vector<ContainerApi::ConstantMapEntry>& pairs, bool full) {
  const ContainerApi& api = d.library->api();
  common::DeviceGuard on_device(device);
  aoti_cuda_shim_clear_error();
  std::vector<AtenTensorHandle> aliases;
  bool ok;
  {
    shim::HandleCapture capture(shim::CreatedBy::kAlias, &aliases);
    ok = api.update_user_managed_constant_buffer_pairs(d.container, pairs.data(), pairs.size(), /*use_inactive=*/false,
                                                       /*validate_full_update=*/full) == 0;
  }
  if (!ok) {
    for (AtenTensorHandle h : aliases) (void)aoti_torch_delete_tensor_object(h);
    return false;
  }
  d.shared_aliases.insert(d.shared_aliases.end(), aliases.begin(), aliases.end());
  return true;
}

std::vector<std::uint64_t> blob_offsets(const std::vector<std::size_t>& sizes, bool padded, std::uint64_t* total) {
  std::vector<std::uint64_t> offsets;
  std::uint64_t at = 0;
  for (std::size_t s : sizes) {
    offsets.push_back(at);
    at += padded ? (static_cast<std::uint64_t>(s) + 63) / 64 * 64 : s;
  }
  *total = at;
  return offsets;
}

void ConstantSharing::read_table(Delegate& d) {
  d.constants_known = list_constants(d.library->api(), d.container, d.constants);
  locate_in_blob(d);
}

bool ConstantSharing::explicitly_requested(const ConstantEntry& e) const {
  return !e.fqn.empty() && std::find(share_state_.fqns.begin(), share_state_.fqns.end(), e.fqn) != share_state_.fqns.end();
}

bool ConstantSharing::shares_state(const ConstantEntry& e) const {
  if (e.fqn.empty()) return false;
  return (share_state_.all_buffers && e.type == ConstantType::kBuffer) || explicitly_requested(e);
}

void ConstantSharing::check_requests(const std::vector<const Delegate*>& all) const {
  for (const std::string& fqn : share_state_.fqns) {
    const Delegate* first = nullptr;
    const ConstantEntry* first_entry = nullptr;
    std::size_t unreadable = 0;
    for (const Delegate* d : all) {
      unreadable += d->constants_known ? 0 : 1;
      for (const ConstantEntry& e : d->constants) {
        if (e.fqn != fqn) continue;
        if (first_entry == nullptr) {
          first = d;
          first_entry = &e;
        } else if (e.dtype != first_entry->dtype || e.data_size != first_entry->data_size) {
          throw Error(ErrorCode::kInvalidArgument,
                      "LoadOptions::share_state names '" + fqn + "', which differs between methods: " + first->label +
                          " holds dtype " + std::to_string(first_entry->dtype) + ", " +
                          std::to_string(first_entry->data_size) + " bytes; " + d->label + " holds dtype " +
                          std::to_string(e.dtype) + ", " + std::to_string(e.data_size) + " bytes");
        }
      }
    }
    if (first_entry == nullptr) {
      std::vector<std::string> buffers;
      for (const Delegate* d : all) {
        for (const ConstantEntry& e : d->constants) {
          const std::string quoted = "'" + e.fqn + "'";  // each FQN once, however many methods hold it
          if (e.type == ConstantType::kBuffer && std::find(buffers.begin(), buffers.end(), quoted) == buffers.end()) {
            buffers.push_back(quoted);
          }
        }
      }
      if (buffers.size() > 12) buffers.resize(12), buffers.push_back("...");
      throw Error(ErrorCode::kNotFound,
                  "LoadOptions::share_state names '" + fqn + "', which no loaded method holds (buffers: " +
                      (buffers.empty() ? std::string("none") : common::join(buffers)) + ")" +
                      (unreadable > 0 ? "; " + std::to_string(unreadable) + " model librar" +
                                            (unreadable == 1 ? "y does" : "ies do") + " not describe their constants"
                                      : std::string("")));
    }
  }
}

const ConstantSharing::Held* ConstantSharing::find_match(const Delegate& d, const ConstantEntry& e) {
  if (e.fqn.empty()) return nullptr;
  const auto range = held_.equal_range(e.fqn);
  if (shares_state(e)) {
    for (auto it = range.first; it != range.second; ++it) {
      const ConstantEntry& h = it->second.owner->constants[it->second.index];
      if (h.dtype == e.dtype && h.data_size == e.data_size) return &it->second;
    }
    return nullptr;
  }
  if (!deduplicate_ || !e.read_only() || !d.blob_layout_known) return nullptr;
  for (auto it = range.first; it != range.second; ++it) {
    const Delegate& owner = *it->second.owner;
    const ConstantEntry& h = owner.constants[it->second.index];
    if (!h.read_only() || !owner.blob_layout_known || h.dtype != e.dtype || h.data_size != e.data_size) continue;
    const auto t0 = Clock::now();
    const bool equal = bytes_equal(e.initial.data, h.initial.data, e.data_size);
    compare_ms_ += ms_since(t0);
    if (equal) return &it->second;
  }
  return nullptr;
}

bool ConstantSharing::try_adopt_all(Delegate& d) {
  if (held_.empty()) {
    trace(d, "uploads its own weights: no earlier method holds constants to compare with");
    return false;
  }
  if (d.library->api().update_user_managed_constant_buffer_pairs == nullptr) {
    trace(d, "uploads its own weights: its library cannot bind external constants");
    return false;
  }
  if (!d.constants_known || d.constants.empty()) {
    trace(d, "uploads its own weights: its constant table cannot be read");
    return false;
  }
  if (!d.blob_layout_known) trace(d, "the layout of its weights blob is unknown: only shared state can be bound");
  std::vector<ContainerApi::ConstantMapEntry> pairs;
  std::vector<AtenTensorHandle> in_use;
  std::size_t read_only = 0;
  for (const ConstantEntry& e : d.constants) {
    const Held* h = find_match(d, e);
    if (h == nullptr) {
      trace(d, "uploads its own weights: " + std::string(type_name(e.type)) + " '" + e.name + "' (fqn '" + e.fqn +
                   "', dtype " + std::to_string(e.dtype) + ", " + std::to_string(e.data_size) +
                   " bytes) has no identical earlier copy" + (shares_state(e) ? "" : " and is not shared state"));
      return false;
    }
    pairs.push_back({e.name.c_str(), h->handle});
    in_use.push_back(h->handle);
    read_only += shares_state(e) ? 0 : 1;
  }
  if (!bind_pairs(d, target_.ordinal(), pairs, /*full=*/true)) {
    trace(d, "uploads its own weights: the library refused the earlier copies: " + model_failure_detail(d.library->api()));
    aoti_cuda_shim_clear_error();
    return false;
  }
  d.in_use = std::move(in_use);
  d.constants_adopted = true;
  deduplicated_constants_ += read_only;
  shared_state_constants_ += pairs.size() - read_only;
  deduplicated_bytes_ += d.spec->weights.size;
  return true;
}

AtenTensorHandle ConstantSharing::state_to_share(const Delegate& d, const ConstantEntry& e,
                                                 const FqnWeightSpec& view) const {
  if (!shares_state(e)) return nullptr;
  const auto range = held_.equal_range(e.fqn);
  for (auto it = range.first; it != range.second; ++it) {
    const ConstantEntry& h = it->second.owner->constants[it->second.index];
    if (h.dtype != e.dtype || h.data_size != e.data_size) continue;
    int32_t dtype = 0;
    int64_t dim = 0, offset = 0;
    int64_t *sizes = nullptr, *strides = nullptr;
    const AtenTensorHandle held = it->second.handle;
    bool same = aoti_torch_get_dtype(held, &dtype) == 0 && aoti_torch_get_dim(held, &dim) == 0 &&
                aoti_torch_get_storage_offset(held, &offset) == 0 && aoti_torch_get_sizes(held, &sizes) == 0 &&
                aoti_torch_get_strides(held, &strides) == 0 && dtype == static_cast<int32_t>(view.dtype) &&
                dim == static_cast<int64_t>(view.sizes.size()) && offset == view.storage_offset;
    for (int64_t i = 0; same && i < dim; ++i) same = sizes[i] == view.sizes[i] && strides[i] == view.strides[i];
    if (same) return held;
    if (explicitly_requested(e)) {
      throw Error(ErrorCode::kInvalidArgument, "LoadOptions::share_state names '" + e.fqn + "', whose layout in " +
                                                   d.label + " differs from the one in " + it->second.owner->label);
    }
    trace(d, "keeps its own buffer '" + e.fqn + "': its layout differs from " + it->second.owner->label + "'s");
    return nullptr;
  }
  return nullptr;
}

std::size_t mark_program_constants(const std::vector<const Delegate*>& delegates) {
  auto storage_of = [](AtenTensorHandle h) -> shim::Storage* {
    return h != nullptr && h->magic == AtenTensorOpaque::kLiveMagic ? h->storage.get() : nullptr;
  };
  // Two passes: a storage any container uses as state must never be marked, even where another container sees the
  // same bytes as a read-only constant.
  std::set<const shim::Storage*> written;
  std::vector<shim::Storage*> candidates;
  for (const Delegate* d : delegates) {
    if (!d->constants_known || d->in_use.size() != d->constants.size()) continue;
    for (std::size_t k = 0; k < d->constants.size(); ++k) {
      shim::Storage* s = storage_of(d->in_use[k]);
      if (s == nullptr) continue;
      if (d->constants[k].read_only()) candidates.push_back(s);
      else written.insert(s);
    }
  }
  std::size_t marked = 0;
  for (shim::Storage* s : candidates) {
    if (s->program_constant || written.count(s) != 0) continue;
    s->program_constant = true;
    ++marked;
  }
  return marked;
}

void ConstantSharing::record_installed(const Delegate& d) {
  if (!d.constants_known || d.in_use.size() != d.constants.size()) return;
  for (std::size_t k = 0; k < d.constants.size(); ++k) {
    const bool own = k < d.constant_handles.size() && d.constant_handles[k] == d.in_use[k];
    if (own && !d.constants[k].fqn.empty()) held_.emplace(d.constants[k].fqn, Held{&d, k, d.in_use[k]});
  }
}

void ConstantSharing::after_upload(Delegate& d) {
  // The handles pair up with the constants only when the library made one per constant.
  if (!d.constants_known || d.constant_handles.size() != d.constants.size()) {
    trace(d, "its constants are not offered to later methods: " +
                 (d.constants_known ? "installing its blob made " + std::to_string(d.constant_handles.size()) +
                                          " tensor handles for " + std::to_string(d.constants.size()) + " constants"
                                    : std::string("its constant table cannot be read")));
    return;
  }
  trace(d, "offers " + std::to_string(d.constants.size()) + " constants to later methods (blob layout " +
               (d.blob_layout_known ? "known" : "unknown") + ")");
  d.in_use = d.constant_handles;
  std::vector<ContainerApi::ConstantMapEntry> pairs;
  std::vector<std::size_t> bound;
  for (std::size_t k = 0; k < d.constants.size(); ++k) {
    const ConstantEntry& e = d.constants[k];
    if (!shares_state(e)) continue;
    const Held* h = find_match(d, e);
    if (h == nullptr) continue;  // the first holder of this buffer, or a mismatch check_requests allowed
    if (!same_layout(h->handle, d.constant_handles[k])) {
      if (explicitly_requested(e)) {
        throw Error(ErrorCode::kInvalidArgument, "LoadOptions::share_state names '" + e.fqn + "', whose layout in " +
                                                     d.label + " differs from the one in " + h->owner->label);
      }
      trace(d, "keeps its own buffer '" + e.fqn + "': its layout differs from " + h->owner->label + "'s");
      continue;
    }
    pairs.push_back({e.name.c_str(), h->handle});
    bound.push_back(k);
    d.in_use[k] = h->handle;
  }
  if (!pairs.empty()) {
    if (d.library->api().update_user_managed_constant_buffer_pairs == nullptr ||
        !bind_pairs(d, target_.ordinal(), pairs, /*full=*/false)) {
      throw Error(ErrorCode::kModel, d.label + ": sharing " + std::to_string(pairs.size()) +
                                         " buffer(s) with an earlier method (LoadOptions::share_state) failed: " +
                                         model_failure_detail(d.library->api()));
    }
    shared_state_constants_ += pairs.size();
  }
  for (std::size_t k = 0; k < d.constants.size(); ++k) {
    if (std::find(bound.begin(), bound.end(), k) != bound.end() || d.constants[k].fqn.empty()) continue;
    held_.emplace(d.constants[k].fqn, Held{&d, k, d.constant_handles[k]});
  }
}

}  // namespace aoti_cuda::runtime
