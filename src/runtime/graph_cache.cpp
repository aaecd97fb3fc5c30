// CUDA graphs of a method: capture, replay, per-slot LRU. See graph_cache.hpp.
#include "runtime/graph_cache.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "aoti_cuda/log.hpp"
#include "common/cuda.hpp"
#include "common/small_copy.hpp"
#include "runtime/capture_hooks.hpp"
#include "runtime/graph_probe.hpp"
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
    write_graph_dot(graph, ms.name);
    const cudaError_t inst = cudaGraphInstantiate(&e->exec, graph, 0);
    if (inst != cudaSuccess) failure = "cudaGraphInstantiate: " + cuda_text(inst);
  }
  e->plan = graph;  // destroyed with the entry
  (void)cudaGetLastError();  // capture errors are not sticky; do not leave them for the model
  if (!failure.empty()) throw Error(ErrorCode::kCuda, failure);
  check_cuda(cudaGraphUpload(e->exec, cs), "cudaGraphUpload");
  if (graph_probe_requested()) probe_graph(graph, cs, ms.name);  // a diagnostic: logs, never throws
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

// How a fused launch moves one input in or one output out.
enum FusedIo : std::uint8_t {
  kIoDevice,      // a device pointer of the caller's (re-pointed when it changes)
  kIoPinnedHost,  // the caller's page-locked host memory (outputs only)
  kIoStagedHost,  // the variant's pinned buffer, copied from/to the caller's host memory on the host
};
constexpr std::size_t kMaxFusedVariants = 4;


bool is_pinned_host(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  // Mapped at the same address (cudaMallocHost/cudaHostAlloc memory under
  // unified addressing): a node can write it directly, kernel or memcpy.
  return a.type == cudaMemoryTypeHost && a.devicePointer == p;
}

// One fused call: the variant's kinds and, per input and output, the
// caller's memory (host or device) it reads or writes.
struct FusedCall {
  std::vector<std::uint8_t> kinds;
  std::vector<const void*> in;   // per input: device pointer, or host source to stage
  std::vector<void*> out;        // per output (when in the graph): device / pinned pointer, or host destination
  bool with_outputs = false;
  bool small_copy_kernels = true;  // MethodGraphs::small_copy_kernels
};

// Inputs: device tensors in the static buffers' layout are read in place;
// dense host tensors are staged. False when an input fits neither.
bool plan_inputs(const GraphEntry& e, const std::vector<Tensor>& inputs, int device, FusedCall& c) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& src = inputs[i];
    const Tensor& dst = e.inputs[i];
    if (src.nbytes() == 0) return false;
    if (src.device().is_cuda() && src.device().index == device &&
        same_layout(src.shape(), src.strides(), dst.strides())) {
      c.kinds.push_back(kIoDevice);
    } else if (src.device().is_cpu() && src.is_contiguous() &&
               row_major(dst.shape(), dst.strides())) {
      c.kinds.push_back(kIoStagedHost);
    } else {
      return false;
    }
    c.in.push_back(src.data());
  }
  return true;
}

// Whether nodes can copy the graph's outputs: each defined, contiguous,
// non-empty, on the device.
bool outputs_copyable(const GraphEntry& e) {
  return std::all_of(e.outputs.begin(), e.outputs.end(), [](const Value& v) {
    return v.tensor.defined() && v.tensor.device().is_cuda() && v.tensor.is_contiguous() && v.tensor.nbytes() > 0;
  });
}

// Outputs into the caller's bound tensors: the kind of each. False (outputs
// left out of the graph) when one cannot be written by a node.
bool plan_bound_outputs(RunState& run, const GraphEntry& e, const std::vector<Tensor>& bound, FusedCall& c) {
  if (bound.size() != e.outputs.size() || !outputs_copyable(e)) return false;
  const int device = run.device().index;
  for (std::size_t i = 0; i < bound.size(); ++i) {
    const Tensor& src = e.outputs[i].tensor;
    const Tensor& dst = bound[i];
    if (src.shape() != dst.shape() || src.data() == dst.data() || !dst.is_contiguous()) return false;
    if (dst.device().is_cuda()) {
      if (dst.device().index != device) return false;
      c.kinds.push_back(kIoDevice);
    } else {
      c.kinds.push_back(is_pinned_host(dst.data()) ? kIoPinnedHost : kIoStagedHost);
    }
    c.out.push_back(dst.data());
  }
  return true;
}

