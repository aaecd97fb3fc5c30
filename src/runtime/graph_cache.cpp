// CUDA graphs of a method: capture, replay, per-slot LRU. See graph_cache.hpp.
#include "runtime/graph_cache.hpp"

#include <algorithm>

#include "aoti_cuda/log.hpp"
#include "common/cuda.hpp"
#include "runtime/capture_hooks.hpp"
#include "runtime/outputs.hpp"
#include "runtime/run_state.hpp"
#include "runtime/tensor_util.hpp"

namespace aoti_cuda::runtime {
namespace {

using common::check_cuda;

std::string cuda_text(cudaError_t err) {
  const char* name = cudaGetErrorName(err);
  const char* text = cudaGetErrorString(err);
  return std::string(name ? name : "cudaError?") + " (" + (text ? text : "?") + ")";
}

// Static input buffers in the layout the model was compiled for, from the arena.
void make_static_inputs(GraphEntry& e, const MethodSpec& ms, const std::vector<Tensor>& inputs, const Device& device) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int64_t>& shape = inputs[i].shape();
    std::vector<int64_t> strides = strides_for_dim_order(shape, ms.inputs[i].tensor.dim_order);
    void* p = e.arena.allocate(std::max<std::size_t>(inputs[i].nbytes(), 16));
    e.inputs.push_back(Tensor::from_blob(p, shape, inputs[i].dtype(), device, std::move(strides)));
    e.shapes.push_back(shape);
  }
}

// Captures the whole plan on the slot's own stream. Throws Error with the reason on failure.
std::unique_ptr<GraphEntry> capture(RunState& call, const std::vector<Tensor>& inputs) {
  const MethodSpec& ms = *call.method.spec;
  const Device& device = call.device();
  cudaStream_t cs = call.slot.own_stream();
  auto e = std::make_unique<GraphEntry>(device.index);
  make_static_inputs(*e, ms, inputs, device);
  check_cuda(cudaEventCreateWithFlags(&e->done, cudaEventDisableTiming), "cudaEventCreateWithFlags (graph)");

  RunState run(call.method, call.target, call.slot);
  ValuesReset reset(run.values);
  run.stream = cs;
  CurrentStreamScope stream_scope(device.index, cs);
  run.values.resize(ms.values.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    run.values[static_cast<std::size_t>(ms.inputs[i].value_index)].tensor = e->inputs[i];
  }
  std::string failure;
  cudaGraph_t graph = nullptr;
  {
    shim::CaptureArenaScope arena(&e->arena);
    GraphCaptureScope hooks;
    check_cuda(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      run_plan(run);
    } catch (const std::exception& ex) {
      failure = ex.what();
    }
    const cudaError_t end = cudaStreamEndCapture(cs, &graph);
    if (failure.empty() && end != cudaSuccess) failure = "cudaStreamEndCapture: " + cuda_text(end);
    if (failure.empty()) {
      for (const ValueSpec& out : ms.outputs) e->outputs.push_back(run.values[static_cast<std::size_t>(out.value_index)]);
    }
    run.values.clear();  // intermediates go back to the arena
  }
  if (failure.empty()) {
    const cudaError_t inst = cudaGraphInstantiate(&e->exec, graph, 0);
    if (inst != cudaSuccess) failure = "cudaGraphInstantiate: " + cuda_text(inst);
  }
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // capture errors are not sticky; do not leave them for the model
  if (!failure.empty()) throw Error(ErrorCode::kCuda, failure);
  check_cuda(cudaGraphUpload(e->exec, cs), "cudaGraphUpload");
  return e;
}

// Copies the call's inputs into the graph's static buffers and launches it on the run stream.
void replay(RunState& run, GraphEntry& e, const std::vector<Tensor>& inputs) {
  auto stream = static_cast<cudaStream_t>(run.stream);
  if (e.done_stream != nullptr && e.done_stream != run.stream) {
    check_cuda(cudaStreamWaitEvent(stream, e.done, 0), "cudaStreamWaitEvent (graph buffers)");
  }
  e.done_stream = nullptr;
  std::size_t staging_bytes = 0;
  for (const Tensor& t : inputs) {
    if (t.device().is_cpu()) staging_bytes += (t.nbytes() + 255) / 256 * 256;
  }
  if (staging_bytes > 0) (void)run.slot.staging(staging_bytes);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& src = inputs[i];
    Tensor& dst = e.inputs[i];
    if (src.nbytes() == 0) continue;
    const bool dense_dst = same_layout(dst.shape(), dst.strides(), contiguous_strides(dst.shape()));
    if (src.device().is_cuda() && same_layout(src.shape(), src.strides(), dst.strides())) {
      check_cuda(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice, stream),
                 "cudaMemcpyAsync (graph input)");
    } else if (!(src.device().is_cpu() && dense_dst && stage_upload(run, src, dst.data()))) {
      dst.copy_from(src, run.stream);  // re-strides; synchronizes (uncommon layouts)
    }
  }
  if (run.staged) {
    run.slot.staging_used(stream);
    run.staged = false;
  }
  check_cuda(cudaGraphLaunch(e.exec, stream), "cudaGraphLaunch");
}

}  // namespace

