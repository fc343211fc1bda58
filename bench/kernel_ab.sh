#!/usr/bin/env bash
# The small-M weight kernels of a base revision against this build's, in one process
# (bench/kernel_ab.cpp): builds the base revision's kernel sources into a shared library, then
# runs build/bin/kernel_ab once per shape.
#
#   bench/kernel_ab.sh BASE_REV [kernel_ab options]
#   bench/kernel_ab.sh HEAD~1 --dtype fp8 --m 3 --n 8192 --k 8192 --threads 2
#
# BASE_REV is a git revision, or WORKTREE for the sources as they are (the harness's self-check:
# both sides the same code). The base and this build must agree on PackedWeight
# (src/handoff/ops/linear_kernels.h): the harness hands this build's struct to the base kernels.
# BUILD (default build) names the build directory whose kernel_ab runs; a revision's library is
# cached under ~/.cache/handoff-kernel-ab.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 1 ]]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
base=$1
shift
build=${BUILD:-build}
harness=$build/bin/kernel_ab
if [[ ! -x $harness ]]; then
  echo "kernel_ab.sh: $harness is missing; build first (make build)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ $base == WORKTREE ]]; then
  library=$work/base.so
  cp -r src "$work/"
else
  rev=$(git rev-parse --verify --quiet "$base^{commit}") || {
    echo "kernel_ab.sh: $base names no commit of this repository" >&2
    exit 2
  }
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/handoff-kernel-ab
  library=$cache/base-$rev.so
  [[ -f $library ]] || git archive "$rev" src | tar -x -C "$work"
fi
if [[ ! -f $library ]]; then
  common=(-O3 -DNDEBUG -std=c++20 -fPIC -fvisibility=hidden -I"$work/src")
  ops=$work/src/handoff/ops
  objects=()
  compile() {  # source, extra flags...
    local out=$work/$(basename "$1" .cpp).o
    c++ "${common[@]}" "${@:2}" -c "$1" -o "$out"
    objects+=("$out")
  }
  compile "$ops/linear_avx2.cpp" -mavx2 -mfma -mf16c
  compile "$ops/linear_fp8_avx2.cpp" -mavx2 -mfma -mf16c
  compile "$ops/linear_avx512.cpp" -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c
  compile "$ops/cpu_features.cpp"
  compile bench/kernel_ab/base_shim.cpp
  mkdir -p "$(dirname "$library")"
  c++ -shared -o "$library.tmp" "${objects[@]}" -lfmt
  mv "$library.tmp" "$library"
fi
"$harness" --base "$library" "$@"