// New tensors for the call's result, one per output: model-owned device
// tensors, or (pageable) host tensors; their addresses become the output targets.
std::vector<Tensor> new_results(RunState& run, const GraphEntry& e, bool want_device, FusedCall& c) {
  std::vector<Tensor> made;
  made.reserve(e.outputs.size());
  for (std::size_t i = 0; i < e.outputs.size(); ++i) {
    const Tensor& t = e.outputs[i].tensor;
    made.push_back(want_device ? fresh_device_output(run, t, i) : Tensor::empty(t.shape(), t.dtype(), Device::cpu()));
    c.out.push_back(made.back().data());
  }
  return made;
}

// Small copies as kernel nodes (common/small_copy.hpp) unless the Module's tuning says
// otherwise, others as memcpy nodes.
bool by_kernel(const FusedCall& c, std::size_t bytes) { return c.small_copy_kernels && bytes <= common::kSmallCopyMax; }

struct CopySpec {
  void* dst;
  const void* src;
  std::size_t bytes;
  bool kernel;  // by_kernel()
};

// One side's copies as nodes after `deps`: the kernel ones grouped into list nodes (kCopyListMax copies each, in
// order), the others memcpy nodes of their own. False when CUDA refuses.
bool add_copies(GraphEntry::Fused::Copies& side, cudaGraph_t graph, const cudaGraphNode_t* deps, std::size_t n_deps,
                const std::vector<CopySpec>& copies) {
  int open = -1;  // the list node being filled
  for (const CopySpec& c : copies) {
    if (c.kernel) {
      if (open < 0 || side.lists[static_cast<std::size_t>(open)].count == common::kCopyListMax) {
        side.nodes.push_back(nullptr);  // added below, once its list is complete
        side.lists.emplace_back();
        open = static_cast<int>(side.nodes.size()) - 1;
      }
      common::CopyList& list = side.lists[static_cast<std::size_t>(open)];
      side.node_of.push_back(open);
      side.slot.push_back(list.count);
      list.add(c.dst, c.src, c.bytes);
      continue;
    }
    cudaGraphNode_t node = nullptr;
    if (cudaGraphAddMemcpyNode1D(&node, graph, deps, n_deps, c.dst, c.src, c.bytes, cudaMemcpyDefault) != cudaSuccess) {
      return false;
    }
    side.nodes.push_back(node);
    side.lists.emplace_back();
    side.node_of.push_back(static_cast<int>(side.nodes.size()) - 1);
    side.slot.push_back(-1);
  }
  side.dirty.assign(side.nodes.size(), 0);
  for (std::size_t k = 0; k < side.nodes.size(); ++k) {
    if (side.lists[k].count > 0 && common::add_copy_list_node(&side.nodes[k], graph, deps, n_deps, side.lists[k]) != 0) {
      return false;
    }
  }
  return true;
}

