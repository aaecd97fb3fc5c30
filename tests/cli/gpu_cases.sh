#!/bin/sh
# gpu_cases.sh AOTI_CUDA_CLI FIXTURES OUT_DIR: the CLI cases that need a GPU.
# Exits 77 (CTest: skipped) with a message when no GPU is usable.
cli="$1"; fx="$2"; out="$3"
here="$(dirname "$0")"
if ! "$cli" devices >/dev/null 2>&1; then
  echo "SKIPPED: no usable GPU ($("$cli" devices 2>&1 | head -1))"; exit 77
fi
mkdir -p "$out"
set -e
# run writes .npy outputs and reads them back with --expect (and .npy inputs)
sh "$here/expect.sh" 0 "wrote .*forward.out0.npy" -- "$cli" run "$fx/mlp/mlp.pte" --input "$fx/mlp/forward.in0.bin" --output "$out"
sh "$here/expect.sh" 0 "vs .*forward.out0.npy: match" -- "$cli" run "$fx/mlp/mlp.pte" --input "$fx/mlp/forward.in0.bin" --expect "$out/forward.out0.npy"
sh "$here/expect.sh" 4 "MISMATCH" -- "$cli" run "$fx/mlp/mlp.pte" --random --expect "$out/forward.out0.npy"
sh "$here/expect.sh" 0 "\"match\": true" -- "$cli" run "$fx/mlp/mlp.pte" --input "$fx/mlp/forward.in0.bin" --expect "$fx/mlp/forward.out0.bin" --json
# run loads only the method asked for; multi-method program
sh "$here/expect.sh" 0 "method 'decode' ran" -- "$cli" run "$fx/encdec/encdec.pte" --method decode --random
# inspect on the GPU machine: every check passes for the bundled fixtures
sh "$here/expect.sh" 0 "gpu_architecture +pass" "symbol_versions +pass" "^runnable: yes" -- "$cli" inspect "$fx/mlp/mlp.pte"
# bench: text and JSON from the one engine
sh "$here/expect.sh" 0 "host I/O +latency over 20 runs" "device I/O" -- "$cli" bench "$fx/mlp/mlp.pte" --runs 20 --loads 2
sh "$here/expect.sh" 0 "\"p50_ms\"" "\"first_call_ms\"" -- "$cli" bench "$fx/mlp/mlp.pte" --runs 20 --loads 2 --json
sh "$here/expect.sh" 0 "profile, host I/O" "run: delegate 0 \(forward\) +GPU +[0-9.]+ ms" "whole call" -- "$cli" bench "$fx/mlp/mlp.pte" --runs 20 --loads 1 --profile
sh "$here/expect.sh" 0 "\"gpu_ms_p50\"" -- "$cli" bench "$fx/lm/lm.pte" --method decode --runs 10 --loads 1 --profile --json
# tuning flags reach the load (reported back) and leave the results unchanged
sh "$here/expect.sh" 0 "\"upload_threads\": 2" "\"staging\": \"wc\"" "\"gemv_max_rows\": 0" "\"match\": true" -- "$cli" run "$fx/mlp_cublas/mlp_cublas.pte" --input "$fx/mlp_cublas/forward.in0.bin" --expect "$fx/mlp_cublas/forward.out0.bin" --upload-threads 2 --staging wc --gemv-max-rows 0 --block-cache-mib 0 --json
sh "$here/expect.sh" 0 "tuning: upload threads [0-9]+, staging huge, block cache 1024 MiB, small copies dma" -- "$cli" bench "$fx/mlp/mlp.pte" --runs 5 --loads 1 --graphs --small-copy dma
echo "all GPU CLI cases passed"
