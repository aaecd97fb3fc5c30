// Part of libtriton_aoti_cuda.so, included by backend.cpp only (the backend is
// one translation unit: these parts share its private namespace). Errors, data types, config.pbtxt helpers, methods and their Triton tensor names.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"
#include "aoti_cuda/log.hpp"
#include "triton_c_api.h"

namespace aoti_triton {
namespace {


using json = nlohmann::json;
using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::Tensor;
using Clock = std::chrono::steady_clock;


// ---- errors -----------------------------------------------------------------

// What the backend throws internally; every entry point turns it (and
// aoti_cuda::Error, and anything else) into one TRITONSERVER_Error.
struct BackendError {
  TRITONSERVER_Error_Code code;
  std::string message;
};

[[noreturn]] void fail(TRITONSERVER_Error_Code code, std::string message) {
  throw BackendError{code, std::move(message)};
}
[[noreturn]] void invalid(std::string message) { fail(TRITONSERVER_ERROR_INVALID_ARG, std::move(message)); }

// A failed call into the server: its message, prefixed with what we were doing.
void check(TRITONSERVER_Error* err, const char* what) {
  if (err == nullptr) return;
  BackendError e{TRITONSERVER_ErrorCode(err), std::string(what) + ": " + TRITONSERVER_ErrorMessage(err)};
  TRITONSERVER_ErrorDelete(err);
  throw e;
}

TRITONSERVER_Error_Code triton_code(aoti_cuda::ErrorCode code) {
  switch (code) {
    case aoti_cuda::ErrorCode::kInvalidArgument: return TRITONSERVER_ERROR_INVALID_ARG;
    case aoti_cuda::ErrorCode::kNotFound: return TRITONSERVER_ERROR_NOT_FOUND;
    case aoti_cuda::ErrorCode::kUnsupported: return TRITONSERVER_ERROR_UNSUPPORTED;
    case aoti_cuda::ErrorCode::kNoDevice: return TRITONSERVER_ERROR_UNAVAILABLE;
    default: return TRITONSERVER_ERROR_INTERNAL;
  }
}

// Runs `body`, returning nullptr or the error it raised as a TRITONSERVER_Error.
template <typename F>
TRITONSERVER_Error* guarded(const char* where, F&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const BackendError& e) {
    return TRITONSERVER_ErrorNew(e.code, e.message.c_str());
  } catch (const aoti_cuda::Error& e) {
    const std::string msg = std::string("aoti_cuda (") + to_string(e.code()) + "): " + e.what();
    return TRITONSERVER_ErrorNew(triton_code(e.code()), msg.c_str());
  } catch (const std::exception& e) {
    const std::string msg = std::string(where) + ": " + e.what();
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, msg.c_str());
  } catch (...) {
    const std::string msg = std::string(where) + ": unknown exception";
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, msg.c_str());
  }
}

void log(TRITONSERVER_LogLevel level, const std::string& message) {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  if (TRITONSERVER_Error* e = TRITONSERVER_LogMessage(level, "aoti_cuda", 0, message.c_str())) {
    TRITONSERVER_ErrorDelete(e);
  }
}

void cuda_check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    fail(TRITONSERVER_ERROR_INTERNAL, std::string(what) + " failed: " + cudaGetErrorString(rc));
  }
}

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

// ---- data types ----------------------------------------------------------------

struct TypeName {
  DType dtype;
  TRITONSERVER_DataType triton;
  const char* config;  // model config spelling
  const char* wire;    // protocol spelling, used in messages
};
constexpr TypeName kTypes[] = {
    {DType::kFloat32, TRITONSERVER_TYPE_FP32, "TYPE_FP32", "FP32"},
    {DType::kFloat16, TRITONSERVER_TYPE_FP16, "TYPE_FP16", "FP16"},
    {DType::kBFloat16, TRITONSERVER_TYPE_BF16, "TYPE_BF16", "BF16"},
    {DType::kFloat64, TRITONSERVER_TYPE_FP64, "TYPE_FP64", "FP64"},
    {DType::kInt64, TRITONSERVER_TYPE_INT64, "TYPE_INT64", "INT64"},
    {DType::kInt32, TRITONSERVER_TYPE_INT32, "TYPE_INT32", "INT32"},
    {DType::kInt16, TRITONSERVER_TYPE_INT16, "TYPE_INT16", "INT16"},
    {DType::kInt8, TRITONSERVER_TYPE_INT8, "TYPE_INT8", "INT8"},
    {DType::kUInt8, TRITONSERVER_TYPE_UINT8, "TYPE_UINT8", "UINT8"},
    {DType::kUInt16, TRITONSERVER_TYPE_UINT16, "TYPE_UINT16", "UINT16"},
    {DType::kBool, TRITONSERVER_TYPE_BOOL, "TYPE_BOOL", "BOOL"},
};

