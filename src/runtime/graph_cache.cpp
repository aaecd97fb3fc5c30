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
  e->plan = graph;  // destroyed with the entry
  (void)cudaGetLastError();  // capture errors are not sticky; do not leave them for the model
  if (!failure.empty()) throw Error(ErrorCode::kCuda, failure);
  check_cuda(cudaGraphUpload(e->exec, cs), "cudaGraphUpload");
  return e;
}

// A replay on another stream than the last one waits until that one's outputs were copied out.
void order_after_previous(RunState& run, GraphEntry& e) {
  if (e.done_stream != nullptr && e.done_stream != run.stream) {
    check_cuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(run.stream), e.done, 0),
               "cudaStreamWaitEvent (graph buffers)");
  }
  e.done_stream = nullptr;
}

// Device inputs in the layout of the static buffers can be copied by graph nodes.
bool inputs_fusable(const GraphEntry& e, const std::vector<Tensor>& inputs, int device) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& src = inputs[i];
    if (!src.device().is_cuda() || src.device().index != device || src.nbytes() == 0 ||
        !same_layout(src.shape(), src.strides(), e.inputs[i].strides())) {
      return false;
    }
  }
  return true;
}

// Bound device outputs the graph's outputs can be copied into by graph nodes.
bool outputs_fusable(const GraphEntry& e, const std::vector<Tensor>* bound, int device) {
  if (bound == nullptr || bound->size() != e.outputs.size()) return false;
  for (std::size_t i = 0; i < bound->size(); ++i) {
    const Tensor& src = e.outputs[i].tensor;
    const Tensor& dst = (*bound)[i];
    if (!src.defined() || !src.is_contiguous() || !dst.device().is_cuda() || dst.device().index != device ||
        src.shape() != dst.shape() || src.nbytes() == 0 || src.data() == dst.data()) {
      return false;
    }
  }
  return true;
}

void destroy(GraphEntry::Fused& f) noexcept {
  if (f.exec != nullptr) (void)cudaGraphExecDestroy(f.exec);
  if (f.graph != nullptr) (void)cudaGraphDestroy(f.graph);
  f.exec = nullptr;
  f.graph = nullptr;
}

// Builds copy nodes -> the plan as a child graph -> copy nodes. False (and
// nothing kept) when CUDA refuses, e.g. a plan a child graph cannot hold.
bool build_fused(GraphEntry& e, GraphEntry::Fused& f, const std::vector<Tensor>& inputs,
                 const std::vector<Tensor>* bound, cudaStream_t stream) {
  auto ok = [](cudaError_t err) { return err == cudaSuccess; };
  bool built = ok(cudaGraphCreate(&f.graph, 0));
  for (std::size_t i = 0; built && i < inputs.size(); ++i) {
    cudaGraphNode_t n = nullptr;
    built = ok(cudaGraphAddMemcpyNode1D(&n, f.graph, nullptr, 0, e.inputs[i].data(), inputs[i].data(),
                                        inputs[i].nbytes(), cudaMemcpyDeviceToDevice));
    f.in_nodes.push_back(n);
    f.in_src.push_back(inputs[i].data());
  }
  cudaGraphNode_t child = nullptr;
  built = built && ok(cudaGraphAddChildGraphNode(&child, f.graph, f.in_nodes.data(), f.in_nodes.size(), e.plan));
  for (std::size_t i = 0; built && bound != nullptr && i < bound->size(); ++i) {
    cudaGraphNode_t n = nullptr;
    const Tensor& src = e.outputs[i].tensor;
    built = ok(cudaGraphAddMemcpyNode1D(&n, f.graph, &child, 1, (*bound)[i].data(), src.data(), src.nbytes(),
                                        cudaMemcpyDeviceToDevice));
    f.out_nodes.push_back(n);
    f.out_dst.push_back((*bound)[i].data());
  }
  built = built && ok(cudaGraphInstantiate(&f.exec, f.graph, 0)) && ok(cudaGraphUpload(f.exec, stream));
  if (!built) {
    destroy(f);
    f.in_nodes.clear();
    f.out_nodes.clear();
    f.in_src.clear();
    f.out_dst.clear();
    f.failed = true;
    (void)cudaGetLastError();
  }
  return built;
}

// The one-launch path: re-points the copy nodes whose addresses changed, then
// launches. 0: not taken (inputs on the host or in another layout, or the
// variant could not be built); 1: inputs copied in the graph, outputs still to
// deliver; 2: bound outputs written too.
int launch_fused(RunState& run, GraphEntry& e, const std::vector<Tensor>& inputs, const std::vector<Tensor>* bound) {
  const int device = run.device().index;
  if (e.plan == nullptr || !inputs_fusable(e, inputs, device)) return 0;
  const bool with_outputs = outputs_fusable(e, bound, device);
  GraphEntry::Fused& f = with_outputs ? e.fused_in_out : e.fused_in;
  auto stream = static_cast<cudaStream_t>(run.stream);
  if (f.failed || (f.exec == nullptr && !build_fused(e, f, inputs, with_outputs ? bound : nullptr, stream))) return 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (f.in_src[i] == inputs[i].data()) continue;
    check_cuda(cudaGraphExecMemcpyNodeSetParams1D(f.exec, f.in_nodes[i], e.inputs[i].data(), inputs[i].data(),
                                                  inputs[i].nbytes(), cudaMemcpyDeviceToDevice),
               "cudaGraphExecMemcpyNodeSetParams1D (graph input)");
    f.in_src[i] = inputs[i].data();
  }
  for (std::size_t i = 0; with_outputs && i < bound->size(); ++i) {
    if (f.out_dst[i] == (*bound)[i].data()) continue;
    const Tensor& src = e.outputs[i].tensor;
    check_cuda(cudaGraphExecMemcpyNodeSetParams1D(f.exec, f.out_nodes[i], (*bound)[i].data(), src.data(),
                                                  src.nbytes(), cudaMemcpyDeviceToDevice),
               "cudaGraphExecMemcpyNodeSetParams1D (bound output)");
    f.out_dst[i] = (*bound)[i].data();
  }
  order_after_previous(run, e);
  check_cuda(cudaGraphLaunch(f.exec, stream), "cudaGraphLaunch");
  return with_outputs ? 2 : 1;
}

// Copies the call's inputs into the graph's static buffers and launches it on the run stream.
void replay(RunState& run, GraphEntry& e, const std::vector<Tensor>& inputs) {
  auto stream = static_cast<cudaStream_t>(run.stream);
  order_after_previous(run, e);
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
  destroy(fused_in);
  destroy(fused_in_out);
  if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
  if (plan != nullptr) (void)cudaGraphDestroy(plan);
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
  const int fused = launch_fused(run, *e, inputs, bound);
  if (fused == 0) replay(run, *e, inputs);
  const ProducedOutputs produced{&e->outputs, nullptr};
  if (bound != nullptr) {
    if (fused != 2) write_bound_outputs(run, produced, *bound);
  } else {
    result = deliver_outputs(run, produced, want_device, /*copy_device=*/true);
  }
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
