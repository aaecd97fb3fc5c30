// Options of newer aoti_cuda versions, used when the SDK this example is built against has them.
//
// TEMPORARY: this file bridges the SDK versions that were being merged when the example was
// written (issue 10: explicit state sharing, issue 12: CUDA graphs). Once the SDK you build against
// has them, replace each call with the one line in its comment and delete this file.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <aoti_cuda/aoti_cuda.hpp>

namespace generate_compat {

template <class T, class = void>
struct has_share_state : std::false_type {};
template <class T>
struct has_share_state<T, std::void_t<decltype(&T::share_state)>> : std::true_type {};

template <class T, class = void>
struct has_graph_methods : std::false_type {};
template <class T>
struct has_graph_methods<T, std::void_t<decltype(&T::cuda_graph_methods)>> : std::true_type {};

template <class M, class = void>
struct has_graph_status : std::false_type {};
template <class M>
struct has_graph_status<M, std::void_t<decltype(std::declval<const M&>().graph_status("decode"))>> : std::true_type {};

template <class M, class = void>
struct has_load_stats : std::false_type {};
template <class M>
struct has_load_stats<M, std::void_t<decltype(std::declval<const M&>().load_stats())>> : std::true_type {};

/// What loading uploaded and what it shared, as (name, value) pairs:
///   Module::load_stats() (weight_bytes, deduplicated_bytes, upload_gb_per_s, ...) where it exists,
///   else Module::shared_constants() / shared_weights_bytes().
template <class Module>
std::vector<std::pair<std::string, double>> load_figures(const Module& m) {
  constexpr double kMiB = 1048576.0;
  if constexpr (has_load_stats<Module>::value) {
    const auto s = m.load_stats();
    return {{"weights_uploaded_mib", s.weight_bytes / kMiB},
            {"weights_not_uploaded_mib", s.deduplicated_bytes / kMiB},
            {"deduplicated_constants", static_cast<double>(s.deduplicated_constants)},
            {"shared_state_constants", static_cast<double>(s.shared_state_constants)},
            {"upload_ms", s.upload_ms},
            {"upload_gb_per_s", s.upload_gb_per_s},
            {"page_locked_mib", s.page_locked_bytes / kMiB}};
  } else {
    return {{"shared_constants", static_cast<double>(m.shared_constants())},
            {"weights_not_uploaded_mib", m.shared_weights_bytes() / kMiB}};
  }
}

/// The KV cache is a buffer that prefill and decode both hold: make it one copy.
///   load.share_state = aoti_cuda::StateSharing::all();
/// (SDKs without share_state bind equal names by default: share_constants_across_methods.)
/// Returns whether the option exists.
template <class Options>
bool share_kv_cache(Options& load) {
  if constexpr (has_share_state<Options>::value) {
    load.share_state = decltype(load.share_state)::all();
    return true;
  } else {
    return false;
  }
}

/// Capture decode as a CUDA graph (one shape set: [1,1] token, [1] position).
///   load.cuda_graph_methods = {"decode"};
/// Returns whether the option exists.
template <class Options>
bool graph_decode(Options& load) {
  if constexpr (has_graph_methods<Options>::value) {
    load.cuda_graph_methods = {"decode"};
    return true;
  } else {
    return false;
  }
}

/// "captured N, replayed M" or why graphs were off, when the SDK reports it (Module::graph_status).
template <class Module>
std::string graph_report(const Module& m) {
  if constexpr (has_graph_status<Module>::value) {
    const auto s = m.graph_status("decode");
    if (!s.requested) return "not requested";
    if (!s.available) return "unavailable: " + s.reason;
    return "captured " + std::to_string(s.captures) + ", replays " + std::to_string(s.replays);
  } else {
    return "not in this SDK";
  }
}

}  // namespace generate_compat
