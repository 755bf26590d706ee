#!/usr/bin/env bash
# Tuning sweep for the GPU machine: times kernel variants (rows of the registry's tables,
# forced with SPARSEK_VARIANT=<row name>, cpp/core/registry.hpp) with dist/spmm_check
# (scripts/build-cpp-check.sh) at M=N=K=8192, f16 in/out, row-major B/C, and checks the
# defaults' correctness first. Each timed line is also a correctness check (spmm_check
# compares with a sampled f64 reference). A forced row that cannot run the problem is
# refused, never replaced: spmm_check prints SKIP with the reason (and stderr is shown).
# The tables in cpp/spmm/sm90/configs.hpp and cpp/spmm/wmma/ cite the run that chose their defaults.
set -u
C="${SPMM_CHECK:-dist/spmm_check}"
R="$C --m 8192 --n 8192 --k 8192 --dtype f16 --out f16 --iters 20"
line() { grep -E "^(PASS|FAIL|SKIP)" | sed "s/^/$1 | /"; }

echo "== defaults: spmm_check --suite"
"$C" --suite | grep -E "^(FAIL|SKIP)|passed,"
echo "== defaults: unequal block-rows (in-kernel ordering), both block heights"
for bs in 128 64; do
  $C --m 2048 --n 1024 --k 2048 --bm $bs --bk $bs --density 0.3 --empty-rows 0.1 --backend cutlass \
    | line "unequal cutlass $bs"
done

# sweep ROW BM BACKEND DENSITIES...: the row at M=N=K=8192 for each density, then on
# unequal block-rows (longest-first ordering).
sweep() {
  local row=$1 bs=$2 backend=$3 d
  shift 3
  for d in "$@"; do
    SPARSEK_VARIANT=$row $R --bm $bs --bk $bs --density $d --backend $backend | line "$row d=$d"
  done
  SPARSEK_VARIANT=$row $C --m 2048 --n 1024 --k 2048 --bm $bs --bk $bs --density 0.3 --empty-rows 0.1 \
    --backend $backend --dtype f16 --out f16 | line "$row unequal"
}

echo "== CUTLASS (sm90) rows, f16 row-major B/C"
for row in sm90_f16_bm128_brow_crow sm90_f16_bm128_brow_crow_128x192 sm90_f16_bm128_brow_crow_128x128 \
  sm90_f16_bm128_brow_crow_t256x128; do
  sweep $row 128 cutlass 0.0625 0.125 0.25
done
for row in sm90_f16_bm64_brow_crow sm90_f16_bm64_brow_crow_t128x64; do
  sweep $row 64 cutlass 0.0625 0.125 0.25
done

echo "== WMMA rows"
for pair in 128:w128x256 128:p128x256 128:h128x256k64 128:h128x256k32s5 128:h128x128x4w 128:h128x256k64s3 \
  64:w64x256 64:h64x256k64 64:h64x256s6 64:h64x256x4w 32:w32x256 32:h32x256s5 32:h32x256x4w; do
  sweep "wmma_${pair##*:}" "${pair%%:*}" wmma 0.125
done
