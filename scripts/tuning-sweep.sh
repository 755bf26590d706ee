#!/usr/bin/env bash
# Tuning sweep for the GPU machine: times every CUTLASS (SPARSEK_SM90_CONFIG) and WMMA
# (SPARSEK_WMMA_CONFIG) candidate with dist/spmm_check (scripts/build-cpp-check.sh) at
# M=N=K=8192, f16 in/out, row-major B/C, and checks the defaults' correctness first.
# Each timed line is also a correctness check (spmm_check compares with a sampled f64
# reference). The config tables in cpp/cutlass/bsr_sm90.cu and cpp/wmma/bsr_wmma.cu cite
# the run that chose their defaults.
set -u
C="${SPMM_CHECK:-dist/spmm_check}"
R="$C --m 8192 --n 8192 --k 8192 --dtype f16 --out f16 --iters 20"
line() { grep -E "^(PASS|FAIL|SKIP)" | sed "s/^/$1 | /"; }

echo "== defaults: spmm_check --suite"
"$C" --suite 2>/dev/null | grep -E "^(FAIL|SKIP)|passed,"
echo "== defaults: unequal block-rows (in-kernel ordering), both block heights"
for bs in 128 64; do
  $C --m 2048 --n 1024 --k 2048 --bm $bs --bk $bs --density 0.3 --empty-rows 0.1 --backend cutlass 2>/dev/null | line "unequal cutlass $bs"
done

echo "== CUTLASS candidates"
for cfg in coop_128x256 coop_128x192 coop_128x128 coopT_256x128 pp_128x128 coop_128x256,band=1 coop_128x256,band=4 coop_128x256,sort=0; do
  for d in 0.0625 0.125 0.25; do
    SPARSEK_SM90_CONFIG=$cfg $R --bm 128 --bk 128 --density $d --backend cutlass 2>/dev/null | line "cutlass $cfg d=$d"
  done
  SPARSEK_SM90_CONFIG=$cfg $C --m 2048 --n 1024 --k 2048 --bm 128 --bk 128 --density 0.3 --empty-rows 0.1 \
    --backend cutlass --dtype f16 --out f16 2>/dev/null | line "cutlass $cfg unequal"
done
for cfg in coopT_256x64 coopT_128x64 pp_64x256 pp_64x128; do
  for d in 0.0625 0.125 0.25; do
    SPARSEK_SM90_CONFIG=$cfg $R --bm 64 --bk 64 --density $d --backend cutlass 2>/dev/null | line "cutlass $cfg d=$d"
  done
  SPARSEK_SM90_CONFIG=$cfg $C --m 2048 --n 1024 --k 2048 --bm 64 --bk 64 --density 0.3 --empty-rows 0.1 \
    --backend cutlass --dtype f16 --out f16 2>/dev/null | line "cutlass $cfg unequal"
done

echo "== WMMA candidates"
for pair in 128:0 128:8 128:9 128:10 128:11 128:12 64:2 64:13 64:14 64:15 32:4 32:16 32:17; do
  bs=${pair%%:*} cfg=${pair##*:}
  for d in 0.125; do
    SPARSEK_WMMA_CONFIG=$cfg $R --bm $bs --bk $bs --density $d --backend wmma 2>/dev/null | line "wmma row $cfg bm=$bs d=$d"
  done
  SPARSEK_WMMA_CONFIG=$cfg $C --m 2048 --n 1024 --k 2048 --bm $bs --bk $bs --density 0.3 --empty-rows 0.1 \
    --backend wmma --dtype f16 --out f16 2>/dev/null | line "wmma row $cfg bm=$bs unequal"
done