void MethodGraphs::disable(const std::string& method, const std::string& why) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_.empty()) {
      reason_ = why;
      first = true;
    }
  }
  available.store(false, std::memory_order_relaxed);
  if (first && requested) {
    aoti_cuda::log(LogLevel::kWarning, "CUDA graphs off for method '" + method + "': " + why);
  }
}

std::string MethodGraphs::reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

GraphEntry::~GraphEntry() {
  if (done != nullptr) {
    if (done_stream != nullptr) (void)cudaEventSynchronize(done);
    (void)cudaEventDestroy(done);
  }
  if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
  outputs.clear();  // handles of arena memory: released before the arena frees it
  (void)cudaGetLastError();
}

SlotGraphs::~SlotGraphs() = default;

bool same_shapes(const std::vector<Tensor>& inputs, const std::vector<std::vector<int64_t>>& shapes) {
  if (inputs.size() != shapes.size()) return false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].shape() != shapes[i]) return false;
  }
  return true;
}

GraphEntry* SlotGraphs::find(const std::vector<Tensor>& inputs) {
  for (auto& e : entries_) {
    if (same_shapes(inputs, e->shapes)) {
      e->last_use = ++tick_;
      return e.get();
    }
  }
  return nullptr;
}

bool SlotGraphs::warmed(const std::vector<Tensor>& inputs) const {
  return std::any_of(warmed_.begin(), warmed_.end(), [&](const auto& s) { return same_shapes(inputs, s); });
}

void SlotGraphs::mark_warmed(const std::vector<Tensor>& inputs) {
  if (warmed(inputs)) return;
  if (warmed_.size() >= 64) warmed_.erase(warmed_.begin());  // oldest first
  std::vector<std::vector<int64_t>> shapes;
  shapes.reserve(inputs.size());
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  warmed_.push_back(std::move(shapes));
}

GraphEntry& SlotGraphs::insert(std::unique_ptr<GraphEntry> entry, MethodGraphs& mg) {
  while (!entries_.empty() && entries_.size() >= std::max<std::size_t>(mg.max_per_slot, 1)) {
    auto lru = std::min_element(entries_.begin(), entries_.end(),
                                [](const auto& a, const auto& b) { return a->last_use < b->last_use; });
    entries_.erase(lru);
    mg.graphs.fetch_sub(1);
    mg.evictions.fetch_add(1);
  }
  entry->last_use = ++tick_;
  entries_.push_back(std::move(entry));
  mg.graphs.fetch_add(1);
  return *entries_.back();
}

bool run_with_graph(RunState& run, const std::vector<Tensor>& inputs, bool want_device,
                    const std::vector<Tensor>* bound, std::vector<Tensor>& result) {
  MethodGraphs& mg = *run.method.graphs;
  if (!run.slot.graphs) run.slot.graphs = std::make_unique<SlotGraphs>();
  SlotGraphs& sg = *run.slot.graphs;
  GraphEntry* e = sg.find(inputs);
  if (e == nullptr) {
    if (!sg.warmed(inputs)) return false;  // warm-up: kernels load on the first plain run
    static const std::string hooks_problem = capture_hooks_problem();
    if (!hooks_problem.empty()) {
      mg.disable(run.method.spec->name, hooks_problem);
      return false;
    }
    try {
      e = &sg.insert(capture(run, inputs), mg);
    } catch (const Error& err) {
      mg.disable(run.method.spec->name, std::string("capture failed: ") + err.what());
      return false;
    }
    mg.captures.fetch_add(1);
  }
  replay(run, *e, inputs);
  const ProducedOutputs produced{&e->outputs, nullptr};
  if (bound != nullptr) write_bound_outputs(run, produced, *bound);
  else result = deliver_outputs(run, produced, want_device, /*copy_device=*/true);
  if (run.stream != static_cast<void*>(run.slot.stream)) {
    check_cuda(cudaEventRecord(e->done, static_cast<cudaStream_t>(run.stream)), "cudaEventRecord (graph)");
    e->done_stream = run.stream;
  }
  mg.replays.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void note_plain_run(RunState& run, const std::vector<Tensor>& inputs) {
  if (!run.slot.graphs) run.slot.graphs = std::make_unique<SlotGraphs>();
  run.slot.graphs->mark_warmed(inputs);
}

}  // namespace aoti_cuda::runtime
