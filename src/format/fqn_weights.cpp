// ExecuTorch 1.5's per-FQN weights: the ETCUDAFQN3 metadata a CUDA delegate
// carries in its payload (W1-W5) and the storages it names (W6, W7). See
// reader.hpp and docs/format-checks.md.
//
// Layout of the metadata (little-endian, no padding), as ExecuTorch 1.5's
// CUDA weight collector writes it:
//   "ETCUDAFQN3"                       10 bytes
//   u32 n, n bytes                     the .so key (UTF-8)
//   u32 count                          entries
//   per entry:
//     u32 n, n bytes                   fqn
//     u32 n, n bytes                   storage key
//     u64 storage_nbytes, i32 dtype, i32 device_type, i64 storage_offset, u32 ndim
//     ndim x i64 sizes, ndim x i64 strides
// and nothing after the last entry.
#include <algorithm>
#include <cstdint>
#include <map>

#include "format/reader.hpp"

namespace aoti_cuda {

using format::invalid;
using format::quoted;
using format::u64s;

namespace format {
namespace {

constexpr std::string_view kFqnMagicPrefix = "ETCUDAFQN";
constexpr std::size_t kFqnMagicSize = 10;  // "ETCUDAFQN" + one version character
constexpr std::uint32_t kMaxFqnEntries = 1u << 20;
constexpr std::uint32_t kMaxFqnRank = 64;  // what ExecuTorch's own reader accepts
// Smallest possible entry: two one-byte strings with their lengths, then
// storage_nbytes, dtype, device_type, storage_offset and ndim.
constexpr std::uint64_t kMinEntryBytes = 4 + 1 + 4 + 1 + 8 + 4 + 4 + 8 + 4;

/// Bounds-checked little-endian reads over the metadata; every failure names
/// the check, the field and its byte offset in the payload.
class MetadataCursor {
 public:
  MetadataCursor(ByteView bytes, const std::string& file, const std::string& where)
      : b_(bytes), file_(file), where_(where) {}

  std::uint64_t offset() const noexcept { return at_; }
  void skip(std::uint64_t n, const char* check, const std::string& what) {
    need(n, check, what);
    at_ += n;
  }
  std::uint64_t remaining() const noexcept { return b_.size - at_; }

  std::uint32_t u32(const char* check, const std::string& what) {
    need(4, check, what);
    const std::uint32_t v = read_u32(b_.data + at_);
    at_ += 4;
    return v;
  }
  std::uint64_t u64(const char* check, const std::string& what) {
    need(8, check, what);
    const std::uint64_t v = read_u64(b_.data + at_);
    at_ += 8;
    return v;
  }
  std::int32_t i32(const char* check, const std::string& what) { return static_cast<std::int32_t>(u32(check, what)); }
  std::int64_t i64(const char* check, const std::string& what) { return static_cast<std::int64_t>(u64(check, what)); }
  /// A u32 length, then that many bytes; the string must not be empty.
  std::string str(const char* check, const std::string& what) {
    const std::uint64_t at = at_;
    const std::uint32_t n = u32(check, what + " length");
    if (n == 0) fail(check, what + " at byte " + u64s(at) + " is empty");
    need(n, check, what + " (" + std::to_string(n) + " bytes)");
    std::string s(reinterpret_cast<const char*>(b_.data + at_), n);
    at_ += n;
    if (s.find('\0') != std::string::npos) fail(check, what + " " + quoted(s) + " contains a NUL byte");
    return s;
  }
  [[noreturn]] void fail(const char* check, const std::string& detail) const {
    invalid(file_, check, where_ + ": " + detail);
  }

 private:
  void need(std::uint64_t n, const char* check, const std::string& what) const {
    if (remaining() < n) {
      fail(check, what + " at byte " + u64s(at_) + " needs " + u64s(n) + " bytes but the metadata (" + u64s(b_.size) +
                      " bytes) ends after " + u64s(remaining()) + " (truncated)");
    }
  }

