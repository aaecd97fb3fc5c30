# Tests of the `aoti_cuda` command-line tool, run by CI (no GPU needed): every
# option is validated strictly, every error has one exit status and one
# message, `inspect` tells whether a program can run HERE and why not.
# Cases whose outcome depends on the machine (glibc, GPU) accept both verdicts
# but check that the reason given is the right one. gpu_cases.sh holds the
# cases that need a GPU (skipped, exit 77, without one).
if(TARGET aoti_cuda_cli)
  set(_fx ${CMAKE_CURRENT_SOURCE_DIR}/fixtures)
  set(_cli_dir ${CMAKE_CURRENT_LIST_DIR})
  set(_cli $<TARGET_FILE:aoti_cuda_cli>)
  # cli_case(NAME RC PATTERN... -- ARGS...): runs `aoti_cuda ARGS...` through expect.sh.
  function(cli_case name rc)
    list(FIND ARGN "--" _sep)
    list(SUBLIST ARGN 0 ${_sep} _patterns)
    math(EXPR _first "${_sep} + 1")
    set(_args "")
    list(LENGTH ARGN _n)
    if(_first LESS _n)
      list(SUBLIST ARGN ${_first} -1 _args)
    endif()
    add_test(NAME cli_${name} COMMAND sh ${_cli_dir}/expect.sh ${rc} ${_patterns} -- ${_cli} ${_args})
  endfunction()

  # ---- inspect
  cli_case(inspect_text any
    "method \"forward\": (runnable|NOT runnable here)" "inputs:  \\(float32\\[1,32\\], int64\\[1\\]\\)"
    "forward_weights_blob" "imports 24 aoti_torch_\\* shims" "operator shims: none"
    "integrity +pass" "weights +pass +2048 bytes" "symbol_versions +(FAIL +needs GLIBC_2\\.38.*this machine has glibc|pass)"
    "gpu_architecture +(not checked +no GPU|pass|FAIL)" "^runnable: (yes|no)"
    -- inspect ${_fx}/kv_cache/kv_cache.pte)
  add_test(NAME cli_inspect_exit_matches_verdict COMMAND sh -c
    "out=$(${_cli} inspect ${_fx}/mlp/mlp.pte); rc=$?; echo \"$out\" | tail -1; echo rc=$rc; if echo \"$out\" | grep -q '^runnable: yes'; then [ $rc -eq 0 ]; else [ $rc -eq 3 ]; fi")
  cli_case(inspect_json any
    "\"exporter_generation\": \"method_keys\"" "\"dynamic\": true" "\"op_shims\": \\[\\]" "\"name\": \"symbol_versions\""
    "\"runnable\": (true|false)" -- inspect ${_fx}/dynamic_mlp/dynamic_mlp.pte --json)
  cli_case(inspect_wrong_data 3
    "weights +FAIL +the library was compiled for a 38440-byte weights blob.* has 22184 bytes" "^runnable: no"
    -- inspect ${_fx}/mlp/mlp.pte --data ${_fx}/conv/aoti_cuda_blob.ptd)
  # Another export's data file that lacks the keys this program needs: a FAIL naming the key,
  # the bytes needed and the keys the data file does hold, never "runnable: yes".
  cli_case(inspect_missing_weights_key 3
    "weights +FAIL +the library needs a 37248-byte weights blob under the key 'decode_weights_blob', which no data file holds \\(they hold: .*forward_weights_blob"
    "^runnable: no"
    -- inspect ${_fx}/lm/lm.pte --data ${_fx}/mlp/aoti_cuda_blob.ptd)
  # ExecuTorch 1.5.1's layout (tests/data/et15, code-less stand-ins for the libraries): the generation and each stored tensor.
  set(_et15 ${CMAKE_CURRENT_SOURCE_DIR}/data/et15/shared/model.pte)
  cli_case(inspect_et15 any "^exporter: executorch-1\\.5 \\(ETCUDAFQN3"
    "weights: 7 tensors stored per FQN \\(ETCUDAFQN3\\), 182 bytes in .*aoti_cuda_blob\\.ptd. 6 shared"
    "m\\.tail +float32\\[6\\] strides \\(1\\) offset 2, cuda, 32 bytes, shared" "_tensor_constant0 +float32\\[3\\]"
    -- inspect ${_et15})
  cli_case(inspect_et15_json any "\"exporter_generation\": \"fqn_weights\"" "\"format\": \"ETCUDAFQN3\""
    "\"shared_with_other_delegates\": 6" "\"storage_key\": \"cuda_fqn_weight:cuda:m\\.lin\\.weight\""
    -- inspect ${_et15} --json)
  cli_case(inspect_partial 3 "NOT runnable by aoti_cuda" "aten::sigmoid" "^runnable: no" -- inspect ${_fx}/partial/partial.pte)
  cli_case(inspect_bad_file 1 "error \\(invalid_program\\).*P2 \\(file identifier\\) failed" -- inspect ${_fx}/README.md)
  cli_case(inspect_missing_file 2 "model: File does not exist: /nonexistent.pte" -- inspect /nonexistent.pte)
  cli_case(inspect_missing_data 2 "--data: File does not exist: /nonexistent.ptd"
    -- inspect ${_fx}/mlp/mlp.pte --data /nonexistent.ptd)
  cli_case(inspect_json_error 2 "\"code\": \"usage\"" "\"command\": \"inspect\"" "\"exit_status\": 2"
    -- inspect /nonexistent.pte --json)
  # 4 KiB zeroed inside the embedded library's code (mlp.pte: the .so starts at
  # byte 1152, its .text spans file offsets 0x92730..0x173c32 of the .so).
  add_test(NAME cli_inspect_damaged COMMAND sh -c
    "sh ${_cli_dir}/damage.sh ${_fx}/mlp/mlp.pte ${CMAKE_BINARY_DIR}/damaged_mlp.pte 655360 && sh ${_cli_dir}/expect.sh 3 'integrity +FAIL +damaged: .*zero bytes' '^runnable: no' -- ${_cli} inspect ${CMAKE_BINARY_DIR}/damaged_mlp.pte --data ${_fx}/mlp/aoti_cuda_blob.ptd")

  # Which imports the file's libraries need that this build lacks (none for a fixture); an
  # operator shim this build lacks is named (a copy of mlp_int4 whose int4 import is renamed
  # to PyTorch's _weight_int8pack_mm, which aoti_cuda does not provide).
  cli_case(inspect_no_missing_imports any "^imports this build lacks: none$" "_weight_int4pack_mm +provided .aten fallback op."
    -- inspect ${_fx}/mlp_int4/mlp_int4.pte)
  add_test(NAME cli_inspect_missing_shim COMMAND sh -c
    "LC_ALL=C sed 's/aoti_torch_cuda__weight_int4pack_mm/aoti_torch_cuda__weight_int8pack_mm/g' ${_fx}/mlp_int4/mlp_int4.pte > ${CMAKE_BINARY_DIR}/mlp_int8pack.pte && sh ${_cli_dir}/expect.sh 3 '^imports this build lacks: aoti_torch_cuda__weight_int8pack_mm$' '_weight_int8pack_mm +NOT provided by this build .aten fallback op.' 'imports +FAIL +1 import.s. this build does not provide: aoti_torch_cuda__weight_int8pack_mm' '^runnable: no' -- ${_cli} inspect ${CMAKE_BINARY_DIR}/mlp_int8pack.pte --data ${_fx}/mlp_int4/aoti_cuda_blob.ptd")
  add_test(NAME cli_inspect_missing_shim_json COMMAND sh -c
    "LC_ALL=C sed 's/aoti_torch_cuda__weight_int4pack_mm/aoti_torch_cuda__weight_int8pack_mm/g' ${_fx}/mlp_int4/mlp_int4.pte > ${CMAKE_BINARY_DIR}/mlp_int8pack_json.pte && sh ${_cli_dir}/expect.sh 3 '^  .missing_imports.: .$' '^    .aoti_torch_cuda__weight_int8pack_mm.$' -- ${_cli} inspect ${CMAKE_BINARY_DIR}/mlp_int8pack_json.pte --data ${_fx}/mlp_int4/aoti_cuda_blob.ptd --json")
  # A library calling one of aoti_cuda's own shims (aoti_torch_cuda_aoti_cuda_*, here a made-up name of the same
  # length as the import it replaces, so the file stays well-formed): labelled as runnable on aoti_cuda only.
  add_test(NAME cli_inspect_own_shim COMMAND sh -c
    "LC_ALL=C sed 's/aoti_torch_cuda__weight_int4pack_mm/aoti_torch_cuda_aoti_cuda_int4tests/g' ${_fx}/mlp_int4/mlp_int4.pte > ${CMAKE_BINARY_DIR}/mlp_own_shim.pte && sh ${_cli_dir}/expect.sh 3 '^aoti_cuda only: calls aoti_cuda.s own shims aoti_torch_cuda_aoti_cuda_int4tests ' 'aoti_torch_cuda_aoti_cuda_int4tests +NOT provided by this build .aoti_cuda custom op: only aoti_cuda runs it.' '^    needs aoti_cuda.s own shims: aoti_torch_cuda_aoti_cuda_int4tests ' -- ${_cli} inspect ${CMAKE_BINARY_DIR}/mlp_own_shim.pte --data ${_fx}/mlp_int4/aoti_cuda_blob.ptd")
  add_test(NAME cli_inspect_own_shim_json COMMAND sh -c
    "LC_ALL=C sed 's/aoti_torch_cuda__weight_int4pack_mm/aoti_torch_cuda_aoti_cuda_int4tests/g' ${_fx}/mlp_int4/mlp_int4.pte > ${CMAKE_BINARY_DIR}/mlp_own_shim_json.pte && sh ${_cli_dir}/expect.sh 3 '^  .needs_aoti_cuda_shims.: .$' '.aoti_cuda_only.: true' -- ${_cli} inspect ${CMAKE_BINARY_DIR}/mlp_own_shim_json.pte --data ${_fx}/mlp_int4/aoti_cuda_blob.ptd --json")

  # ---- dispatcher and devices
  cli_case(no_command 2 "A subcommand is required" --)
  cli_case(unknown_command 2 "unknown command 'bogus' \\(commands: inspect, run, bench, devices\\)" -- bogus)
  cli_case(version 0 "^aoti_cuda [0-9]+\\.[0-9]+\\.[0-9]+$" -- --version)
  cli_case(help 0 "inspect" "bench" "Exit status: 0 ok, 1 failure, 2 usage error, 3 not runnable here" -- --help)
  cli_case(devices_help 0 "Usage: aoti_cuda devices" "--json" -- devices --help)
  cli_case(devices_bogus 2 "not expected: --bogus" -- devices --bogus)
  cli_case(devices any "device\\(s\\)|no usable CUDA device" -- devices)
  cli_case(devices_json any "\"usable\": (true|false)" -- devices --json)

  # ---- strict values (CLI11): out of range, negative, not a number, nan, missing
  cli_case(run_device_overflow 2 "--device: .*99999999999" -- run ${_fx}/mlp/mlp.pte --device 99999999999)
  cli_case(bench_negative_runs 2 "--runs: Value -5 not in range" -- bench ${_fx}/mlp/mlp.pte --runs -5)
  cli_case(bench_bad_number 2 "--runs.*abc" "!aoti_cuda bench.*bench:" -- bench ${_fx}/mlp/mlp.pte --runs abc)
  cli_case(run_atol_nan 2 "--atol: needs a finite number >= 0, got 'nan'" -- run ${_fx}/mlp/mlp.pte --atol nan)
  cli_case(run_rtol_inf 2 "--rtol: needs a finite number >= 0, got 'inf'" -- run ${_fx}/mlp/mlp.pte --rtol inf)
  cli_case(run_missing_value 2 "--method" -- run ${_fx}/mlp/mlp.pte --method)
  cli_case(run_unknown_option 2 "not expected: --bogus" -- run ${_fx}/mlp/mlp.pte --bogus)

  # ---- run checks arguments and files before touching the GPU
  cli_case(run_unknown_method 2 "--method nope: the program has no such method \\(methods: forward\\)" "!no_device"
    -- run ${_fx}/mlp/mlp.pte --method nope)
  cli_case(run_missing_input 2 "--input: file does not exist: /nonexistent.bin" "!no_device"
    -- run ${_fx}/mlp/mlp.pte --input /nonexistent.bin)
  cli_case(run_wrong_input 2 "is 24576 bytes" "!no_device" -- run ${_fx}/mlp/mlp.pte --input ${_fx}/conv/forward.in0.bin)
  cli_case(run_too_many_inputs 2 "takes 1 input\\(s\\); 2 --input given"
    -- run ${_fx}/mlp/mlp.pte --input ${_fx}/mlp/forward.in0.bin --input ${_fx}/mlp/forward.in0.bin)
  cli_case(run_too_many_expects 2 "2 --expect files for 1 output"
    -- run ${_fx}/mlp/mlp.pte --random --expect ${_fx}/mlp/forward.out0.bin --expect ${_fx}/mlp/forward.out0.bin)
  cli_case(run_not_runnable 3 "error \\(unsupported\\).*aten::sigmoid" -- run ${_fx}/partial/partial.pte --random)
  cli_case(run_json_error 2 "\"code\": \"usage\"" "\"command\": \"run\"" -- run ${_fx}/mlp/mlp.pte --method nope --json)
  cli_case(run_mlp any "method 'forward' ran|error \\(no_device\\)"
    -- run ${_fx}/mlp/mlp.pte --input ${_fx}/mlp/forward.in0.bin --expect ${_fx}/mlp/forward.out0.bin)
  cli_case(bench_unknown_method 2 "no such method" -- bench ${_fx}/mlp/mlp.pte --method nope)
  cli_case(bench_profile any "profile, host I/O|error \\(no_device\\)" -- bench ${_fx}/mlp/mlp.pte --profile --runs 5 --loads 1)

  # ---- tuning flags (LoadOptions::tuning): checked before anything is loaded
  cli_case(run_tuning_out_of_range 2 "LoadOptions::tuning.upload_threads = 0 is invalid: expected an integer from 1 to 256"
    "!no_device" -- run ${_fx}/mlp/mlp.pte --random --upload-threads 0)
  cli_case(run_tuning_not_a_number 2 "--upload-threads = 12x" -- run ${_fx}/mlp/mlp.pte --random --upload-threads 12x)
  cli_case(run_tuning_bad_staging 2 "--staging: foo not in \\{huge,wc,hostalloc\\}" -- run ${_fx}/mlp/mlp.pte --staging foo)
  cli_case(bench_tuning_negative 2 "--block-cache-mib: Value -1 not in range" -- bench ${_fx}/mlp/mlp.pte --block-cache-mib -1)
  cli_case(bench_tuning_gemv_rows 2 "LoadOptions::tuning.gemv_max_rows = 9" "!no_device"
    -- bench ${_fx}/mlp/mlp.pte --gemv-max-rows 9)
  cli_case(run_tuning_help 0 "--upload-threads" "--staging" "--int4-dequant-m" "--cublas-workspace-mib" -- run --help)
  cli_case(run_tuning_bad_variable 2 "AOTI_CUDA_UPLOAD_THREADS='abc' is invalid" "!no_device"
    -- run ${_fx}/mlp/mlp.pte --random)
  set_tests_properties(cli_run_tuning_bad_variable PROPERTIES ENVIRONMENT "AOTI_CUDA_UPLOAD_THREADS=abc")

  # ---- GPU cases (skipped without a GPU)
  add_test(NAME cli_gpu_cases COMMAND sh ${_cli_dir}/gpu_cases.sh ${_cli} ${_fx} ${CMAKE_BINARY_DIR}/cli_gpu_out)
  set_tests_properties(cli_gpu_cases PROPERTIES SKIP_RETURN_CODE 77)
endif()
