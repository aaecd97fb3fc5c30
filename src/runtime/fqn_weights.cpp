// Installing per-FQN weights (ExecuTorch 1.5). See fqn_weights.hpp.
#include "runtime/fqn_weights.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "aoti_cuda/log.hpp"
#include "common/cuda.hpp"
#include "common/host_memory.hpp"
#include "common/text.hpp"
#include "format/mapped_file.hpp"
#include "runtime/cuda_hooks.hpp"
#include "runtime/weights_io.hpp"

namespace aoti_cuda::runtime {
namespace {

using common::Clock;
using common::ms_since;

constexpr std::size_t kChunkAlign = 64;  // AOTInductor pads a constant's data size to this when not all on CUDA

std::string entry_list(const DelegateSpec& ds) {
  std::vector<std::string> names;
  for (const FqnWeightSpec& w : ds.fqn_weights) {
    if (names.size() == 8) {
      names.push_back("...");
      break;
    }
    names.push_back("'" + w.fqn + "'");
  }
  return names.empty() ? std::string("none") : common::join(names);
}

// Closes a descriptor from format::reopen_file_of.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::size_t fqn_weight_bytes(const DelegateSpec& ds) noexcept {
  std::size_t n = 0;
  for (const FqnWeightSpec& w : ds.fqn_weights) n += w.storage.size;
  return n;
}

std::vector<std::size_t> match_fqn_constants(const Delegate& d) {
  const DelegateSpec& ds = *d.spec;
  if (!d.constants_known) {
    throw Error(ErrorCode::kLoad, d.label + ": its weights are stored per FQN (ExecuTorch 1.5), but the model library "
                                            "does not describe its constants (names, FQNs, dtypes, sizes), so they "
                                            "cannot be bound");
  }
  std::map<std::string_view, std::size_t> by_fqn;
  for (std::size_t i = 0; i < ds.fqn_weights.size(); ++i) by_fqn.emplace(ds.fqn_weights[i].fqn, i);
  std::vector<std::size_t> match;
  std::vector<bool> used(ds.fqn_weights.size(), false);
  for (const ConstantEntry& e : d.constants) {
    auto it = by_fqn.find(e.fqn);
    if (it == by_fqn.end()) it = by_fqn.find(e.name);
    const std::string what = d.label + ": the model library's constant '" + e.name + "' (FQN '" + e.fqn + "')";
    if (it == by_fqn.end()) {
      throw Error(ErrorCode::kInvalidProgram, what + " has no entry in the delegate's " + ds.fqn_format +
                                                  " weight metadata (entries: " + entry_list(ds) + ")");
    }
    const FqnWeightSpec& w = ds.fqn_weights[it->second];
    if (used[it->second]) {
      throw Error(ErrorCode::kInvalidProgram, what + " matches metadata entry '" + w.fqn + "', which another constant "
                                                                                         "of the library already uses");
    }
    used[it->second] = true;
    if (e.dtype != static_cast<int32_t>(w.dtype)) {
      throw Error(ErrorCode::kInvalidProgram, what + " is " + dtype_name(e.dtype) + " but its stored tensor '" +
                                                  w.storage_key + "' is " + dtype_name(static_cast<int>(w.dtype)));
    }
    const std::uint64_t room = (static_cast<std::uint64_t>(e.data_size) + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
    if (w.storage_nbytes > room) {
      throw Error(ErrorCode::kInvalidProgram, what + " holds " + std::to_string(e.data_size) +
                                                  " bytes but its stored tensor '" + w.storage_key + "' has " +
                                                  std::to_string(w.storage_nbytes) +
                                                  " (weights from another export?)");
    }
    match.push_back(it->second);
  }
  return match;
}

FqnWeightInstaller::Copy FqnWeightInstaller::make_copy(const FqnWeightSpec& w, std::size_t bytes, bool host,
                                                       std::vector<RecordedCopy>& uploads) {
  Copy c;
  const std::size_t n = static_cast<std::size_t>(w.storage_nbytes);
  const std::size_t alloc = std::max<std::size_t>(bytes, 1);
  if (host) {
    void* p = common::host_allocate(alloc);
    c.memory = std::shared_ptr<void>(p, [](void* q) { common::host_free(q); });
    if (n > 0) std::memcpy(p, w.storage.data, n);
    std::memset(static_cast<char*>(p) + n, 0, alloc - n);
  } else {
    const int device = target_.ordinal();
    common::DeviceGuard guard(device);
    void* p = nullptr;
    const std::string what = "cudaMalloc (" + std::to_string(alloc) + " bytes for per-FQN weight '" + w.fqn + "')";
    common::check_cuda(AOTI_CUDA_FAULTABLE(cudaMalloc(&p, alloc)), what.c_str());
    c.memory = std::shared_ptr<void>(p, [device](void* q) {
      common::DeviceGuard on(device, common::DeviceGuard::OnFailure::kIgnore);
      (void)cudaFree(q);
      (void)cudaGetLastError();
    });
    if (alloc > n) common::check_cuda(cudaMemset(static_cast<char*>(p) + n, 0, alloc - n), "cudaMemset (weight padding)");
    if (n > 0) uploads.push_back(RecordedCopy{p, w.storage.data, n});
  }
  c.data = c.memory.get();
  c.size = alloc;
  stats_.weight_bytes += n;
  return c;
}

// The device copies, through the pinned pipeline, reading the .ptd with pread
// when every storage lies in one mapped file (they do: ExecuTorch writes them
// all to aoti_cuda_blob.ptd).
void FqnWeightInstaller::upload(const Delegate& d, const std::vector<RecordedCopy>& uploads) {
  if (uploads.empty()) return;
  const std::uint8_t* lo = uploads.front().src;
  const std::uint8_t* hi = lo;
  for (const RecordedCopy& c : uploads) {
    lo = std::min(lo, c.src);
    hi = std::max(hi, c.src + c.bytes);
  }
  Fd fd;
  FileSource file;
  fd.fd = format::reopen_file_of(lo, static_cast<std::size_t>(hi - lo), &file.offset);
  file.fd = fd.fd;
  file.base = lo;
  StagedUploadResult r;
  try {
    r = upload_staged(uploads, target_.ordinal(), StagedUploadOptions{}, file, staging_);
  } catch (const Error& e) {
    throw Error(e.code(), d.label + ": uploading its per-FQN weights: " + e.what());
  }
  stats_.staged_bytes += r.threads > 0 ? r.bytes : 0;
}

// Step 2 for a read-only constant: the Module's one copy of its storage.
FqnWeightInstaller::Copy FqnWeightInstaller::read_only_copy(const FqnWeightSpec& w, std::size_t bytes, bool host,
                                                            std::vector<RecordedCopy>& uploads, Shared& shared) {
  if (!deduplicate_) return make_copy(w, bytes, host, uploads);
  // One key is one storage (W7: the same size everywhere); a library whose
  // data size asks for more room than the first copy has gets its own.
  const auto it = read_only_.find(w.storage_key);
  if (it != read_only_.end() && it->second.size >= bytes) {
    ++shared.constants;
    shared.bytes += static_cast<std::size_t>(w.storage_nbytes);
    return it->second;
  }
  Copy copy = make_copy(w, bytes, host, uploads);
  if (it == read_only_.end()) read_only_.emplace(w.storage_key, copy);
  return copy;
}

// Step 3 for one constant: a handle viewing `data` as the metadata says.
AtenTensorHandle FqnWeightInstaller::view(const Delegate& d, const FqnWeightSpec& w, void* data, bool host) const {
  AtenTensorHandle h = nullptr;
  aoti_cuda_shim_clear_error();
  const int32_t device_type = host ? aoti_torch_device_type_cpu() : aoti_torch_device_type_cuda();
  if (aoti_torch_create_tensor_from_blob_v2(data, static_cast<int64_t>(w.sizes.size()), w.sizes.data(),
                                            w.strides.data(), w.storage_offset, static_cast<int32_t>(w.dtype),
                                            device_type, host ? 0 : target_.device.index, &h, /*layout=*/0, nullptr,
                                            0) != 0) {
    throw Error(ErrorCode::kUnsupported, d.label + ": per-FQN weight '" + w.fqn +
                                             "' cannot be viewed as stored: " + model_failure_detail(d.library->api()));
  }
  return h;
}

void FqnWeightInstaller::install(Delegate& d, ConstantSharing& sharing) {
  const auto t0 = Clock::now();
  const ContainerApi& api = d.library->api();
  if (api.update_user_managed_constant_buffer_pairs == nullptr) {
    throw Error(ErrorCode::kLoad, d.label + ": its weights are stored per FQN (ExecuTorch 1.5), but the model "
                                            "library does not export "
                                            "AOTInductorModelContainerUpdateUserManagedConstantBufferPairs to bind them");
  }
  const std::vector<std::size_t> match = match_fqn_constants(d);
  const std::size_t n = d.constants.size();
  std::vector<RecordedCopy> uploads;
  std::vector<ContainerApi::ConstantMapEntry> pairs;
  d.constant_handles.assign(n, nullptr);
  d.in_use.assign(n, nullptr);
  Shared shared;
  for (std::size_t k = 0; k < n; ++k) {
    ConstantEntry& e = d.constants[k];
    const FqnWeightSpec& w = d.spec->fqn_weights[match[k]];
    e.initial = w.storage;
    const bool host = !target_.device.is_cuda() || w.device_type == 0;
    const std::size_t bytes = std::max<std::size_t>(static_cast<std::size_t>(w.storage_nbytes), e.data_size);
    if (e.holds_state()) {
      if (AtenTensorHandle earlier = sharing.state_to_share(d, e, w)) {
        d.in_use[k] = earlier;
        pairs.push_back({e.name.c_str(), earlier});
        ++shared.state;
        continue;
      }
    }
    const Copy copy =
        e.holds_state() ? make_copy(w, bytes, host, uploads) : read_only_copy(w, bytes, host, uploads, shared);
    d.fqn_storage.push_back(copy.memory);
    const AtenTensorHandle h = view(d, w, copy.data, host);
    d.fqn_handles.push_back(h);
    d.constant_handles[k] = d.in_use[k] = h;
    pairs.push_back({e.name.c_str(), h});
  }
  upload(d, uploads);
  {
    ModelMessageScope said;  // the model's stderr, for the Error
    if (!bind_pairs(d, target_.ordinal(), pairs, /*full=*/true)) {
      throw Error(model_failure_code(), d.label + ": binding its " + std::to_string(pairs.size()) +
                                         " per-FQN constants (AOTInductorModelContainerUpdateUserManagedConstant"
                                         "BufferPairs) failed: " + model_failure_detail(api));
    }
  }
  sharing.record_installed(d);
  sharing.count_shared(shared.constants, shared.bytes, shared.state);
  const double ms = ms_since(t0);
  stats_.upload_ms += ms;
  if (trace_weights()) {
    log(LogLevel::kDebug, d.label + ": " + std::to_string(n) + " per-FQN constants bound in " + std::to_string(ms) +
                              " ms (" + std::to_string(shared.constants) + " read-only ones shared with earlier " +
                              "methods, " + std::to_string(shared.state) + " shared buffers)");
  }
}

}  // namespace aoti_cuda::runtime
