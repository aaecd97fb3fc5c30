# The LLM device job's dry run (tools/contrib/gpu-machine/device-llm.sh --dry-run, through test_device_llm.sh):
# the job's binaries from this build, stub ExecuTorch runners and wheel names; ~13 s, no GPU, no torch. Only in
# builds that have every binary the job runs (the load-order program too: tests/load_order/extra.cmake defines it
# in every test build, after this file, so it is not a TARGET yet here).
if(TARGET generate AND TARGET aoti_cuda_read_bw AND TARGET aoti_cuda_bench AND TARGET aoti_cuda_cli
   AND TARGET aoti_cuda_graph_trace)
  find_program(AOTI_CUDA_BASH bash)
  find_program(AOTI_CUDA_PYTHON3 python3)  # the job's scripts call python3 (stdlib only)
  if(AOTI_CUDA_BASH AND AOTI_CUDA_PYTHON3)
    add_test(NAME llmjob_dry_run
             COMMAND ${AOTI_CUDA_BASH} ${CMAKE_SOURCE_DIR}/tools/contrib/gpu-machine/test_device_llm.sh ${CMAKE_BINARY_DIR})
  endif()
endif()

# aoti_cuda_read_bw checks its --per-call sizes before touching a GPU: a size of 0 or a word is a usage error
# (exit 2, the usage line), here without a GPU as on the device machine.
if(TARGET aoti_cuda_read_bw)
  find_program(AOTI_CUDA_BASH bash)
  if(AOTI_CUDA_BASH)
    foreach(sizes "12.5,0" "12.5,x" ",")
      string(MAKE_C_IDENTIFIER "${sizes}" tag)
      add_test(NAME read_bw_rejects_sizes_${tag}
               COMMAND ${AOTI_CUDA_BASH} -c "out=$(\"$0\" --per-call '${sizes}' 2>&1); test $? -eq 2 && \
printf '%s' \"$out\" | grep -q 'usage:.*--per-call'" $<TARGET_FILE:aoti_cuda_read_bw>)
    endforeach()
  endif()
endif()