// Builds copy nodes -> the plan as a child graph -> copy nodes, and the pinned
// buffers of staged host inputs/outputs. False (f.failed) when CUDA refuses,
// e.g. a plan a child graph cannot hold.
bool build_fused(GraphEntry& e, GraphEntry::Fused& f, const FusedCall& c, cudaStream_t stream) {
  auto ok = [](cudaError_t err) { return err == cudaSuccess; };
  const std::size_t n_in = c.in.size();
  std::size_t in_bytes = 0, out_bytes = 0;
  for (std::size_t i = 0; i < n_in; ++i) {
    f.in_offset.push_back(in_bytes);
    if (c.kinds[i] == kIoStagedHost) in_bytes += staging_piece(e.inputs[i].nbytes());
  }
  for (std::size_t i = 0; i < c.out.size(); ++i) {
    f.out_offset.push_back(out_bytes);
    if (c.kinds[n_in + i] == kIoStagedHost) out_bytes += staging_piece(e.outputs[i].tensor.nbytes());
  }
  bool built = (in_bytes == 0 || ok(cudaMallocHost(&f.host_in, in_bytes))) &&
               (out_bytes == 0 || ok(cudaMallocHost(&f.host_out, out_bytes))) &&
               (in_bytes == 0 || ok(cudaEventCreateWithFlags(&f.host_in_read, cudaEventDisableTiming))) &&
               ok(cudaGraphCreate(&f.graph, 0));
  std::vector<CopySpec> ins, outs;
  for (std::size_t i = 0; built && i < n_in; ++i) {
    const void* src = c.kinds[i] == kIoStagedHost ? static_cast<char*>(f.host_in) + f.in_offset[i] : c.in[i];
    ins.push_back({e.inputs[i].data(), src, e.inputs[i].nbytes(), by_kernel(c, e.inputs[i].nbytes())});
    f.in_src.push_back(src);
  }
  built = built && add_copies(f.in_copies, f.graph, nullptr, 0, ins);
  cudaGraphNode_t child = nullptr;
  built = built && ok(cudaGraphAddChildGraphNode(&child, f.graph, f.in_copies.nodes.data(), f.in_copies.nodes.size(),
                                                 e.plan));
  for (std::size_t i = 0; built && i < c.out.size(); ++i) {
    void* dst = c.kinds[n_in + i] == kIoStagedHost ? static_cast<char*>(f.host_out) + f.out_offset[i] : c.out[i];
    const Tensor& src = e.outputs[i].tensor;
    outs.push_back({dst, src.data(), src.nbytes(), by_kernel(c, src.nbytes())});
    f.out_dst.push_back(dst);
  }
  built = built && add_copies(f.out_copies, f.graph, &child, 1, outs);
  built = built && ok(cudaGraphInstantiate(&f.exec, f.graph, 0)) && ok(cudaGraphUpload(f.exec, stream));
  if (!built) {
    f.failed = true;
    (void)cudaGetLastError();
  }
  return built;
}

// The variant for these kinds: nullptr with *room false when it failed to
// build or no other variant may be added.
GraphEntry::Fused* find_variant(GraphEntry& e, const FusedCall& c, bool* room) {
  for (auto& f : e.fused) {
    if (f->kinds == c.kinds) {
      *room = false;
      return f->failed ? nullptr : f.get();
    }
  }
  *room = e.fused.size() < kMaxFusedVariants;
  return nullptr;
}

GraphEntry::Fused* add_variant(GraphEntry& e, const FusedCall& c, cudaStream_t stream) {
  auto f = std::make_unique<GraphEntry::Fused>();
  f->kinds = c.kinds;
  GraphEntry::Fused* raw = f.get();
  e.fused.push_back(std::move(f));  // kept when the build fails: marks these kinds as failed
  return build_fused(e, *raw, c, stream) ? raw : nullptr;
}

// Re-points copy `i` of a side: a memcpy node at once; a copy of a list node in its list, the node marked dirty for
// flush(). False when CUDA refuses (the call then copies outside the graph).
bool repoint(cudaGraphExec_t exec, GraphEntry::Fused::Copies& side, std::size_t i, void* dst, const void* src,
             std::size_t n) {
  const auto k = static_cast<std::size_t>(side.node_of[i]);
  const int slot = side.slot[i];
  if (slot >= 0) {
    side.lists[k].dst[slot] = dst;
    side.lists[k].src[slot] = src;
    side.dirty[k] = 1;
    return true;
  }
  if (cudaGraphExecMemcpyNodeSetParams1D(exec, side.nodes[k], dst, src, n, cudaMemcpyDefault) == cudaSuccess) {
    return true;
  }
  (void)cudaGetLastError();
  return false;
}

// Sets each list node repoint() changed, once. A node CUDA refuses stays dirty: the next call sets it again.
bool flush(cudaGraphExec_t exec, GraphEntry::Fused::Copies& side) {
  for (std::size_t k = 0; k < side.nodes.size(); ++k) {
    if (!side.dirty[k]) continue;
    if (common::set_copy_list_node(exec, side.nodes[k], side.lists[k]) != 0) {
      (void)cudaGetLastError();
      return false;
    }
    side.dirty[k] = 0;
  }
  return true;
}

