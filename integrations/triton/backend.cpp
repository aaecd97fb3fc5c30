// libtriton_aoti_cuda.so: a Triton Inference Server backend that serves
// ExecuTorch CUDA programs (model.pte + aoti_cuda_blob.ptd) through aoti_cuda.
// docs/triton.md describes the model directory, the parameters and the
// behaviour.
//
// Object model (each owned by the one above it):
//   ModelState     one per Triton model version: the parsed config and the
//                  loaded programs, one LoadedModule per device.
//   LoadedModule   one aoti_cuda::Module on one device, shared by every
//                  instance Triton places on that device (the weights exist
//                  once per device), with its sequences' Sessions.
//   InstanceState  one per Triton model instance: its device, its CUDA
//                  stream, its scratch outputs, a reference to the
//                  LoadedModule of its device.
// Triton calls the instance functions of one instance from one thread at a
// time (execution policy BLOCKING), several instances concurrently; the
// Module allows that (LoadOptions::num_models calls per method at once).
//
// The parts: triton_util.hpp (errors, types, config helpers), model_state.hpp
// (ModelState, LoadedModule), instance_state.hpp (InstanceState); this file
// holds the C entry points Triton calls.
#include "instance_state.hpp"

using aoti_triton::guarded;
using aoti_triton::InstanceState;
using aoti_triton::ModelState;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return guarded("TRITONBACKEND_Initialize", [&] {
    uint32_t major = 0, minor = 0;
    aoti_triton::check(TRITONBACKEND_ApiVersion(&major, &minor), "TRITONBACKEND_ApiVersion");
    if (major != AOTI_TRITONBACKEND_API_VERSION_MAJOR || minor < AOTI_TRITONBACKEND_API_VERSION_MINOR) {
      aoti_triton::fail(TRITONSERVER_ERROR_UNSUPPORTED,
                        "the aoti_cuda backend needs Triton backend API " + std::to_string(AOTI_TRITONBACKEND_API_VERSION_MAJOR) +
                            "." + std::to_string(AOTI_TRITONBACKEND_API_VERSION_MINOR) + " or a later 1.x; this server has " +
                            std::to_string(major) + "." + std::to_string(minor));
    }
    const char* name = nullptr;
    aoti_triton::check(TRITONBACKEND_BackendName(backend, &name), "TRITONBACKEND_BackendName");
    // The SDK's own messages go to the server's log.
    aoti_cuda::set_log_handler([](aoti_cuda::LogLevel level, std::string_view message) {
      const TRITONSERVER_LogLevel l = level == aoti_cuda::LogLevel::kError     ? TRITONSERVER_LOG_ERROR
                                      : level == aoti_cuda::LogLevel::kWarning ? TRITONSERVER_LOG_WARN
                                      : level == aoti_cuda::LogLevel::kInfo    ? TRITONSERVER_LOG_INFO
                                                                               : TRITONSERVER_LOG_VERBOSE;
      aoti_triton::log(l, "aoti_cuda: " + std::string(message));
    });
    aoti_triton::log(TRITONSERVER_LOG_INFO, std::string("aoti_cuda backend ") + aoti_cuda::version() + " (" + name +
                                                "), Triton backend API " + std::to_string(major) + "." + std::to_string(minor));
  });
}

TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend*) {
  aoti_cuda::set_log_handler(nullptr);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return guarded("TRITONBACKEND_ModelInitialize", [&] {
    auto state = std::make_unique<ModelState>(model);
    aoti_triton::check(TRITONBACKEND_ModelSetState(model, state.get()), "TRITONBACKEND_ModelSetState");
    state.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelState(model, &state)) return e;
  delete static_cast<ModelState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  return guarded("TRITONBACKEND_ModelInstanceInitialize", [&] {
    TRITONBACKEND_Model* model = nullptr;
    aoti_triton::check(TRITONBACKEND_ModelInstanceModel(instance, &model), "TRITONBACKEND_ModelInstanceModel");
    void* ms = nullptr;
    aoti_triton::check(TRITONBACKEND_ModelState(model, &ms), "TRITONBACKEND_ModelState");
    auto state = std::make_unique<InstanceState>(instance, *static_cast<ModelState*>(ms));
    aoti_triton::check(TRITONBACKEND_ModelInstanceSetState(instance, state.get()), "TRITONBACKEND_ModelInstanceSetState");
    state.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state)) return e;
  delete static_cast<InstanceState*>(state);
  return nullptr;
}

// Every request gets a response here, an error response when it fails, and
// is released; so this returns nullptr (an error return would make Triton
// answer requests the backend already answered).
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests, const uint32_t request_count) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state)) return e;
  static_cast<InstanceState*>(state)->execute(requests, request_count);
  return nullptr;
}

}  // extern "C"