const TypeName* find_type(DType d) {
  for (const auto& t : kTypes)
    if (t.dtype == d) return &t;
  return nullptr;
}
const char* wire_name(TRITONSERVER_DataType d) {
  for (const auto& t : kTypes)
    if (t.triton == d) return t.wire;
  return d == TRITONSERVER_TYPE_BYTES ? "BYTES" : "an unsupported type";
}
const TypeName& type_of(DType d, const std::string& what) {
  const TypeName* t = find_type(d);
  if (t == nullptr) fail(TRITONSERVER_ERROR_UNSUPPORTED, what + " has dtype " + aoti_cuda::dtype_name(d) +
                                                           ", which Triton cannot carry");
  return *t;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// ---- config helpers -------------------------------------------------------------

// Triton's JSON form of the config prints 64-bit integers as strings or numbers.
int64_t json_int(const json& v, const std::string& what) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    std::size_t used = 0;
    long long x = 0;
    try {
      x = std::stoll(s, &used);
    } catch (...) {
      used = 0;
    }
    if (used == s.size() && !s.empty()) return x;
  }
  invalid("config.pbtxt: " + what + " is not an integer: " + v.dump());
}

bool parse_bool(const std::string& s, const std::string& what) {
  if (s == "true" || s == "1" || s == "on" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "off" || s == "no") return false;
  invalid("config.pbtxt: parameter " + what + " must be true or false, got '" + s + "'");
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',' || c == ' ') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

// The parameters of config.pbtxt this backend reads (docs/triton.md).
struct Params {
  std::vector<std::string> methods;     // "methods": empty = every runnable method
  bool cuda_graphs = false;             // "cuda_graphs"
  aoti_cuda::StateSharing share_state;  // "share_state": "all" or FQNs
  std::size_t num_models = 0;           // "num_models": 0 = instances on the device
  std::string pte = "model.pte";        // "pte": the program's file name in the version folder
};

Params parse_params(const json& config) {
  Params p;
  auto it = config.find("parameters");
  if (it == config.end() || !it->is_object()) return p;
  for (auto& [key, value] : it->items()) {
    std::string v;
    if (value.is_object() && value.contains("string_value")) v = value["string_value"].get<std::string>();
    else if (value.is_string()) v = value.get<std::string>();
    else invalid("config.pbtxt: parameter " + key + " has no string_value");
    if (key == "methods" || key == "method") {
      p.methods = split_list(v);
    } else if (key == "cuda_graphs") {
      p.cuda_graphs = parse_bool(v, key);
    } else if (key == "share_state") {
      if (v == "all") p.share_state = aoti_cuda::StateSharing::all();
      else if (v == "none" || v.empty()) p.share_state = {};
      else p.share_state.fqns = split_list(v);
    } else if (key == "num_models") {
      const int64_t n = json_int(json(v), "parameter num_models");
      if (n < 1 || n > 1024) invalid("config.pbtxt: parameter num_models must be 1..1024, got " + v);
      p.num_models = static_cast<std::size_t>(n);
    } else if (key == "pte") {
      if (v.empty() || v.find('/') != std::string::npos) invalid("config.pbtxt: parameter pte must be a file name, got '" + v + "'");
      p.pte = v;
    } else {
      invalid("config.pbtxt: unknown parameter '" + key +
              "' (the aoti_cuda backend reads methods, cuda_graphs, share_state, num_models, pte)");
    }
  }
  return p;
}

