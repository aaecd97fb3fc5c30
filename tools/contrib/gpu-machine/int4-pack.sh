#!/usr/bin/env bash
# The carry for int4-job.sh, from a build folder and any baselines, here (no GPU needed):
#
#   bash tools/contrib/gpu-machine/int4-pack.sh BUILD [NAME=DIR ...]      # then carry [".carry/llmab"]
#
# model-ab.sh --prepare BUILD (BUILD's library and generate, stripped, the wheels, the dry run), then
# .carry/llmab/extra.tar.xz with BUILD's GPU suite (tests/aoti_cuda_gpu_tests) and benches (bench/: the int4, fused
# linear, attention, ablation and read bandwidth benches that BUILD has), and for each NAME=DIR the baseline
# DIR/libaoti_cuda.so.0 as NAME/libaoti_cuda.so.0 with DIR's benches, when it has them, as bench/<bench>_NAME.
# Everything stripped. Then int4-job.sh's BASELINES is the NAMEs in that order. Fails on a missing file or a carry
# over INT4_PACK_LIMIT_MIB (default 50: the 64 MiB a call carries, less the tree).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
BUILD=${1:?usage: int4-pack.sh BUILD [NAME=DIR ...]}
shift
PACK=$ROOT/.carry/llmab
BENCHES="aoti_cuda_int4_bench aoti_cuda_fused_linear_bench aoti_cuda_attention_bench aoti_cuda_fused_linear_ablation
  aoti_cuda_read_bw"

bash "$HERE/model-ab.sh" --prepare "$BUILD" "$PACK"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tests" "$stage/bench"
strip -o "$stage/tests/aoti_cuda_gpu_tests" "$BUILD/tests/aoti_cuda_gpu_tests"
for b in $BENCHES; do
  [[ -x "$BUILD/bench/$b" ]] && strip -o "$stage/bench/$b" "$BUILD/bench/$b"
done
names=()
for spec in "$@"; do
  name=${spec%%=*} dir=${spec#*=}
  [[ "$name" =~ ^[A-Za-z0-9_]+$ && "$name" != "$spec" ]] || { echo "int4-pack: not NAME=DIR: $spec"; exit 1; }
  [[ -f "$dir/libaoti_cuda.so.0" ]] || { echo "int4-pack: $dir/libaoti_cuda.so.0 is missing"; exit 1; }
  mkdir -p "$stage/$name"
  strip -o "$stage/$name/libaoti_cuda.so.0" "$(readlink -f "$dir/libaoti_cuda.so.0")"
  for b in $BENCHES; do
    for f in "$dir/$b" "$dir/bench/$b"; do
      if [[ -x "$f" ]]; then strip -o "$stage/bench/${b}_$name" "$f"; break; fi
    done
  done
  names+=("$name")
done
tar -cJf "$PACK/extra.tar.xz" -C "$stage" .
mib=$(du -sm "$PACK" | cut -f1)
echo "extra.tar.xz: $(tar -tJf "$PACK/extra.tar.xz" | grep -v '/$' | sort | tr '\n' ' ')"
echo "carry $PACK: ${mib} MiB; BASELINES=\"${names[*]}\""
if (( mib > ${INT4_PACK_LIMIT_MIB:-50} )); then
  echo "int4-pack: the carry is ${mib} MiB, over ${INT4_PACK_LIMIT_MIB:-50}: pack fewer baselines or benches"
  exit 1
fi
