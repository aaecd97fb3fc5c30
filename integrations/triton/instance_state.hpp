// Part of libtriton_aoti_cuda.so, included by backend.cpp only (the backend is
// one translation unit: these parts share its private namespace). The per-instance state: a device, a CUDA stream, the execution of requests
// (one at a time, or batched).
#pragma once

#include "model_state.hpp"

namespace aoti_triton {
namespace {

// ---- instance -----------------------------------------------------------------------

class InstanceState {
 public:
  InstanceState(TRITONBACKEND_ModelInstance* instance, ModelState& model) : triton_(instance), model_(model) {
    const char* name = nullptr;
    check(TRITONBACKEND_ModelInstanceName(instance, &name), "TRITONBACKEND_ModelInstanceName");
    name_ = name;
    TRITONSERVER_InstanceGroupKind kind;
    check(TRITONBACKEND_ModelInstanceKind(instance, &kind), "TRITONBACKEND_ModelInstanceKind");
    int32_t id = 0;
    check(TRITONBACKEND_ModelInstanceDeviceId(instance, &id), "TRITONBACKEND_ModelInstanceDeviceId");
    if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU) {
      device_ = Device::cuda(id);
    } else if (kind == TRITONSERVER_INSTANCEGROUPKIND_CPU) {
      device_ = Device::cpu();  // CPU model libraries only (tests); a CUDA program refuses to load here
    } else {
      fail(TRITONSERVER_ERROR_UNSUPPORTED, "instance " + name_ + ": the aoti_cuda backend supports KIND_GPU and KIND_CPU instance groups");
    }
    lm_ = model.acquire(device_);
    model.release_hold();
    if (device_.is_cuda()) {
      cuda_check(cudaSetDevice(device_.index), "cudaSetDevice");
      cudaStream_t s = nullptr;
      cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      stream_ = s;
    }
    log(TRITONSERVER_LOG_INFO, "aoti_cuda: instance " + name_ + " on " + device_.str());
  }
  ~InstanceState() {
    if (stream_ != nullptr) {
      cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
      scratch_.clear();
      lm_.reset();  // the Module may free outputs on this stream: destroy it first when it is ours alone
      cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
    }
  }

  void execute(TRITONBACKEND_Request** requests, uint32_t count) {
    // Sequences keep one call per request: each request has its own state.
    if (model_.max_batch() > 0 && !model_.sequences()) {
      execute_batched(requests, count);
      return;
    }
    for (uint32_t r = 0; r < count; ++r) {
      TRITONBACKEND_Request* request = requests[r];
      const uint64_t exec_start = now_ns();
      uint64_t compute_start = exec_start, compute_end = exec_start;
      TRITONBACKEND_Response* response = nullptr;
      TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, request);
      if (err == nullptr) {
        err = guarded("aoti_cuda backend", [&] { run_request(request, response, compute_start, compute_end); });
        TRITONSERVER_Error* send = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
        if (send != nullptr) {
          log(TRITONSERVER_LOG_ERROR, std::string("aoti_cuda: sending a response failed: ") + TRITONSERVER_ErrorMessage(send));
          TRITONSERVER_ErrorDelete(send);
        }
      } else {
        log(TRITONSERVER_LOG_ERROR, std::string("aoti_cuda: cannot create a response: ") + TRITONSERVER_ErrorMessage(err));
      }
      const bool ok = err == nullptr;
      if (err != nullptr) TRITONSERVER_ErrorDelete(err);  // ResponseSend does not take it over
      const uint64_t exec_end = now_ns();
      if (ok) compute_end = std::max(compute_end, compute_start);
      report(TRITONBACKEND_ModelInstanceReportStatistics(triton_, request, ok, exec_start, compute_start, compute_end, exec_end));
      report(TRITONBACKEND_ModelInstanceReportBatchStatistics(triton_, 1, exec_start, compute_start, compute_end, exec_end));
      report(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
    }
  }

 private:
  // ---- dynamic batching (max_batch_size > 0, no sequences) ----
  //
  // Each request is checked on its own (a bad one gets its own error and is
  // left out), the good ones are grouped by method and by the non-batch dims
  // of their inputs, each group's inputs are concatenated along dim 0 and run
  // in ONE call, and the outputs' rows are split back in request order.

