// Private runtime: CUDA graphs of a method (see "CUDA graphs" in module.hpp).
//
// Each call slot keeps its own graphs (a graph's fixed buffers serve one call
// at a time; slots run concurrently), keyed by the input shapes, least
// recently used evicted beyond LoadOptions::max_graphs_per_method. A graph
// entry owns everything the graph touches that is not the model's: the
// static input buffers, the output handles the captured Run returned, and the
// capture arena holding every allocation made while capturing (allocator.hpp).
// Destruction order: graph execs and graphs, outputs, arena.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "common/small_copy.hpp"
#include "runtime/method.hpp"
#include "shim/allocator.hpp"

namespace aoti_cuda::runtime {

/// Graph settings and counters of one method, shared by its slots. Thread-safe.
struct MethodGraphs {
  bool requested = false;           ///< LoadOptions asked for graphs for this method
  std::size_t max_per_slot = 4;     ///< LoadOptions::max_graphs_per_method
  bool small_copy_kernels = true;   ///< TuningOptions::small_copy_kernels (small in-graph copies as kernels)
  std::atomic<bool> available{true};
  std::atomic<std::size_t> graphs{0}, captures{0}, replays{0}, evictions{0};

  /// Switches graphs off for the method (first reason wins) and says so on stderr.
  void disable(const std::string& method, const std::string& why);
  std::string reason() const;

 private:
  mutable std::mutex mu_;
  std::string reason_;
};

/// One captured graph.
struct GraphEntry {
  explicit GraphEntry(int device) : arena(device) {}
  ~GraphEntry();
  GraphEntry(const GraphEntry&) = delete;
  GraphEntry& operator=(const GraphEntry&) = delete;

  std::vector<std::vector<int64_t>> shapes;  ///< input shapes this graph was captured for
  shim::CaptureArena arena;                  ///< static inputs and everything allocated while capturing
  std::vector<Tensor> inputs;                ///< static input buffers (in the arena), in the compiled layout
  std::vector<Value> outputs;                ///< the method's outputs as the captured run left them
  cudaGraph_t plan = nullptr;                ///< the captured plan (kept to build the fused variants)
  cudaGraphExec_t exec = nullptr;            ///< the plan alone: inputs copied in before the launch
  /// The plan wrapped with in-graph copies, so that a call is one graph
  /// launch: the caller's inputs -> the static inputs, and (when the call's
  /// outputs allow it) the outputs -> where the call wants them. One variant
  /// per way of moving each input and output (`kinds`, see FusedIo), built on
  /// first use; copy nodes are re-pointed (cudaGraphExecMemcpyNodeSetParams1D)
  /// only when the caller's addresses change. Host inputs and host outputs
  /// that are not page-locked go through the variant's own pinned buffers at
  /// fixed addresses (host_in, host_out). Copies up to kSmallCopyMax are
  /// made by kernel nodes, up to kCopyListMax copies each (common/small_copy.hpp;
  /// unless TuningOptions::small_copy_kernels is false), larger ones by memcpy nodes.
  struct Fused {
    /// The copy nodes of one side (the inputs in, or the outputs out).
    struct Copies {
      std::vector<cudaGraphNode_t> nodes;   ///< every node of the side
      std::vector<common::CopyList> lists;  ///< per node: the copies of a kernel node; empty for a memcpy node
      std::vector<int> node_of;             ///< per copy: its node (index into nodes)
      std::vector<int> slot;                ///< per copy: its slot in that node's list; -1 for a memcpy node
      std::vector<char> dirty;              ///< per node: a list changed since it was last set (follow_addresses)
    };
    std::vector<std::uint8_t> kinds;  ///< FusedIo per input, then per output (none: outputs not in the graph)
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    Copies in_copies, out_copies;
    std::vector<const void*> in_src;
    std::vector<void*> out_dst;
    std::vector<std::size_t> in_offset, out_offset;  ///< into host_in / host_out
    void* host_in = nullptr;
    void* host_out = nullptr;
    cudaEvent_t host_in_read = nullptr;  ///< recorded after a launch that reads host_in
    bool host_in_pending = false;
    bool failed = false;  ///< could not be built: calls of these kinds take the copies-then-launch path
    ~Fused();
  };
  std::vector<std::unique_ptr<Fused>> fused;  ///< at most a few variants
  /// Recorded after a replay's outputs were copied out on a caller's stream;
  /// the next replay on another stream waits for it (the buffers are shared).
  cudaEvent_t done = nullptr;
  void* done_stream = nullptr;  ///< stream `done` was last recorded on (nullptr: none pending)
  uint64_t last_use = 0;
};

/// The graphs of one call slot, plus the input shapes it has run plainly
/// (warm-up: a graph is captured on the second call with a shape set).
class SlotGraphs {
 public:
  SlotGraphs() = default;
  ~SlotGraphs();
  SlotGraphs(const SlotGraphs&) = delete;
  SlotGraphs& operator=(const SlotGraphs&) = delete;

  /// The graph for these input shapes (marks it most recently used), or nullptr.
  GraphEntry* find(const std::vector<Tensor>& inputs);
  bool warmed(const std::vector<Tensor>& inputs) const;
  void mark_warmed(const std::vector<Tensor>& inputs);
  /// Keeps `entry`, evicting the least recently used graphs beyond `mg.max_per_slot`.
  GraphEntry& insert(std::unique_ptr<GraphEntry> entry, MethodGraphs& mg);
  std::size_t size() const { return entries_.size(); }

 private:
  std::vector<std::unique_ptr<GraphEntry>> entries_;
  std::vector<std::vector<std::vector<int64_t>>> warmed_;  ///< bounded like the graphs
  uint64_t tick_ = 0;
};

struct RunState;

/// The graph path of a call (run.stream and the shim's current stream set):
/// replays the slot's graph for these input shapes, capturing it first when
/// the shapes were run plainly before; delivers the outputs like the plain
/// path (into `result`, or `bound`). False when the call must take the plain
/// path (first call with these shapes, or graphs unusable: then
/// MethodGraphs::disable was called with the reason).
bool run_with_graph(RunState& run, const std::vector<Tensor>& inputs, bool want_device,
                    const std::vector<Tensor>* bound, std::vector<Tensor>& result);

/// Records that a plain run with these input shapes completed on the slot (warm-up).
void note_plain_run(RunState& run, const std::vector<Tensor>& inputs);

/// True when `inputs` have exactly `shapes`.
bool same_shapes(const std::vector<Tensor>& inputs, const std::vector<std::vector<int64_t>>& shapes);

}  // namespace aoti_cuda::runtime
