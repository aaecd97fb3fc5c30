# Driven by the install_consumer test (see extra.cmake).
file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}${err}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${AOTI_CUDA_BUILD} --prefix ${prefix})
foreach(f include/aoti_cuda/aoti_cuda.hpp include/aoti_cuda/shim.h include/aoti_cuda/library_check.hpp lib/libaoti_cuda.so
          lib/cmake/aoti_cuda/aoti_cudaConfig.cmake lib/cmake/aoti_cuda/aoti_cudaConfigVersion.cmake bin/aoti_cuda)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${prefix}/${f}")
  endif()
endforeach()

# The installed CLI starts with a clean environment (env -i: no LD_LIBRARY_PATH, no
# CUDA paths; its RPATH finds libaoti_cuda in ../lib) and inspects a bundled program
# without a GPU.
find_program(ENV_EXE env PATHS /usr/bin /bin NO_DEFAULT_PATH REQUIRED)
set(clean_env ${ENV_EXE} -i PATH=/usr/bin:/bin)
run(${clean_env} ${prefix}/bin/aoti_cuda --version)
if(NOT last_output MATCHES "^aoti_cuda [0-9]+\\.[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "the installed CLI's --version printed no version:\n${last_output}")
endif()
execute_process(COMMAND ${clean_env} ${prefix}/bin/aoti_cuda inspect ${AOTI_CUDA_SRC}/tests/fixtures/mlp/mlp.pte --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
# 0: runnable here; 3: not runnable here (no GPU), which inspect must still explain.
if(NOT (rc EQUAL 0 OR rc EQUAL 3) OR NOT out MATCHES "\"runnable\"" OR NOT out MATCHES "forward")
  message(FATAL_ERROR "the installed CLI's inspect failed (${rc}):\n${out}\n${err}")
endif()

# Every example, built against the installed SDK (examples/ is a stand-alone project).
run(${CMAKE_COMMAND} -S ${AOTI_CUDA_SRC}/examples -B ${WORK}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK}/build)

# Each runs on its fixture: exit 0 on a GPU machine; elsewhere exit 3 saying why it cannot run.
set(fx ${AOTI_CUDA_SRC}/tests/fixtures)
set(cases
  "minimal/minimal|${fx}/mlp/mlp.pte|${fx}/mlp/forward.in0.bin"
  "device_io/device_io|${fx}/mlp/mlp.pte|${fx}/mlp/forward.in0.bin|${fx}/mlp/forward.out0.bin"
  "encoder_decoder/encoder_decoder|${fx}/encdec/encdec.pte|${fx}/encdec/encode.in0.bin|${fx}/encdec/encode.out0.bin")
foreach(c ${cases})
  string(REPLACE "|" ";" argv "${c}")
  list(POP_FRONT argv exe)
  execute_process(COMMAND ${WORK}/build/${exe} ${argv} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR (rc EQUAL 3 AND "${err}" MATCHES "cannot run here"))
    message(STATUS "${exe}: exit ${rc}\n${out}${err}")
  else()
    message(FATAL_ERROR "${exe} failed (${rc}):\n${out}\n${err}")
  endif()
endforeach()
# One example installed too: it runs from its install folder with a clean environment.
run(${CMAKE_COMMAND} --install ${WORK}/build/minimal --prefix ${WORK}/examples-prefix)
execute_process(COMMAND ${clean_env} ${WORK}/examples-prefix/bin/minimal ${fx}/mlp/mlp.pte ${fx}/mlp/forward.in0.bin
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT (rc EQUAL 0 OR (rc EQUAL 3 AND "${err}" MATCHES "cannot run here")))
  message(FATAL_ERROR "the installed example failed (${rc}):\n${out}\n${err}")
endif()
# The LLM example (examples/generate) needs an exported LLM: --help runs anywhere.
run(${WORK}/build/generate/generate --help)