// Host inputs into the variant's staging buffer, once its last launch has read it.
void stage_host_inputs(GraphEntry::Fused& f, const FusedCall& c, const std::vector<Tensor>& inputs) {
  if (f.host_in == nullptr) return;
  if (f.host_in_pending) {
    check_cuda(cudaEventSynchronize(f.host_in_read), "cudaEventSynchronize (graph input staging)");
    f.host_in_pending = false;
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (c.kinds[i] == kIoStagedHost) {
      std::memcpy(static_cast<char*>(f.host_in) + f.in_offset[i], c.in[i], inputs[i].nbytes());
    }
  }
}

// Re-points the nodes whose caller addresses changed; false when CUDA refuses.
// The addresses are recorded only once every node holds them: after a refusal the next call re-points again.
bool follow_addresses(const GraphEntry& e, GraphEntry::Fused& f, const FusedCall& c) {
  const std::size_t n_in = c.in.size();
  for (std::size_t i = 0; i < n_in; ++i) {
    if (c.kinds[i] != kIoDevice || f.in_src[i] == c.in[i]) continue;
    if (!repoint(f.exec, f.in_copies, i, e.inputs[i].data(), c.in[i], e.inputs[i].nbytes())) return false;
  }
  for (std::size_t i = 0; i < c.out.size(); ++i) {
    if (c.kinds[n_in + i] == kIoStagedHost || f.out_dst[i] == c.out[i]) continue;
    const Tensor& src = e.outputs[i].tensor;
    if (!repoint(f.exec, f.out_copies, i, c.out[i], src.data(), src.nbytes())) return false;
  }
  if (!flush(f.exec, f.in_copies) || !flush(f.exec, f.out_copies)) return false;
  for (std::size_t i = 0; i < n_in; ++i) {
    if (c.kinds[i] == kIoDevice) f.in_src[i] = c.in[i];
  }
  for (std::size_t i = 0; i < c.out.size(); ++i) {
    if (c.kinds[n_in + i] != kIoStagedHost) f.out_dst[i] = c.out[i];
  }
  return true;
}

// After the launch: host outputs are complete when the call returns (as on
// the copying path); staged ones are copied to the caller's memory.
void finish_host_outputs(const GraphEntry& e, GraphEntry::Fused& f, const FusedCall& c, cudaStream_t stream) {
  const std::size_t n_in = c.in.size();
  bool host_out = false;
  for (std::size_t i = 0; i < c.out.size(); ++i) host_out = host_out || c.kinds[n_in + i] != kIoDevice;
  if (!host_out) return;
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (graph outputs)");
  f.host_in_pending = false;
  for (std::size_t i = 0; i < c.out.size(); ++i) {
    if (c.kinds[n_in + i] != kIoStagedHost) continue;
    std::memcpy(c.out[i], static_cast<const char*>(f.host_out) + f.out_offset[i], e.outputs[i].tensor.nbytes());
  }
}

// The one-launch path. 0: not taken (an input neither on this device in the
// static layout nor dense on the host, too many variants, or the variant
// could not be built); 1: inputs copied in the graph, outputs still to
// deliver; 2: outputs delivered too (into `bound`, or into *made, the call's
// result: fresh device tensors, or host tensors when !want_device).
int launch_fused(RunState& run, GraphEntry& e, const std::vector<Tensor>& inputs, const std::vector<Tensor>* bound,
                 bool want_device, std::vector<Tensor>* made) {
  auto stream = static_cast<cudaStream_t>(run.stream);
  FusedCall c;
  c.small_copy_kernels = run.method.graphs->small_copy_kernels;
  if (e.plan == nullptr || !plan_inputs(e, inputs, run.device().index, c)) return 0;
  const std::size_t n_in = c.kinds.size();
  // Outputs in the graph: into the bound tensors, or into new result tensors
  // (of known kinds: pageable host or device), made only once a variant can run.
  c.with_outputs = bound != nullptr ? plan_bound_outputs(run, e, *bound, c) : outputs_copyable(e);
  if (!c.with_outputs) {
    c.kinds.resize(n_in);
    c.out.clear();
  } else if (bound == nullptr) {
    c.kinds.insert(c.kinds.end(), e.outputs.size(), want_device ? kIoDevice : kIoStagedHost);
  }
  bool room = false;
  GraphEntry::Fused* f = find_variant(e, c, &room);
  if (f == nullptr && !room) return 0;
  std::vector<Tensor> results;
  if (c.with_outputs && bound == nullptr) results = new_results(run, e, want_device, c);
  if (f == nullptr && (f = add_variant(e, c, stream)) == nullptr) return 0;
  stage_host_inputs(*f, c, inputs);
  if (!follow_addresses(e, *f, c)) return 0;
  order_after_previous(run, e);
  check_cuda(cudaGraphLaunch(f->exec, stream), "cudaGraphLaunch");
  if (f->host_in != nullptr) {
    check_cuda(cudaEventRecord(f->host_in_read, stream), "cudaEventRecord (graph input staging)");
    f->host_in_pending = true;
  }
  if (!c.with_outputs) return 1;
  finish_host_outputs(e, *f, c, stream);
  if (bound == nullptr) *made = std::move(results);
  return 2;
}