json read_config(TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* msg = nullptr;
  check(TRITONBACKEND_ModelConfig(model, 1, &msg), "reading the model configuration");
  const char* base = nullptr;
  std::size_t size = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(msg, &base, &size);
  json config;
  if (err == nullptr) config = json::parse(base, base + size, nullptr, false);
  TRITONSERVER_MessageDelete(msg);
  check(err, "serializing the model configuration");
  if (config.is_discarded() || !config.is_object()) fail(TRITONSERVER_ERROR_INTERNAL, "the model configuration is not JSON");
  return config;
}

// ---- methods and their Triton tensor names ------------------------------------------

// One served method: its signature and the Triton names of its tensors.
struct MethodInfo {
  std::string name;
  aoti_cuda::MethodMeta meta;
  std::vector<std::string> inputs, outputs;  // Triton names, parallel to meta.inputs / meta.outputs
  bool static_outputs = true;                // every output has a fixed shape: bound outputs (execute_into)
};

// The library's argument names, or input_<i> / output_<i> where it gives none
// (or gives one twice).
std::vector<std::string> tensor_names(const std::vector<std::string>& given, std::size_t n, const char* prefix) {
  std::vector<std::string> names(n);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < n; ++i) {
    std::string s = i < given.size() ? given[i] : "";
    if (s.empty() || seen.count(s)) s = prefix + std::to_string(i);
    seen.insert(s);
    names[i] = s;
  }
  return names;
}

std::vector<int64_t> config_dims(const aoti_cuda::TensorSpec& spec, const std::vector<aoti_cuda::DynamicDim>& dyn) {
  std::vector<int64_t> dims = spec.sizes;
  for (const auto& d : dyn)
    if (d.dim < dims.size()) dims[d.dim] = -1;
  return dims;
}

// One tensor of the Triton model: a name of one or more methods' inputs or outputs.
struct IoEntry {
  DType dtype;
  std::vector<int64_t> dims;  // -1 where it varies (within a method, or between methods)
  std::set<std::string> methods;
};

// The Triton model's inputs and outputs: the union over the served methods.
// A name two methods share must have the same dtype and rank in both.
void collect_io(const std::vector<MethodInfo>& methods, std::map<std::string, IoEntry>& inputs,
                std::map<std::string, IoEntry>& outputs) {
  auto add = [](std::map<std::string, IoEntry>& into, const std::string& name, const aoti_cuda::TensorSpec& spec,
                const std::vector<aoti_cuda::DynamicDim>& dyn, const std::string& method) {
    std::vector<int64_t> dims = config_dims(spec, dyn);
    auto it = into.find(name);
    if (it == into.end()) {
      into[name] = IoEntry{spec.dtype, dims, {method}};
      return;
    }
    IoEntry& e = it->second;
    if (e.dtype != spec.dtype || e.dims.size() != dims.size()) {
      invalid("tensor '" + name + "' of method '" + method + "' (" + aoti_cuda::dtype_name(spec.dtype) + " " +
              dims_text(dims) + ") differs in dtype or rank from the same name in method '" + *e.methods.begin() +
              "': serve these methods as separate models (parameter methods) or write their inputs and outputs "
              "in config.pbtxt");
    }
    for (std::size_t i = 0; i < dims.size(); ++i)
      if (e.dims[i] != dims[i]) e.dims[i] = -1;
    e.methods.insert(method);
  };
  for (const MethodInfo& m : methods) {
    for (std::size_t i = 0; i < m.inputs.size(); ++i) {
      add(inputs, m.inputs[i], m.meta.inputs[i], m.meta.dynamic_dims[i], m.name);
    }
    for (std::size_t i = 0; i < m.outputs.size(); ++i) {
      std::vector<aoti_cuda::DynamicDim> dyn;
      if (m.meta.outputs[i].dynamic) {  // an output's varying dimensions are not known: all vary
        for (std::size_t d = 0; d < m.meta.outputs[i].sizes.size(); ++d) dyn.push_back({d, m.meta.outputs[i].sizes[d]});
      }
      add(outputs, m.outputs[i], m.meta.outputs[i], dyn, m.name);
    }
  }
}

}  // namespace
}  // namespace aoti_triton
