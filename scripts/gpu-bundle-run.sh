#!/usr/bin/env bash
# Runs sparsek's bundled GPU executables (built by scripts/bundle-gpu.sh) on a machine
# with a GPU and the CUDA driver; no Rust or CUDA toolkit needed.
#
#   run.sh                 # GPU tests + the Rust and C++ quickstarts; non-zero exit if any fails
#   run.sh test-spmm       # its first half: the products' families, quickstarts, C++ checks
#   run.sh test-ops        # its second half: A^T, SDDMM, attention, hardening, linear_backward
#   run.sh bench [ARGS]    # the criterion bench, benches/families.rs: Hopper vs WMMA vs cuBLAS (ARGS passed on, e.g. a filter)
#   run.sh report [ARGS]   # bench_report run ARGS (table, --json, --png, --baseline gate)
#   run.sh products [ARGS] # bench_report products ARGS (A^T*B and D*A beside A*B)
#   run.sh fp8 [ARGS]      # bench_report fp8 ARGS (W8A8 and W8A16 beside dense FP8 cuBLASLt and f16)
#   run.sh sddmm           # the SDDMM sweep beside torch.sparse.sampled_addmm (cuSPARSE)
#   run.sh attention       # attention beside PyTorch SDPA and FlexAttention (same masks), table
#   run.sh sanitize        # GPU tests under compute-sanitizer memcheck and racecheck
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export SPARSEK_REQUIRE_GPU=1
# cudarc loads libcublas at run time (benches): look where toolkits and wheels put it.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13/lib") for p in nvidia.__path__))' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done