// Copies the call's inputs into the graph's static buffers and launches it on the run stream.
void replay(RunState& run, GraphEntry& e, const std::vector<Tensor>& inputs) {
  auto stream = static_cast<cudaStream_t>(run.stream);
  order_after_previous(run, e);
  if (const std::size_t staging_bytes = host_input_staging(inputs); staging_bytes > 0) {
    (void)run.slot.staging(staging_bytes);
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& src = inputs[i];
    Tensor& dst = e.inputs[i];
    if (src.nbytes() == 0) continue;
    const bool dense_dst = row_major(dst.shape(), dst.strides());
    if (src.device().is_cuda() && same_layout(src.shape(), src.strides(), dst.strides())) {
      check_cuda(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice, stream),
                 "cudaMemcpyAsync (graph input)");
    } else if (!(src.device().is_cpu() && dense_dst && stage_upload(run, src, dst.data())) &&
               !enqueue_device_copy(dst, src, run.stream)) {
      dst.copy_from(src, run.stream);  // re-strides host memory; synchronizes (uncommon layouts)
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

GraphEntry::Fused::~Fused() {
  if (host_in_read != nullptr) {
    if (host_in_pending) (void)cudaEventSynchronize(host_in_read);
    (void)cudaEventDestroy(host_in_read);
  }
  if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  if (host_in != nullptr) (void)cudaFreeHost(host_in);
  if (host_out != nullptr) (void)cudaFreeHost(host_out);
  (void)cudaGetLastError();
}

GraphEntry::~GraphEntry() {
  if (done != nullptr) {
    if (done_stream != nullptr) (void)cudaEventSynchronize(done);
    (void)cudaEventDestroy(done);
  }
  fused.clear();
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

// What a capture failure may owe to how the method's libraries are bound:
// imports that bypass the SDK's CUDA hooks (cuda_hooks.hpp). "" when none.
static std::string binding_notes(const Method& method) {
  std::string notes;
  for (const auto& d : method.delegates) {
    if (d == nullptr || d->library == nullptr) continue;
    for (const std::string& w : d->library->hooks().warnings) notes += "; binding of " + d->label + ": " + w;
  }
  return notes;
}

bool run_with_graph(RunState& run, const std::vector<Tensor>& inputs, bool want_device,
                    const std::vector<Tensor>* bound, std::vector<Tensor>& result) {
  MethodGraphs& mg = *run.method.graphs;
  if (!run.slot.graphs) run.slot.graphs = std::make_unique<SlotGraphs>();
  SlotGraphs& sg = *run.slot.graphs;
  GraphEntry* e = sg.find(inputs);
  if (e == nullptr) {
    if (!sg.warmed(inputs)) return false;  // warm-up: kernels load on the first plain run
    try {
      e = &sg.insert(capture(run, inputs), mg);
    } catch (const Error& err) {
      mg.disable(run.method.spec->name, std::string("capture failed: ") + err.what() + binding_notes(run.method));
      return false;
    }
    mg.captures.fetch_add(1);
  }
  std::vector<Tensor> made;
  const int fused = launch_fused(run, *e, inputs, bound, want_device, &made);
  if (fused == 0) replay(run, *e, inputs);
  const ProducedOutputs produced{&e->outputs, nullptr};
  if (fused == 2) {
    if (bound == nullptr) result = std::move(made);
  } else if (bound != nullptr) {
    write_bound_outputs(run, produced, *bound);
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