  struct Pending {
    TRITONBACKEND_Request* request = nullptr;
    TRITONBACKEND_Response* response = nullptr;  // null when Triton could not make one
    TRITONSERVER_Error* err = nullptr;           // this request's failure, sent with its response
    const MethodInfo* method = nullptr;
    int64_t rows = 0;                            // its batch size: the inputs' first dimension
    std::vector<std::vector<int64_t>> shapes;    // per input
    std::vector<TRITONBACKEND_Input*> handles;   // per input
    std::vector<uint32_t> buffers;               // per input
    std::set<std::string> requested;
    uint64_t compute_start = 0, compute_end = 0;
  };

  // Request ID for log lines and errors ("" when the client gave none).
  static std::string request_label(TRITONBACKEND_Request* request) {
    const char* id = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_RequestId(request, &id)) {
      TRITONSERVER_ErrorDelete(e);
      return "";
    }
    return id != nullptr && *id ? std::string("request '") + id + "': " : "";
  }

  void prepare(Pending& p) {
    p.method = find_method(method_name(p.request));
    const MethodInfo& m = *p.method;
    for (std::size_t i = 0; i < m.inputs.size(); ++i) {
      TRITONBACKEND_Input* h = nullptr;
      uint32_t n = 0;
      p.shapes.push_back(check_input(p.request, m, i, &h, &n));
      p.handles.push_back(h);
      p.buffers.push_back(n);
      // check_batchable made every input's first dimension dynamic, so rank >= 1.
      if (i == 0) {
        p.rows = p.shapes[0][0];
      } else if (p.shapes[i][0] != p.rows) {
        invalid("input '" + m.inputs[i] + "' of method '" + m.name + "' has " + std::to_string(p.shapes[i][0]) +
                " rows but input '" + m.inputs[0] + "' has " + std::to_string(p.rows) +
                ": with max_batch_size > 0 every input's first dimension is the request's batch size");
      }
    }
    p.requested = requested_outputs(p.request);
  }

  // The names of the outputs a request asks for.
  static std::set<std::string> requested_outputs(TRITONBACKEND_Request* request) {
    std::set<std::string> requested;
    uint32_t n_out = 0;
    check(TRITONBACKEND_RequestOutputCount(request, &n_out), "TRITONBACKEND_RequestOutputCount");
    for (uint32_t o = 0; o < n_out; ++o) {
      const char* name = nullptr;
      check(TRITONBACKEND_RequestOutputName(request, o, &name), "TRITONBACKEND_RequestOutputName");
      requested.insert(name);
    }
    return requested;
  }

  // Requests that may share one call: same method, same non-batch dims.
  static bool compatible(const Pending& a, const Pending& b) {
    if (a.method != b.method) return false;
    for (std::size_t i = 0; i < a.shapes.size(); ++i)
      if (!std::equal(a.shapes[i].begin() + 1, a.shapes[i].end(), b.shapes[i].begin() + 1, b.shapes[i].end())) return false;
    return true;
  }

  // The most rows one call of `m` takes: its smallest first-dimension bound.
  static int64_t row_limit(const MethodInfo& m) {
    int64_t n = INT64_MAX;
    for (const auto& dyn : m.meta.dynamic_dims)
      for (const auto& d : dyn)
        if (d.dim == 0) n = std::min(n, d.max);
    for (const auto& o : m.meta.outputs) n = std::min(n, o.sizes[0]);
    return n;
  }