  ByteView b_;
  std::uint64_t at_ = 0;
  const std::string& file_;
  const std::string& where_;
};

/// W5: the view [storage_offset, sizes, strides] stays inside the storage.
void check_view(const MetadataCursor& c, const std::string& what, const FqnWeightSpec& w) {
  const char* check = "W5 (FQN weight view)";
  if (w.storage_offset < 0) c.fail(check, what + ": storage_offset " + std::to_string(w.storage_offset) + " is negative");
  bool empty = false;
  for (std::size_t i = 0; i < w.sizes.size(); ++i) {
    if (w.sizes[i] < 0) c.fail(check, what + ": size[" + std::to_string(i) + "] = " + std::to_string(w.sizes[i]) + " is negative");
    if (w.strides[i] < 0) {
      c.fail(check, what + ": stride[" + std::to_string(i) + "] = " + std::to_string(w.strides[i]) + " is negative");
    }
    empty = empty || w.sizes[i] == 0;
  }
  if (empty) return;  // no element is read
  // Last element read: storage_offset + sum(stride * (size - 1)); all terms are non-negative.
  std::uint64_t last = static_cast<std::uint64_t>(w.storage_offset);
  for (std::size_t i = 0; i < w.sizes.size(); ++i) {
    std::uint64_t term = 0;
    if (!mul_u64(static_cast<std::uint64_t>(w.strides[i]), static_cast<std::uint64_t>(w.sizes[i] - 1), &term) ||
        !add_u64(last, term, &last)) {
      c.fail(check, what + ": the last element's index overflows 64 bits");
    }
  }
  std::uint64_t need = 0;
  if (!add_u64(last, 1, &need) || !mul_u64(need, element_size(w.dtype), &need)) {
    c.fail(check, what + ": the bytes the view reads overflow 64 bits");
  }
  if (need > w.storage_nbytes) {
    c.fail(check, what + ": the view (storage_offset " + std::to_string(w.storage_offset) + ", sizes and strides) reads " +
                      u64s(need) + " bytes but the storage has " + u64s(w.storage_nbytes));
  }
}

FqnWeightSpec read_entry(MetadataCursor& c, const std::string& what) {
  FqnWeightSpec w;
  w.fqn = c.str("W2 (FQN weight entry)", what + " fqn");
  w.storage_key = c.str("W2 (FQN weight entry)", what + " (" + quoted(w.fqn) + ") storage key");
  const std::string named = what + " (" + quoted(w.fqn) + ")";
  w.storage_nbytes = c.u64("W2 (FQN weight entry)", named + " storage_nbytes");
  const std::int32_t dtype = c.i32("W2 (FQN weight entry)", named + " dtype");
  w.device_type = c.i32("W2 (FQN weight entry)", named + " device_type");
  w.storage_offset = c.i64("W2 (FQN weight entry)", named + " storage_offset");
  const std::uint32_t ndim = c.u32("W2 (FQN weight entry)", named + " ndim");
  if (!is_valid_dtype(dtype)) {
    c.fail("W4 (FQN weight dtype / device)", named + ": dtype " + std::to_string(dtype) + " is not a known dtype (0..29)");
  }
  w.dtype = static_cast<DType>(dtype);
  if (w.device_type != 0 && w.device_type != 1) {
    c.fail("W4 (FQN weight dtype / device)",
           named + ": device_type " + std::to_string(w.device_type) + " is neither 0 (CPU) nor 1 (CUDA)");
  }
  const std::string device_prefix = std::string("cuda_fqn_weight:") + (w.device_type == 0 ? "cpu:" : "cuda:");
  if (w.storage_key.compare(0, device_prefix.size(), device_prefix) != 0 || w.storage_key.size() == device_prefix.size()) {
    c.fail("W4 (FQN weight dtype / device)", named + ": storage key " + quoted(w.storage_key) + " does not start with " +
                                                 quoted(device_prefix) + " (device_type " +
                                                 std::to_string(w.device_type) + ")");
  }
  if (ndim > kMaxFqnRank) c.fail("W2 (FQN weight entry)", named + ": ndim " + std::to_string(ndim) + " exceeds 64");
  // Both arrays must be there before anything is allocated for them.
  if (c.remaining() < static_cast<std::uint64_t>(ndim) * 16) {
    c.fail("W2 (FQN weight entry)", named + ": sizes and strides (" + std::to_string(ndim) + " dims) at byte " +
                                        u64s(c.offset()) + " need " + u64s(static_cast<std::uint64_t>(ndim) * 16) +
                                        " bytes, only " + u64s(c.remaining()) + " remain (truncated)");
  }
  for (std::uint32_t i = 0; i < ndim; ++i) w.sizes.push_back(c.i64("W2 (FQN weight entry)", named + " size"));
  for (std::uint32_t i = 0; i < ndim; ++i) w.strides.push_back(c.i64("W2 (FQN weight entry)", named + " stride"));
  check_view(c, named, w);
  return w;
}

}  // namespace

bool is_fqn_metadata(ByteView payload) {
  return payload.size >= kFqnMagicPrefix.size() &&
         std::memcmp(payload.data, kFqnMagicPrefix.data(), kFqnMagicPrefix.size()) == 0;
}

std::string fqn_metadata_magic(ByteView payload) {
  return printable(payload.data, std::min<std::size_t>(payload.size, kFqnMagicSize));
}

bool is_supported_fqn_metadata(ByteView payload) {
  return payload.size >= kFqnMagicSize && std::memcmp(payload.data, "ETCUDAFQN3", kFqnMagicSize) == 0;
}

std::vector<FqnWeightSpec> parse_fqn_metadata(const std::string& file, const std::string& where, ByteView payload,
                                              std::string* so_key) {
  const std::string at = where + " ETCUDAFQN3 metadata";
  MetadataCursor body(payload, file, at);
  if (!is_supported_fqn_metadata(payload)) {
    body.fail("W1 (FQN weight metadata header)", "the payload does not start with \"ETCUDAFQN3\"");
  }
  body.skip(kFqnMagicSize, "W1 (FQN weight metadata header)", "magic");
  *so_key = body.str("W1 (FQN weight metadata header)", ".so key");
  const std::uint64_t count_at = body.offset();
  const std::uint32_t count = body.u32("W1 (FQN weight metadata header)", "entry count");
  if (count > kMaxFqnEntries || static_cast<std::uint64_t>(count) * kMinEntryBytes > body.remaining()) {
    body.fail("W1 (FQN weight metadata header)",
              "entry count " + std::to_string(count) + " at byte " + u64s(count_at) + " cannot fit in the " +
                  u64s(body.remaining()) + " bytes that follow (truncated or corrupt: each entry takes at least " +
                  u64s(kMinEntryBytes) + " bytes; at most " + std::to_string(kMaxFqnEntries) + " entries)");
  }
  std::vector<FqnWeightSpec> entries;
  entries.reserve(count);
  std::map<std::string_view, std::size_t> fqns, keys;
  for (std::uint32_t i = 0; i < count; ++i) {
    entries.push_back(read_entry(body, "entry " + std::to_string(i)));
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto f = fqns.emplace(entries[i].fqn, i);
    if (!f.second) {
      body.fail("W2 (FQN weight entry)", "entries " + std::to_string(f.first->second) + " and " + std::to_string(i) +
                                             " both describe fqn " + quoted(entries[i].fqn));
    }
    const auto k = keys.emplace(entries[i].storage_key, i);
    if (!k.second) {
      body.fail("W2 (FQN weight entry)", "entries " + std::to_string(k.first->second) + " and " + std::to_string(i) +
                                             " name the same storage " + quoted(entries[i].storage_key) +
                                             " (two constants of one partition would alias one buffer)");
    }
  }
  if (body.remaining() != 0) {
    body.fail("W3 (FQN weight metadata end)", u64s(body.remaining()) + " bytes follow the last entry (at byte " +
                                                  u64s(body.offset()) + " of " + u64s(payload.size) + ")");
  }
  return entries;
}

}  // namespace format

// W6 per delegate: each entry's storage exists and has the size the metadata says.
void Program::Impl::find_fqn_storages(DelegateSpec& ds, const std::string& dw, std::string& missing) {
  std::vector<std::string> absent;
  for (FqnWeightSpec& w : ds.fqn_weights) {
    const auto e = lookup(w.storage_key);
    if (!e) {
      absent.push_back(quoted(w.storage_key));
      continue;
    }
    if (e->bytes.size != w.storage_nbytes) {
      invalid(e->file, "W6 (FQN weight storage)",
              dw + " constant " + quoted(w.fqn) + ": storage " + quoted(w.storage_key) + " holds " +
                  u64s(e->bytes.size) + " bytes but the metadata says " + u64s(w.storage_nbytes));
    }
    w.storage = e->bytes;
    w.storage_file = e->file;
  }
  if (absent.empty()) return;
  const std::size_t n = absent.size();
  if (absent.size() > 8) absent.resize(8), absent.push_back("...");
  std::string list;
  for (const std::string& a : absent) list += (list.empty() ? "" : ", ") + a;
  const std::string msg = dw + " needs " + std::to_string(n) + " weight storage(s) that no file provides: " + list +
                          (ptds.empty() ? " (no .ptd was given and \"" + std::string(format::kDefaultPtdName) +
                                              "\" does not exist beside " + pte.label + ")"
                                        : std::string(" (searched ") + pte.label + " and its .ptd file(s))");
  if (require_data) throw Error(ErrorCode::kNotFound, pte.label + ": " + msg);
  missing += (missing.empty() ? "" : "; ") + msg;
}

// W6, W7 across the whole program, once every delegate is resolved: the same
// storage key means the same storage for every method (one store per file),
// and distinct storages are distinct bytes (or identical ones: ExecuTorch
// stores equal buffers once).
void Program::Impl::check_fqn_store() {
  struct First {
    const FqnWeightSpec* w;
    std::string where;
  };
  std::map<std::string, First, std::less<>> first;
  for (const MethodSpec& m : methods) {
    for (const DelegateSpec& d : m.delegates) {
      for (const FqnWeightSpec& w : d.fqn_weights) {
        const std::string where = "method " + quoted(m.name) + " delegates[" + std::to_string(d.delegate_index) + "]";
        auto it = first.find(w.storage_key);
        if (it == first.end()) {
          first.emplace(w.storage_key, First{&w, where});
          continue;
        }
        const FqnWeightSpec& f = *it->second.w;
        if (f.storage_nbytes != w.storage_nbytes || f.dtype != w.dtype) {
          invalid(pte.label, "W7 (FQN weight store across methods)",
                  "storage " + quoted(w.storage_key) + " is " + u64s(f.storage_nbytes) + " bytes of " +
                      dtype_name(static_cast<int>(f.dtype)) + " in " + it->second.where + " but " +
                      u64s(w.storage_nbytes) + " bytes of " + dtype_name(static_cast<int>(w.dtype)) + " in " + where);
        }
      }
    }
  }
  struct Range {
    std::uintptr_t start;
    std::size_t size;
    const std::string* key;
  };
  std::vector<Range> ranges;
  for (const auto& kv : first) {
    const ByteView s = kv.second.w->storage;
    if (s.data != nullptr && s.size > 0) ranges.push_back(Range{reinterpret_cast<std::uintptr_t>(s.data), s.size, &kv.first});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.start != b.start ? a.start < b.start : a.size < b.size; });
  const Range* prev = nullptr;
  std::uintptr_t end = 0;
  for (const Range& r : ranges) {
    if (prev != nullptr && r.start == prev->start && r.size == prev->size) continue;  // one stored buffer, two keys
    if (prev != nullptr && r.start < end) {
      invalid(pte.label, "W6 (FQN weight storage)",
              "the bytes of storages " + quoted(*prev->key) + " and " + quoted(*r.key) +
                  " partly overlap (distinct storages must be distinct or identical byte ranges)");
    }
    prev = &r;
    end = r.start + r.size;
  }
}

}  // namespace aoti_cuda
