// Which named-data keys hold a CUDA delegate's .so and weights blobs, per
// exporter generation (seed, executorch-1.1..1.3 method keys, 1.4 hash keys
// in the delegate payload, 1.5 per-FQN weight metadata in the payload). See
// reader.hpp.
#include "format/reader.hpp"

namespace aoti_cuda {

using format::invalid;
using format::quoted;

const char* to_string(ExporterGeneration g) noexcept {
  switch (g) {
    case ExporterGeneration::kSeed: return "seed (so_blob in .ptd, weights inside the .so)";
    case ExporterGeneration::kMethodKeys: return "executorch-1.1..1.3 (<method>_so_blob / <method>_weights_blob)";
    case ExporterGeneration::kHashKeys: return "executorch-1.4 (sha256 keys in the delegate payload)";
    case ExporterGeneration::kFqnWeights:
      return "executorch-1.5 (ETCUDAFQN3 metadata in the delegate payload, weights stored per FQN)";
  }
  return "unknown";
}

void Program::Impl::resolve_delegate(MethodSpec& m, DelegateSpec& ds, const et::Program* prog,
                                     const et::BackendDelegate* d) {
  const std::string dw = "method " + quoted(m.name) + " delegates[" + std::to_string(ds.delegate_index) + "]";
  // method_name compile spec: raw bytes, first match (as ExecuTorch 1.1-1.2).
  if (const auto* specs = d->compile_specs()) {
    for (const et::CompileSpec* cs : *specs) {
      if (cs->key()->str() == "method_name") {
        ds.method_name_spec.assign(reinterpret_cast<const char*>(cs->value()->data()), cs->value()->size());
        break;
      }
    }
  }
  ByteView processed;
  const et::BackendDelegateDataReference* ref = d->processed();
  if (ref->location() == et::DataLocation::INLINE) {
    const auto* data = prog->backend_delegate_data()->Get(ref->index())->data();
    processed = ByteView{data->data(), data->size()};
  } else {
    const et::DataSegment* s = prog->segments()->Get(ref->index());
    processed = format::segment_bytes(pte, s->offset(), s->size(), dw + " processed segment " + std::to_string(ref->index()));
  }
  if (!choose_blob_keys(m, ds, processed, dw)) return;
  std::string missing;
  find_blobs(ds, dw, missing);
  if (ds.generation == ExporterGeneration::kFqnWeights) find_fqn_storages(ds, dw, missing);
  if (!missing.empty()) m.not_runnable_reason += (m.not_runnable_reason.empty() ? "" : "; ") + missing;
}

bool Program::Impl::choose_blob_keys(MethodSpec& m, DelegateSpec& ds, ByteView processed, const std::string& dw) {
  const std::string& F = pte.label;
  if (format::is_fqn_metadata(processed)) {
    ds.generation = ExporterGeneration::kFqnWeights;
    ds.fqn_format = format::fqn_metadata_magic(processed);
    if (!format::is_supported_fqn_metadata(processed) && processed.size >= 10) {
      // A later exporter's metadata (ExecuTorch after 1.5.1 writes other versions): readable
      // files, but not by this build. Not an error of the file: the method cannot run here.
      m.not_runnable_reason += std::string(m.not_runnable_reason.empty() ? "" : "; ") + dw + ": the payload is " +
                               quoted(ds.fqn_format) +
                               " weight metadata, a version this build does not read (it reads ETCUDAFQN3, "
                               "ExecuTorch 1.5)";
      return false;
    }
    ds.fqn_weights = format::parse_fqn_metadata(F, dw, processed, &ds.so_key);
  } else if (!processed.empty()) {
    ds.generation = ExporterGeneration::kHashKeys;
    const auto* begin = reinterpret_cast<const char*>(processed.data);
    const std::string_view payload(begin, processed.size);
    const std::size_t nl = payload.find('\n');
    if (nl == std::string_view::npos) {
      invalid(F, "CUDA delegate payload",
              dw + ": processed bytes (" + std::to_string(processed.size) +
                  ") are not \"<so_key>\\n<weights_key>\" (no newline): malformed named-data key payload");
    }
    ds.so_key = std::string(payload.substr(0, nl));
    ds.weights_key = std::string(payload.substr(nl + 1));
    if (ds.so_key.empty()) invalid(F, "CUDA delegate payload", dw + ": the .so key before the newline is empty");
  } else if (!ds.method_name_spec.empty() && lookup(ds.method_name_spec + "_so_blob")) {
    ds.generation = ExporterGeneration::kMethodKeys;
    ds.so_key = ds.method_name_spec + "_so_blob";
    ds.weights_key = ds.method_name_spec + "_weights_blob";
  } else if (lookup("so_blob")) {
    ds.generation = ExporterGeneration::kSeed;
    ds.so_key = "so_blob";
  } else if (!ds.method_name_spec.empty()) {
    ds.generation = ExporterGeneration::kMethodKeys;
    ds.so_key = ds.method_name_spec + "_so_blob";
    ds.weights_key = ds.method_name_spec + "_weights_blob";
  } else {
    ds.generation = ExporterGeneration::kSeed;
    ds.so_key = "so_blob";
  }
  return true;
}

void Program::Impl::find_blobs(DelegateSpec& ds, const std::string& dw, std::string& missing) {
  const std::string& F = pte.label;
  if (auto so = lookup(ds.so_key)) {
    ds.so = so->bytes;
    ds.so_file = so->file;
  } else {
    missing = "the .so blob " + quoted(ds.so_key) + " of " + dw + " is not in " + F +
              (ptds.empty() ? std::string(" (and no .ptd data file was found)") : " or its .ptd file(s)");
    if (require_data) throw Error(ErrorCode::kNotFound, F + ": " + missing);
  }
  if (!ds.weights_key.empty()) {
    if (auto w = lookup(ds.weights_key)) {
      ds.weights = w->bytes;
      ds.weights_file = w->file;
    } else if (ptds.empty()) {
      const std::string msg = dw + " needs its weights blob " + quoted(ds.weights_key) +
                              " from a data file, but no .ptd was given and \"" + format::kDefaultPtdName +
                              "\" does not exist beside " + F + " (it should hold the key" +
                              (ds.so.data == nullptr ? "s " + quoted(ds.so_key) + ", " : std::string(" ")) +
                              quoted(ds.weights_key) + ")";
      if (require_data) throw Error(ErrorCode::kNotFound, F + ": " + msg);
      missing += (missing.empty() ? "" : "; ") + msg;
    }
    // else: a .ptd exists but lacks the key: the .so may embed its weights
    // (ExecuTorch skips the blob silently too); weights stay empty.
  }
}

}  // namespace aoti_cuda