  // Copies `bytes` between host or device pointers; host-to-host never
  // touches CUDA (CPU instances run on machines without a GPU).
  void copy_bytes(void* dst, bool dst_host, const void* src, bool src_host, std::size_t bytes) {
    if (bytes == 0) return;
    if (dst_host && src_host) {
      std::memcpy(dst, src, bytes);
    } else if (stream_ != nullptr) {
      cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream_)), "cudaMemcpyAsync (output)");
    } else {
      cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy (output)");
    }
  }

  // One call for the requests `group` (indices into `all`, in request order).
  // A failure of the call itself fails every request of the group; a failure
  // while filling one response fails that request only.
  void run_group(std::vector<Pending>& all, const std::vector<std::size_t>& group, int64_t total_rows) {
    const MethodInfo& m = *all[group[0]].method;
    std::vector<std::vector<char>> keep;  // host staging buffers, alive until the call returns
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < m.inputs.size(); ++i) {
      if (group.size() == 1) {  // a request alone: its buffer is passed through
        inputs.push_back(take_input(all[group[0]].request, m, i, keep));
        continue;
      }
      std::vector<int64_t> shape = all[group[0]].shapes[i];
      shape[0] = total_rows;
      keep.emplace_back(bytes_of(shape, m.meta.inputs[i].dtype));
      char* dst = keep.back().data();
      for (std::size_t r : group) {
        const uint64_t bytes = bytes_of(all[r].shapes[i], m.meta.inputs[i].dtype);
        gather_input(all[r].handles[i], all[r].buffers[i], m.inputs[i], dst, bytes);
        dst += bytes;
      }
      inputs.push_back(Tensor::from_blob(keep.back().data(), shape, m.meta.inputs[i].dtype, Device::cpu()));
    }
    aoti_cuda::RunOptions run;
    run.stream = stream_;
    run.outputs = aoti_cuda::OutputLocation::kDevice;
    const uint64_t start = now_ns();
    for (std::size_t r : group) all[r].compute_start = start;
    std::vector<Tensor> outs = lm_->module().execute(m.name, inputs, run);
    for (std::size_t j = 0; j < outs.size() && j < m.outputs.size(); ++j) {
      if (outs[j].shape().empty() || outs[j].shape()[0] != total_rows) {
        fail(TRITONSERVER_ERROR_INTERNAL, "output '" + m.outputs[j] + "' of method '" + m.name + "' has shape " +
                                              dims_text(outs[j].shape()) + " for a batch of " + std::to_string(total_rows) +
                                              " rows: its first dimension is not the batch");
      }
    }
    // Split: request r gets rows [offset, offset + rows) of every output it
    // asked for (execute returns contiguous tensors, so a row is
    // nbytes / rows bytes and a request's rows are one run of bytes).
    const bool out_host = device_.is_cpu();
    int64_t offset = 0;
    for (std::size_t r : group) {
      Pending& p = all[r];
      const int64_t first = offset;
      offset += p.rows;
      if (p.response == nullptr) continue;
      p.err = guarded("aoti_cuda backend", [&] {
        for (std::size_t j = 0; j < m.outputs.size(); ++j) {
          if (!p.requested.count(m.outputs[j])) continue;
          std::vector<int64_t> shape = outs[j].shape();
          shape[0] = p.rows;
          const std::size_t row_bytes = outs[j].nbytes() / static_cast<std::size_t>(total_rows ? total_rows : 1);
          void* copy_to = nullptr;
          TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
          Tensor t = response_output(p.response, m.outputs[j], outs[j].dtype(), shape, &copy_to, &type);
          void* dst = t.defined() ? t.data() : copy_to;
          const bool dst_host = t.defined() ? t.device().is_cpu() : type != TRITONSERVER_MEMORY_GPU;
          copy_bytes(dst, dst_host, static_cast<const char*>(outs[j].data()) + first * row_bytes, out_host,
                     row_bytes * static_cast<std::size_t>(p.rows));
        }
      });
    }
    // Triton reads the response buffers once it has them.
    if (stream_ != nullptr) cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
    const uint64_t end = now_ns();
    for (std::size_t r : group) all[r].compute_end = end;
  }

  void execute_batched(TRITONBACKEND_Request** requests, uint32_t count) {
    const uint64_t exec_start = now_ns();
    std::vector<Pending> all(count);
    for (uint32_t r = 0; r < count; ++r) {
      Pending& p = all[r];
      p.request = requests[r];
      p.compute_start = p.compute_end = exec_start;
      if (TRITONSERVER_Error* e = TRITONBACKEND_ResponseNew(&p.response, p.request)) {
        log(TRITONSERVER_LOG_ERROR, std::string("aoti_cuda: cannot create a response: ") + TRITONSERVER_ErrorMessage(e));
        TRITONSERVER_ErrorDelete(e);
        p.response = nullptr;
        continue;
      }
      p.err = guarded("aoti_cuda backend", [&] { prepare(p); });
    }
    // Groups in order of their first request; a request joins the first
    // compatible group with room for its rows.
    struct Group {
      std::vector<std::size_t> members;
      int64_t rows = 0;
    };
    std::vector<Group> groups;
    for (std::size_t r = 0; r < all.size(); ++r) {
      if (all[r].response == nullptr || all[r].err != nullptr) continue;
      const int64_t limit = row_limit(*all[r].method);
      Group* g = nullptr;
      for (Group& c : groups) {
        if (compatible(all[c.members[0]], all[r]) && c.rows + all[r].rows <= limit) {
          g = &c;
          break;
        }
      }
      if (g == nullptr) g = &groups.emplace_back();
      g->members.push_back(r);
      g->rows += all[r].rows;
    }
    for (const Group& g : groups) {
      const uint64_t group_start = now_ns();
      if (TRITONSERVER_Error* err = guarded("aoti_cuda backend", [&] { run_group(all, g.members, g.rows); })) {
        // The call (or gathering its inputs) failed: every request of the group
        // gets the message, with the batch it was part of.
        const std::string msg = std::string(TRITONSERVER_ErrorMessage(err)) +
                                (g.members.size() > 1 ? " (in a batch of " + std::to_string(g.members.size()) + " requests, " +
                                                            std::to_string(g.rows) + " rows)"
                                                      : "");
        for (std::size_t r : g.members) {
          if (all[r].err != nullptr) TRITONSERVER_ErrorDelete(all[r].err);
          all[r].err = TRITONSERVER_ErrorNew(TRITONSERVER_ErrorCode(err), msg.c_str());
          all[r].compute_end = std::max(all[r].compute_end, all[r].compute_start);
        }
        TRITONSERVER_ErrorDelete(err);
      }
      const uint64_t c0 = all[g.members[0]].compute_start, c1 = all[g.members[0]].compute_end;
      report(TRITONBACKEND_ModelInstanceReportBatchStatistics(triton_, static_cast<uint64_t>(g.rows), group_start,
                                                              std::max(c0, group_start), std::max(c1, c0), now_ns()));
    }
    const uint64_t exec_end = now_ns();
    for (Pending& p : all) {
      const bool ok = p.response != nullptr && p.err == nullptr;
      if (p.err != nullptr) {
        log(TRITONSERVER_LOG_VERBOSE, "aoti_cuda: " + request_label(p.request) + TRITONSERVER_ErrorMessage(p.err));
      }
      if (p.response != nullptr) {
        if (TRITONSERVER_Error* send = TRITONBACKEND_ResponseSend(p.response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, p.err)) {
          log(TRITONSERVER_LOG_ERROR, std::string("aoti_cuda: sending a response failed: ") + TRITONSERVER_ErrorMessage(send));
          TRITONSERVER_ErrorDelete(send);
        }
      }
      if (p.err != nullptr) TRITONSERVER_ErrorDelete(p.err);  // ResponseSend does not take it over
      p.err = nullptr;
      report(TRITONBACKEND_ModelInstanceReportStatistics(triton_, p.request, ok, exec_start, p.compute_start,
                                                         std::max(p.compute_end, p.compute_start), exec_end));
      report(TRITONBACKEND_RequestRelease(p.request, TRITONSERVER_REQUEST_RELEASE_ALL));
    }
  }

  static void report(TRITONSERVER_Error* err) {
    if (err == nullptr) return;
    log(TRITONSERVER_LOG_ERROR, std::string("aoti_cuda: ") + TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
  }

  std::string sequence_id(TRITONBACKEND_Request* request) {
    uint64_t id = 0;
    TRITONSERVER_Error* err = TRITONBACKEND_RequestCorrelationId(request, &id);
    if (err == nullptr) return std::to_string(id);
    TRITONSERVER_ErrorDelete(err);  // a string correlation ID
    const char* s = nullptr;
    check(TRITONBACKEND_RequestCorrelationIdString(request, &s), "reading the correlation ID");
    return "\"" + std::string(s ? s : "") + "\"";
  }

  // Input i of the request, checked against the method's signature (dtype,
  // rank, bounds, byte count): its shape, its handle and how many buffers hold it.
  std::vector<int64_t> check_input(TRITONBACKEND_Request* request, const MethodInfo& m, std::size_t i,
                                   TRITONBACKEND_Input** handle, uint32_t* n_buffers) {
    const std::string& name = m.inputs[i];
    const aoti_cuda::TensorSpec& spec = m.meta.inputs[i];
    TRITONBACKEND_Input* input = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_RequestInput(request, name.c_str(), &input)) {
      TRITONSERVER_ErrorDelete(e);
      invalid("missing input '" + name + "' (method '" + m.name + "' takes " + std::to_string(m.inputs.size()) + " inputs)");
    }
    TRITONSERVER_DataType dt;
    const int64_t* shape = nullptr;
    uint32_t rank = 0, buffers = 0;
    uint64_t bytes = 0;
    check(TRITONBACKEND_InputProperties(input, nullptr, &dt, &shape, &rank, &bytes, &buffers), "TRITONBACKEND_InputProperties");
    const TypeName& want = *find_type(spec.dtype);
    if (dt != want.triton) {
      invalid("input '" + name + "' of method '" + m.name + "' has data type " + wire_name(dt) + ", expected " + want.wire);
    }
    std::vector<int64_t> dims(shape, shape + rank);
    const std::vector<int64_t> expect = config_dims(spec, m.meta.dynamic_dims[i]);
    bool fits = dims.size() == spec.sizes.size();
    for (std::size_t d = 0; fits && d < dims.size(); ++d) {
      fits = expect[d] == -1 ? (dims[d] >= 0 && dims[d] <= spec.sizes[d]) : dims[d] == spec.sizes[d];
    }
    if (!fits) {
      invalid("input '" + name + "' of method '" + m.name + "' has shape " + dims_text(dims) + ", expected " +
              dims_text(expect) + (expect == spec.sizes ? "" : " (-1: up to " + dims_text(spec.sizes) + ")"));
    }
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    const uint64_t need = static_cast<uint64_t>(numel) * aoti_cuda::element_size(spec.dtype);
    if (bytes != need) {
      invalid("input '" + name + "' has " + std::to_string(bytes) + " bytes, its shape " + dims_text(dims) + " needs " + std::to_string(need));
    }
    *handle = input;
    *n_buffers = buffers;
    return dims;
  }

  // One input of the request as a Tensor over Triton's buffer (borrowed, no
  // copy), or over a host copy when Triton split it in several buffers.
  Tensor take_input(TRITONBACKEND_Request* request, const MethodInfo& m, std::size_t i, std::vector<std::vector<char>>& keep) {
    const aoti_cuda::TensorSpec& spec = m.meta.inputs[i];
    TRITONBACKEND_Input* input = nullptr;
    uint32_t buffers = 0;
    const std::vector<int64_t> dims = check_input(request, m, i, &input, &buffers);
    const uint64_t need = bytes_of(dims, spec.dtype);
    if (buffers == 1) {
      const void* ptr = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
      int64_t mt_id = 0;
      check(TRITONBACKEND_InputBuffer(input, 0, &ptr, &size, &mt, &mt_id), "TRITONBACKEND_InputBuffer");
      // Already on a device: passed in place (the Module copies only what
      // sits on another device or in another layout).
      const Device where = mt == TRITONSERVER_MEMORY_GPU ? Device::cuda(static_cast<int>(mt_id)) : Device::cpu();
      if (!(device_.is_cpu() && where.is_cuda())) return Tensor::from_blob(ptr, dims, spec.dtype, where);
    }
    // Several buffers (or device memory for a CPU instance): gathered on the host.
    keep.emplace_back(need);
    gather_input(input, buffers, m.inputs[i], keep.back().data(), need);
    return Tensor::from_blob(keep.back().data(), dims, spec.dtype, Device::cpu());
  }

  // Copies the `need` bytes of an input's buffers to host memory at dst.
  static void gather_input(TRITONBACKEND_Input* input, uint32_t buffers, const std::string& name, char* dst, uint64_t need) {
    uint64_t offset = 0;
    for (uint32_t b = 0; b < buffers; ++b) {
      const void* ptr = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
      int64_t mt_id = 0;
      check(TRITONBACKEND_InputBuffer(input, b, &ptr, &size, &mt, &mt_id), "TRITONBACKEND_InputBuffer");
      if (offset + size > need) invalid("input '" + name + "': its buffers hold more bytes than its shape");
      if (mt == TRITONSERVER_MEMORY_GPU) cuda_check(cudaMemcpy(dst + offset, ptr, size, cudaMemcpyDefault), "cudaMemcpy (input)");
      else if (size) std::memcpy(dst + offset, ptr, size);
      offset += size;
    }
    if (offset != need) invalid("input '" + name + "': its buffers hold fewer bytes than its shape");
  }

  static uint64_t bytes_of(const std::vector<int64_t>& dims, DType dtype) {
    uint64_t n = aoti_cuda::element_size(dtype);
    for (int64_t d : dims) n *= static_cast<uint64_t>(d);
    return n;
  }

  // A response output of `shape`: Triton's buffer as a Tensor when the Module
  // can write it (host memory, or device memory on this instance's device).
  // Otherwise *copy_to gets Triton's buffer and an undefined Tensor is returned.
  Tensor response_output(TRITONBACKEND_Response* response, const std::string& name, DType dtype,
                         const std::vector<int64_t>& shape, void** copy_to, TRITONSERVER_MemoryType* copy_type) {
    TRITONBACKEND_Output* out = nullptr;
    check(TRITONBACKEND_ResponseOutput(response, &out, name.c_str(), find_type(dtype)->triton, shape.data(),
                                       static_cast<uint32_t>(shape.size())),
          "TRITONBACKEND_ResponseOutput");
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const uint64_t bytes = static_cast<uint64_t>(numel) * aoti_cuda::element_size(dtype);
    void* buffer = nullptr;
    TRITONSERVER_MemoryType mt = device_.is_cuda() ? TRITONSERVER_MEMORY_GPU : TRITONSERVER_MEMORY_CPU;
    int64_t mt_id = device_.is_cuda() ? device_.index : 0;
    check(TRITONBACKEND_OutputBuffer(out, &buffer, bytes, &mt, &mt_id), "TRITONBACKEND_OutputBuffer");
    *copy_to = nullptr;
    if (mt != TRITONSERVER_MEMORY_GPU) return Tensor::from_blob(buffer, shape, dtype, Device::cpu());
    if (device_.is_cuda() && mt_id == device_.index) return Tensor::from_blob(buffer, shape, dtype, device_);
    *copy_to = buffer;
    *copy_type = mt;
    return Tensor();
  }

  Tensor scratch(const std::string& key, DType dtype, const std::vector<int64_t>& shape) {
    Tensor& t = scratch_[key];
    if (!t.defined()) t = Tensor::empty(shape, dtype, device_);
    return t;
  }

  // Which method: the request parameter "method", else the program's default.
  std::string method_name(TRITONBACKEND_Request* request) {
    std::string method = lm_->default_method();
    uint32_t params = 0;
    check(TRITONBACKEND_RequestParameterCount(request, &params), "TRITONBACKEND_RequestParameterCount");
    for (uint32_t p = 0; p < params; ++p) {
      const char* key = nullptr;
      TRITONSERVER_ParameterType type;
      const void* value = nullptr;
      check(TRITONBACKEND_RequestParameter(request, p, &key, &type, &value), "TRITONBACKEND_RequestParameter");
      if (key != nullptr && std::strcmp(key, "method") == 0) {
        if (type != TRITONSERVER_PARAMETER_STRING) invalid("request parameter 'method' must be a string");
        method = static_cast<const char*>(value);
      }
    }
    return method;
  }
  const MethodInfo* find_method(const std::string& method) {
    const MethodInfo* m = lm_->find(method);
    if (m == nullptr) invalid("unknown method '" + method + "' (request parameter 'method'); model " + model_.name() + " serves: " + lm_->method_list());
    return m;
  }

  void run_request(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response, uint64_t& compute_start,
                   uint64_t& compute_end) {
    const std::string method = method_name(request);
    // Sequence flags first: END releases the sequence's state however the
    // request ends (Triton has ended the sequence either way).
    const bool sequence = model_.sequences() && lm_->stateful();
    uint32_t flags = 0;
    std::string seq;
    if (sequence) {
      check(TRITONBACKEND_RequestFlags(request, &flags), "TRITONBACKEND_RequestFlags");
      seq = sequence_id(request);
    }
    struct EndSequence {
      LoadedModule* lm;
      const std::string* id;
      ~EndSequence() {
        if (lm != nullptr) lm->end_sequence(*id);
      }
    } end_guard{sequence && (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END) ? lm_.get() : nullptr, &seq};

    const MethodInfo* m = find_method(method);
    std::vector<std::vector<char>> keep;
    std::vector<Tensor> inputs;
    inputs.reserve(m->inputs.size());
    for (std::size_t i = 0; i < m->inputs.size(); ++i) inputs.push_back(take_input(request, *m, i, keep));

    const std::set<std::string> requested = requested_outputs(request);

    aoti_cuda::RunOptions run;
    run.stream = stream_;
    std::shared_ptr<aoti_cuda::Session> session;
    if (sequence) {
      session = lm_->session(seq, (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) != 0, stream_, model_.idle_release());
      run.session = session.get();
    }
    struct Copy {  // an output Triton's buffer could not take in place
      void* dst;
      bool dst_host;
      Tensor src;
    };
    std::vector<Copy> copies;
    compute_start = now_ns();
    if (m->static_outputs) {
      // Bound outputs: the Module writes Triton's response buffers directly.
      std::vector<Tensor> outs;
      for (std::size_t j = 0; j < m->outputs.size(); ++j) {
        const auto& spec = m->meta.outputs[j];
        if (!requested.count(m->outputs[j])) {
          outs.push_back(scratch(m->name + "/" + std::to_string(j), spec.dtype, spec.sizes));
          continue;
        }
        void* copy_to = nullptr;
        TRITONSERVER_MemoryType type;
        Tensor t = response_output(response, m->outputs[j], spec.dtype, spec.sizes, &copy_to, &type);
        if (!t.defined()) {
          t = scratch(m->name + "/" + std::to_string(j), spec.dtype, spec.sizes);
          copies.push_back({copy_to, type != TRITONSERVER_MEMORY_GPU, t});
        }
        outs.push_back(t);
      }
      lm_->module().execute_into(m->name, inputs, outs, run);
    } else {
      run.outputs = aoti_cuda::OutputLocation::kDevice;
      std::vector<Tensor> outs = lm_->module().execute(m->name, inputs, run);
      for (std::size_t j = 0; j < m->outputs.size(); ++j) {
        if (!requested.count(m->outputs[j])) continue;
        void* copy_to = nullptr;
        TRITONSERVER_MemoryType type;
        Tensor t = response_output(response, m->outputs[j], outs[j].dtype(), outs[j].shape(), &copy_to, &type);
        if (t.defined()) t.copy_from(outs[j], stream_);
        else copies.push_back({copy_to, type != TRITONSERVER_MEMORY_GPU, outs[j]});
      }
    }
    for (const Copy& c : copies) copy_bytes(c.dst, c.dst_host, c.src.data(), c.src.device().is_cpu(), c.src.nbytes());
    // Triton reads the response buffers once it has them.
    if (stream_ != nullptr) cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
    compute_end = now_ns();
  }

  TRITONBACKEND_ModelInstance* triton_;
  ModelState& model_;
  std::string name_;
  Device device_ = Device::cpu();
  std::shared_ptr<LoadedModule> lm_;
  void* stream_ = nullptr;  // cudaStream_t of this instance (GPU instances)
  std::map<std::string, Tensor> scratch_;  // outputs nobody asked for, reused
};


}  // namespace
}  // namespace aoti_triton
