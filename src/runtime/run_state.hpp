// Private runtime: the state of one call while its plan runs, shared by the
// plain path (executor.cpp), graph capture (graph_cache.cpp) and output
// delivery (outputs.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/method.hpp"
#include "runtime/tensor_util.hpp"

namespace aoti_cuda::runtime {

class Profiler;  // runtime/profiler.hpp

/// Everything one call of a method works with, passed to each plan step.
struct RunState {
  RunState(Method& m, const TargetDevice& t, Slot& s) : method(m), target(t), slot(s), values(s.values) {}

  Method& method;
  const TargetDevice& target;
  Slot& slot;
  void* stream = nullptr;            ///< the run stream (nullptr on CPU modules)
  Profiler* profiler = nullptr;  ///< RunOptions::profile's recorder (null or disabled when not asked for)
  std::vector<Value>& values;        ///< the method's value table (the slot's scratch)
  std::size_t staging_offset = 0;    ///< next free byte of slot.pinned for host inputs
  bool staged = false;               ///< copies out of slot.pinned were queued on `stream`

  const Device& device() const { return target.device; }
};

/// A value table entry emptied in place (its tensor's shape storage kept).
inline void clear_value(Value& v) noexcept {
  TensorSlot::reset(v.tensor);
  v.handle = nullptr;
}

/// Bytes a piece of `n` bytes takes in a pinned staging buffer (pieces start 256-byte aligned).
inline std::size_t staging_piece(std::size_t n) { return (n + 255) / 256 * 256; }

/// Pinned staging the host inputs of a call take, one piece each.
inline std::size_t host_input_staging(const std::vector<Tensor>& inputs) {
  std::size_t bytes = 0;
  for (const Tensor& t : inputs) {
    if (t.device().is_cpu()) bytes += staging_piece(t.nbytes());
  }
  return bytes;
}

/// Host -> the slot's pinned staging -> async H2D to `dst` (t's bytes,
/// contiguous) on the run stream; false when the staging buffer was not
/// budgeted for it (the caller then copies synchronously).
bool stage_upload(RunState& run, const Tensor& t, void* dst);

/// Walks the method's plan over run.values (inputs already in place).
void run_plan(RunState& run);

/// Wraps a model-made handle as an owned Value (the handle is released with
/// the last copy of the tensor, also when this throws). Messages name it
/// "<owner> output <index>" (`owner` is only formatted then).
Value wrap_output(AtenTensorHandle h, const std::string& owner, std::size_t index);
/// The same into `dst` (a value table entry), reusing its shape storage.
void wrap_output_into(Value& dst, AtenTensorHandle h, const std::string& owner, std::size_t index);

/// A method's outputs as a call produced them: table[specs[i].value_index],
/// or table[i] when specs is null (a graph's output list).
struct ProducedOutputs {
  const std::vector<Value>* table = nullptr;
  const std::vector<ValueSpec>* specs = nullptr;
  const Value& operator[](std::size_t i) const {
    return specs != nullptr ? (*table)[static_cast<std::size_t>((*specs)[i].value_index)] : (*table)[i];
  }
};

/// Clears every value of the table on scope exit (their memory is released;
/// the table and each tensor's shape storage are kept for the next call).
class ValuesReset {
 public:
  explicit ValuesReset(std::vector<Value>& v) : v_(v) {}
  ~ValuesReset() {
    for (Value& value : v_) clear_value(value);
  }
  ValuesReset(const ValuesReset&) = delete;
  ValuesReset& operator=(const ValuesReset&) = delete;

 private:
  std::vector<Value>& v_;
};

}  // namespace aoti_cuda::runtime
