// Private runtime: loading a Program's methods for a Module — which methods,
// the device, and per delegate: model library -> container -> weights.
//
// Order (Module::Impl::load):
//   1. select_methods(): the requested (or every runnable) method;
//   2. open_device(): the device exists, its primary context is created;
//   3. MethodLoader::load(): for every delegate of every method, the model
//      library (ModelLibrary::load), the architecture gate, the container;
//      then, once every container exists, every constant table is read and
//      the weights of each delegate are installed in ConstantSharing's order:
//      a delegate whose constants are all identical read-only copies or shared
//      state adopts the earlier copies instead of uploading its blob; the
//      others upload it (page-locked in place when the driver allows, see
//      weights_io.hpp) and then bind their requested shared state. Each blob's
//      pages are released once it is installed. Delegates whose weights are
//      stored per FQN (ExecuTorch 1.5) bind them instead (fqn_weights.hpp).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "runtime/constant_sharing.hpp"
#include "runtime/fqn_weights.hpp"
#include "runtime/method.hpp"
#include "runtime/weight_upload.hpp"

namespace aoti_cuda::runtime {

/// The methods to load: `names` in order (kNotFound / kUnsupported for unknown or
/// not-runnable ones), or every runnable method when `names` is empty
/// (kUnsupported, with every reason, when there is none).
std::vector<const MethodSpec*> select_methods(const Program& program, const std::vector<std::string>& names);

/// Checks that `device` exists and creates its primary context now, so its
/// one-time cost is reported as LoadTimings::device_init_ms. CPU: nothing.
TargetDevice open_device(Device device, const std::string& label, LoadTimings& timings);

/// The most rows a matrix multiply inside `method` can take, as far as its tensor inputs tell
/// (upper bounds for dynamic ones): a floating-point input [..., K] contributes the product of
/// all but its last dimension, an integer input (token ids, positions) all its elements. A
/// guess: a model may make more rows inside. 0 for a method without tensor inputs.
int64_t max_input_rows(const MethodSpec& method);

/// Whether the loader opens cuBLAS while the Module is still loading (in the background), given
/// the most any library needs it (`use`), the methods loaded and TuningOptions::int4_dequant_min_m.
/// Opening it maps libcublas + libcublasLt (about 150 MiB of host memory) and makes a handle, so
/// it is done early only when a call will need it: always for the extern GEMMs, and for the int4
/// matmul only when some method's inputs can reach `int4_dequant_min_m` rows (a prompt). A call
/// that needs it later opens it then.
bool open_cublas_early(shim::gemm::CublasUse use, const std::vector<const MethodSpec*>& methods,
                       int64_t int4_dequant_min_m);

class MethodLoader {
 public:
  using Progress = std::function<void(const char* phase, const std::string& method, std::size_t done, std::size_t total)>;

  /// `options.tuning` must be resolved (resolve_tuning: every field set).
  MethodLoader(const LoadOptions& options, TargetDevice target, LoadTimings& timings, LoadStats& stats,
               Progress progress)
      : options_(options), target_(target), timings_(timings), stats_(stats), progress_(std::move(progress)) {}

  /// Loads `selected` (see the file comment).
  std::vector<std::unique_ptr<Method>> load(const std::vector<const MethodSpec*>& selected, ConstantSharing& sharing);

 private:
  std::unique_ptr<Method> load_method(const MethodSpec& ms, std::size_t& done, std::size_t total);
  std::unique_ptr<Delegate> load_library(const MethodSpec& ms, std::size_t index);
  void create_container(Delegate& d);
  void check_calls(const Method& m) const;
  void install_weights(Delegate& d, ConstantSharing& sharing, FqnWeightInstaller& fqn);
  void check_blob(const Delegate& d) const;
  void upload_weights(Delegate& d);

  const LoadOptions& options_;
  TargetDevice target_;
  LoadTimings& timings_;
  LoadStats& stats_;
  Progress progress_;
  std::unique_ptr<StagingBlocks> staging_;  // pinned staging of the weights upload, allocated from load()'s start
};

}  // namespace aoti_cuda::runtime
