# Smoke tests of `aoti_cuda inspect` (CPU only): a real fixture in text and
# JSON form, and a bad file that must fail with exit status 1 and the check name.
if(TARGET aoti_cuda_cli)
  set(_fx ${CMAKE_CURRENT_SOURCE_DIR}/fixtures)
  add_test(NAME cli_inspect_text COMMAND aoti_cuda_cli inspect ${_fx}/kv_cache/kv_cache.pte)
  set_tests_properties(cli_inspect_text PROPERTIES PASS_REGULAR_EXPRESSION
    "method \"forward\": runnable.*inputs:  \\(float32\\[1,32\\], int64\\[1\\]\\).*delegate#0\\(1,0,2\\).*forward_weights_blob.*x86-64 shared object.*imports 24 aoti_torch_\\* shims.*runnable: yes")
  add_test(NAME cli_inspect_json COMMAND aoti_cuda_cli inspect ${_fx}/dynamic_mlp/dynamic_mlp.pte --json)
  set_tests_properties(cli_inspect_json PROPERTIES PASS_REGULAR_EXPRESSION
    "\"exporter_generation\": \"method_keys\".*\"dynamic\": true.*\"runnable\": true")
  add_test(NAME cli_inspect_bad_file COMMAND sh -c
    "out=$($<TARGET_FILE:aoti_cuda_cli> inspect ${_fx}/README.md 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] && echo \"$out\" | grep -q 'P2 (file identifier) failed'")
  add_test(NAME cli_inspect_missing_data COMMAND sh -c
    "out=$($<TARGET_FILE:aoti_cuda_cli> inspect ${_fx}/mlp/mlp.pte --data /nonexistent.ptd 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] && echo \"$out\" | grep -q 'not_found.*/nonexistent.ptd'")
endif()

# Usage errors of run/bench: exit status 2 for unknown options, 1 with the
# option named for malformed values; `run` on a not-runnable program names the op.
if(TARGET aoti_cuda_cli)
  add_test(NAME cli_run_unknown_option COMMAND sh -c
    "$<TARGET_FILE:aoti_cuda_cli> run ${_fx}/mlp/mlp.pte --bogus >/dev/null 2>&1; [ $? -eq 2 ]")
  add_test(NAME cli_bench_bad_number COMMAND sh -c
    "out=$($<TARGET_FILE:aoti_cuda_cli> bench ${_fx}/mlp/mlp.pte --runs abc 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] && echo \"$out\" | grep -q -- \"--runs needs a whole number, got 'abc'\"")
  add_test(NAME cli_run_not_runnable COMMAND sh -c
    "out=$($<TARGET_FILE:aoti_cuda_cli> run ${_fx}/partial/partial.pte --random 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] && echo \"$out\" | grep -q 'aten::sigmoid.out'")
  add_test(NAME cli_devices COMMAND sh -c
    "out=$($<TARGET_FILE:aoti_cuda_cli> devices 2>&1); echo \"$out\"; echo \"$out\" | grep -Eq 'device\\(s\\)|no usable CUDA device'")
endif()