case "${1:-test}" in
  test)
    # Both halves (each fits a 10-minute device call on an H100).
    "$0" test-spmm; a=$?
    "$0" test-ops; b=$?
    [ $a = 0 ] && [ $b = 0 ]
    exit $?
    ;;
  test-spmm)
    fail=0
    "$here/gpu_sm90_tests" --test-threads=1 --nocapture || fail=1
    "$here/gpu_wmma_tests" --test-threads=1 --nocapture || fail=1
    "$here/gpu_decode_tests" --test-threads=1 --nocapture || fail=1
    "$here/gpu_families_tests" --test-threads=1 --nocapture || fail=1
    # Every Hopper launch of a row with split tiles in 3 pieces (cpp/spmm/sm90/split.hpp:
    # SPARSEK_SM90_SPLIT); Auto then takes the split rows (configs.hpp `split`) everywhere.
    SPARSEK_SM90_SPLIT=3 "$here/gpu_sm90_tests" --test-threads=1 --nocapture cutlass_matches split_tiles \
      any_block_sanitized || fail=1
    SPARSEK_SM90_SPLIT=3 "$here/gpu_families_tests" --test-threads=1 --nocapture skewed \
      epilogue_on_every_family || fail=1
    # The rows Auto takes only on some problems (ping-pong, clusters, split tiles), each forced
    # (SPARSEK_VARIANT) on cases it fits, and 100 repeats bitwise; the split rows split every launch.
    for row in sm90_f16_bm128_brow_crow_pp sm90_f16_bm64_brow_crow_pp sm90_bf16_bm128_brow_crow_pp \
               sm90_bf16_bm64_brow_crow_pp sm90_f16_bm128_brow_crow_c2 sm90_f16_bm64_brow_crow_c2 \
               sm90_f16_bm128_brow_crow_split sm90_f16_bm64_bcol_ccol_split \
               sm90_bf16_bm128_bcol_ccol_split sm90_bf16_bm64_brow_crow_split; do
      case $row in *_split) split=3 ;; *) split= ;; esac
      SPARSEK_SM90_SPLIT=$split SPARSEK_VARIANT=$row "$here/gpu_sm90_tests" --test-threads=1 --nocapture \
        forced_row || fail=1
    done
    "$here/device_bsr_tests" --test-threads=1 --nocapture || fail=1
    "$here/quickstart" || fail=1
    "$here/quickstart_cpp" || fail=1
    "$here/spmm_check" --suite || fail=1
    "$here/cpp_index_check" || fail=1
    "$here/cpp_tma_status" || fail=1
    [ -x "$here/check_decode" ] && { "$here/check_decode" || fail=1; }
    [ $fail = 0 ] && echo "sparsek GPU bundle (spmm): all passed" || echo "sparsek GPU bundle (spmm): FAILED"
    exit $fail
    ;;
  test-ops)
    fail=0
    # op(A) = A^T (transpose_a) and D*op(A) (dense_spmm) on the device.
    "$here/gpu_products_tests" --test-threads=1 --nocapture || fail=1
    # The A^T rows with split tiles, every launch in 3 pieces.
    SPARSEK_SM90_SPLIT=3 "$here/gpu_products_tests" --test-threads=1 --nocapture transposed_matches || fail=1
    "$here/gpu_sddmm_tests" --test-threads=1 --nocapture || fail=1
    # Attention and top-k gating: the Rust device path, then the C++ checker (f64 reference).
    "$here/gpu_attention_tests" --test-threads=1 --nocapture || fail=1
    "$here/attention_check" || fail=1
    # Operands of another context and overlapping outputs: refused, typed, nothing written.
    "$here/gpu_hardening_tests" --test-threads=1 --nocapture || fail=1
    # FP8 (W8A8 on Hopper; W8A16 on Decode once it has FP8 rows), Rust and C++ checkers.
    "$here/gpu_fp8_tests" --test-threads=1 --nocapture || fail=1
    "$here/fp8_check" || fail=1
    # The gated product and SparseMlp (f64 oracle, FP8 weights, the CUDA-graph step).
    "$here/gpu_mlp_tests" --test-threads=1 --nocapture || fail=1
    # The rows Auto does not take (warpgroups taking turns), forced on the C++ checker's cases.
    for row in attn_sm90_bf16_d128_turns attn_sm90_bf16_d64_turns; do
      SPARSEK_VARIANT=$row "$here/attention_check" --quick || fail=1
    done
    "$here/linear_backward" || fail=1
    "$here/sddmm_check" || fail=1
    "$here/cpp_api_errors" || fail=1
    [ $fail = 0 ] && echo "sparsek GPU bundle (ops): all passed" || echo "sparsek GPU bundle (ops): FAILED"
    exit $fail
    ;;
  bench)
    shift
    export CRITERION_HOME="${CRITERION_HOME:-$here/criterion}"
    exec "$here/families_bench" --bench "$@"
    ;;
  report)
    shift
    exec "$here/bench_report" run "$@"
    ;;
  fp8)
    shift
    exec "$here/bench_report" fp8 "$@"
    ;;
  products)
    shift
    # A^T*B beside A*B and D*A beside A*B (col/col): bench_report products ARGS
    exec "$here/bench_report" products "$@"
    ;;
  sddmm)
    # The SDDMM at m = n = k = 8192 beside its peer on the same pattern (torch.sparse.sampled_addmm,
    # which runs cuSPARSE's SDDMM; f32 values where PyTorch has no f16 kernel) and the cuBLAS
    # ceiling of the same run: one line each (report/NOTES.md session 14 run 3).
    pattern="$(mktemp)"
    for blk in 128 64; do for d in 0.125 0.25; do for dt in f16 bf16; do for lay in "row col" "col row"; do
      "$here/sddmm_check" --time 8192 8192 8192 $blk $d $dt $lay 10 "$pattern" || exit 1
      [ $dt = f16 ] && python3 "$here/sddmm_torch.py" "$pattern" 8192 8192 8192 $dt $lay --iters 5 | grep -v ceiling
    done; done; done; done
    for dt in f16 bf16; do python3 "$here/sddmm_torch.py" "$pattern" 8192 8192 8192 $dt row col --iters 5 | grep ceiling; done
    rm -f "$pattern"
    ;;
  attention)
    # bf16 and f16 at batch 4, heads 16, seq 8192, head_dim 128 (and 64 for bf16): sparsek's
    # timer writes each case and its mask, the peers run the same masks, bench_report tabulates.
    out="${OUT:-/tmp}/attention"
    mkdir -p "$out"
    : > "$out/attention.jsonl"
    cases=()
    for spec in "bf16 128 causal" "bf16 128 topk16" "bf16 128 dense" "bf16 128 topk16_causal" \
                "f16 128 causal" "f16 128 topk16" "bf16 64 causal" "bf16 64 topk16"; do
      set -- $spec
      case_file="$out/$1_d$2_$3.json"
      "$here/attention_check" --time "$3" "$1" 4 16 8192 "$2" 10 "$case_file" >> "$out/attention.jsonl" || exit 1
      cases+=("$case_file")
    done
    python3 "$here/attention_torch.py" --iters 10 "${cases[@]}" >> "$out/attention.jsonl" || exit 1
    exec "$here/bench_report" attention "$out/attention.jsonl" --json "$out/attention.json"
    ;;
  sanitize)
    fail=0
    # A representative subset: small sweeps keep the sanitizers' slowdown bearable.
    for tool in memcheck racecheck; do
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_families_tests" --test-threads=1 \
        skewed_pattern device_errors || fail=1
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_decode_tests" --test-threads=1 \
        decode_sanitized || fail=1
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_sm90_tests" --test-threads=1 \
        any_block_sanitized || fail=1
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/cpp_index_check" || fail=1
      # A^T*B and D*op(A): refused calls, and a few small cases of both products.
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_products_tests" --test-threads=1 \
        transposed_errors transposed_sanitized || fail=1
      SPARSEK_SM90_SPLIT=3 compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_products_tests" \
        --test-threads=1 transposed_sanitized || fail=1
      # SDDMM: refused calls and small cases on every family.
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_sddmm_tests" --test-threads=1 \
        sddmm_errors sddmm_sanitized || fail=1
      # Split tiles: every Hopper launch in 3 pieces (partial sums through global memory).
      SPARSEK_SM90_SPLIT=3 compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_families_tests" \
        --test-threads=1 skewed_pattern || fail=1
      SPARSEK_SM90_SPLIT=3 compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_sm90_tests" \
        --test-threads=1 any_block_sanitized || fail=1
      # The ping-pong kernel (two consumer warpgroups taking turns on shared memory).
      SPARSEK_VARIANT=sm90_f16_bm128_brow_crow_pp compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/spmm_check" --m 1024 --k 1024 --n 520 --bm 128 --bk 64 --density 0.3 --empty-rows 0.2 \
        --beta 0.5 --backend cutlass || fail=1
      # The refusals of foreign-context operands and overlapping outputs.
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_hardening_tests" --test-threads=1 || fail=1
      # Attention (two warpgroups sharing Q, K, V stages and the O tile) and the gating kernel.
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/attention_check" --quick || fail=1
      SPARSEK_VARIANT=attn_sm90_bf16_d128_turns compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/attention_check" --quick || fail=1
    done
    exit $fail
    ;;
  *)
    echo "usage: run.sh [test | bench [ARGS] | report [ARGS] | products [ARGS] | fp8 [ARGS] | sddmm | attention | sanitize]" >&2
    exit 2
    ;;
esac
