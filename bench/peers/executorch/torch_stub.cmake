# Loaded through CMAKE_PROJECT_INCLUDE. ExecuTorch's backends/aoti and backends/cuda CMake call find_package_torch(),
# which needs a Python torch install, only to define the `torch` target; none of the runtime targets this peer
# builds links or includes torch (checked: no torch/ include in backends/aoti or backends/cuda/runtime at v1.2.0).
# find_package_torch() skips the search when a `torch` target exists, so an empty one is enough.
if(NOT TARGET torch)
  add_library(torch INTERFACE IMPORTED GLOBAL)
endif()
