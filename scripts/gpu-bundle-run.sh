#!/usr/bin/env bash
# Runs sparsek's bundled GPU executables (built by scripts/bundle-gpu.sh) on a machine
# with a GPU and the CUDA driver; no Rust or CUDA toolkit needed.
#
#   run.sh                 # run.sh test
#   run.sh test            # every GPU test and checker below, concurrently; non-zero exit if any fails
#   run.sh test-spmm       # its first half: the products' families, quickstarts, C++ checks
#   run.sh test-ops        # its second half: A^T, SDDMM, attention, hardening, FP8, MLP, TP, C++ checks
#   run.sh bench [ARGS]    # the criterion bench, benches/families.rs: Hopper vs WMMA vs cuBLAS (ARGS passed on, e.g. a filter)
#   run.sh report [ARGS]   # bench_report run ARGS (table, --json, --png, --baseline gate)
#   run.sh products [ARGS] # bench_report products ARGS (A^T*B and D*A beside A*B)
#   run.sh fp8 [ARGS]      # bench_report fp8 ARGS (W8A8 and W8A16 beside dense FP8 cuBLASLt and f16)
#   run.sh sddmm           # the SDDMM sweep beside torch.sparse.sampled_addmm (cuSPARSE)
#   run.sh attention [all|mha|gqa]  # attention beside FlexAttention, SDPA and FA4 (same masks), tables
#   run.sh decode          # the split-KV decode attention: GB/s on K and V, dense and a quarter of the blocks, contiguous and paged, beside a device copy
#   run.sh sanitize        # GPU tests under compute-sanitizer memcheck and racecheck
#   run.sh candle          # sparsek-candle: its GPU tests, the worked decoder (dense twin vs sparse tokens/s, the step's breakdown) at contexts 8192 and 32768, batches 1 and 16, the candle ops' overhead over sparsek's API
#
# The test modes run each Rust test in a process of its own (`BIN --exact NAME`: its own
# CUDA context, environment and globals, so tests that capture CUDA graphs, set variables
# or make contexts cannot disturb each other) and each C++ checker as one job, up to
# SPARSEK_JOBS at a time (default: half the cores, at most 8; 1 when the GPU is in an
# exclusive compute mode), each under a limit of SPARSEK_JOB_TIMEOUT seconds (default 300).
# At the end: each failed job's last lines, then every job's exit status and wall time,
# longest first, the seconds per executable, and the total. Logs: $OUT/suite/ when OUT is
# set (suite.log: every job's output; summary.txt: the table), else a temporary folder.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export SPARSEK_REQUIRE_GPU=1
# cudarc loads libcublas at run time (benches): look where toolkits and wheels put it.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13/lib") for p in nvidia.__path__))' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done

# ---- the test runner ----
names=()   # job names, as the table shows them
cmds=()    # their command lines (quoted for eval)

# job NAME CMD...: one job running CMD (each word quoted).
job() {
  local name=$1
  shift
  names+=("$name")
  cmds+=("$(printf '%q ' "$@")")
}

# tests_of ENV BIN [FILTER...]: one job per test of BIN whose name contains a FILTER (every
# test without one; a FILTER starting with ! excludes the tests that contain the rest),
# run with the variables ENV ("" or "A=1 B=2").
tests_of() {
  local env=$1 bin=$2 name f keep all=1 tests
  shift 2
  for f in "$@"; do [ "${f#!}" = "$f" ] && all=0; done
  if [ ! -x "$here/$bin" ]; then
    job "$bin (missing)" sh -c "echo '$bin: not in the bundle' >&2; exit 1"
    return
  fi
  mapfile -t tests < <("$here/$bin" --list 2>/dev/null | sed -n 's/: test$//p')
  if [ ${#tests[@]} = 0 ]; then
    job "$bin (no tests listed)" sh -c "echo '$bin --list named no test' >&2; exit 1"
    return
  fi
  for name in "${tests[@]}"; do
    keep=$all
    for f in "$@"; do
      case $f in
        !*) [[ $name == *"${f#!}"* ]] && { keep=0; break; } ;;
        *) [[ $name == *"$f"* ]] && keep=1 ;;
      esac
    done
    [ "$keep" = 1 ] || continue
    # shellcheck disable=SC2086 # ENV is words on purpose
    job "$bin $name${env:+ [$env]}" env $env "$here/$bin" --exact "$name" --nocapture --test-threads=1
  done
}

# whole_binary BIN: one job running every test of BIN in one process, one at a time (the
# two-GPU tests: each makes NCCL communicators over both GPUs).
whole_binary() {
  if [ -x "$here/$1" ]; then
    job "$1 (every test)" "$here/$1" --test-threads=1 --nocapture
  else
    job "$1 (missing)" sh -c "echo '$1: not in the bundle' >&2; exit 1"
  fi
}

# The products' families (A*B): the C++ checks (one process each, so first: the pool
# starts jobs in order), then the rows Auto takes only on some problems (ping-pong,
# clusters, split tiles), each forced (SPARSEK_VARIANT) on cases it fits with 100 repeats
# bitwise (the split rows split every launch), then the Hopper, WMMA and Decode tests.
spmm_checkers() {
  job "spmm_check --suite" "$here/spmm_check" --suite
  [ -x "$here/check_decode" ] && job check_decode "$here/check_decode"
  # The Decode rows' cp.async path on sm_90 (taken there only where a tensor map cannot be made).
  [ -x "$here/check_decode" ] && job "check_decode (cp.async)" env SPARSEK_DECODE_TMA=0 "$here/check_decode"
  job quickstart "$here/quickstart"
  job quickstart_cpp "$here/quickstart_cpp"
  job cpp_index_check "$here/cpp_index_check"
  job cpp_tma_status "$here/cpp_tma_status"
}
spmm_tests() {
  local row
  for row in sm90_f16_bm128_brow_crow_c2 sm90_f16_bm64_brow_crow_c2 sm90_f16_bm128_brow_crow_pp \
             sm90_f16_bm64_brow_crow_pp sm90_bf16_bm128_brow_crow_pp sm90_bf16_bm64_brow_crow_pp \
             sm90_f16_bm128_brow_crow_split sm90_f16_bm64_bcol_ccol_split \
             sm90_bf16_bm128_bcol_ccol_split sm90_bf16_bm64_brow_crow_split; do
    case $row in
      *_split) tests_of "SPARSEK_SM90_SPLIT=3 SPARSEK_VARIANT=$row" gpu_sm90_tests forced_row ;;
      *) tests_of "SPARSEK_VARIANT=$row" gpu_sm90_tests forced_row ;;
    esac
  done
  # The 16-bit rows on 128-deep k-tiles (Auto: n <= 512, configs.hpp), by the rule's split and in 3 pieces.
  for row in sm90_f16_bm_le128_k128_bcol_128x64 sm90_bf16_bm_le128_k128_bcol_128x64 \
             sm90_f16_bm_le128_k128_bcol_128x128 sm90_bf16_bm_le128_k128_bcol_128x128; do
    tests_of "SPARSEK_VARIANT=$row" gpu_sm90_tests k128_row
    tests_of "SPARSEK_SM90_SPLIT=3 SPARSEK_VARIANT=$row" gpu_sm90_tests k128_row
  done
  tests_of "" gpu_sm90_tests '!forced_row' '!k128_row'
  # The W8A16 narrow row on the W8A16 cases (Auto takes it at n = 33-128 where its tiles fit one wave).
  tests_of "SPARSEK_VARIANT=sm90_e4m3_f16_bm_le128_k128_bcol_128x64" gpu_fp8_tests w8a16_on_hopper
  tests_of "SPARSEK_SM90_SPLIT=3 SPARSEK_VARIANT=sm90_e4m3_f16_bm_le128_k128_bcol_128x64" gpu_fp8_tests w8a16_on_hopper
  # The FP8 Scaled rows (TMA epilogue, f16 C of one layout), each forced on the tests of its
  # layout: the 128x128 and 128x256 rows on every 128x128-block case (n = 8-4104, split by the
  # rule, and the cluster cases), the cluster rows on theirs, the 64-high rows on the 64x64-block
  # cases; Auto's choice among them in the run of every test.
  for c in ccol crow; do
    for tile in "" _128x256; do
      tests_of "SPARSEK_VARIANT=sm90_e4m3_bm128_k128_bcol_$c$tile" gpu_fp8_tests "w8a8_scaled_$c"
    done
    tests_of "SPARSEK_VARIANT=sm90_e4m3_bm128_k128_bcol_${c}_128x256_c2" gpu_fp8_tests "w8a8_scaled_${c}_cluster"
    tests_of "SPARSEK_VARIANT=sm90_e4m3_bm64_k64_bcol_$c" gpu_fp8_tests "w8a8_scaled64_$c"
  done
  # Every Hopper launch of a row with split tiles in 3 pieces (cpp/spmm/sm90/split.hpp:
  # SPARSEK_SM90_SPLIT); Auto then takes the split rows (configs.hpp `split`) everywhere.
  tests_of "SPARSEK_SM90_SPLIT=3" gpu_sm90_tests cutlass_matches split_tiles any_block_sanitized
  tests_of "SPARSEK_SM90_SPLIT=3" gpu_families_tests skewed epilogue_on_every_family
  tests_of "" gpu_wmma_tests
  tests_of "" gpu_decode_tests
  # The fill rows, which Auto takes only where they keep more bytes in flight, each forced on
  # the cases that fit it.
  tests_of "SPARSEK_VARIANT=decode_w8_n8_fill" gpu_decode_tests w8a16_narrow
  tests_of "SPARSEK_VARIANT=decode_w8_n8" gpu_decode_tests w8a16_narrow
  tests_of "SPARSEK_VARIANT=decode_w8_n16_fill" gpu_decode_tests w8a16_n16_rows
  tests_of "SPARSEK_VARIANT=decode_n8_fill" gpu_decode_tests decode_n8_rows
  tests_of "SPARSEK_VARIANT=decode_n8_wide" gpu_decode_tests decode_n8_rows
  tests_of "SPARSEK_VARIANT=decode_n16_fill" gpu_decode_tests decode_n16_rows
  tests_of "SPARSEK_VARIANT=decode_n16" gpu_decode_tests decode_n16_rows
  tests_of "SPARSEK_VARIANT=decode_n32_fill" gpu_decode_tests decode_n32_rows
  tests_of "SPARSEK_VARIANT=decode_n32_bparts2" gpu_decode_tests decode_n32_rows
  tests_of "SPARSEK_VARIANT=decode_n48_bparts2" gpu_decode_tests decode_n48_rows
  tests_of "SPARSEK_VARIANT=decode_n64_bparts2" gpu_decode_tests decode_n64_rows
  tests_of "" gpu_families_tests
  tests_of "" device_bsr_tests
}

# The other products and operations: A^T and D*op(A), SDDMM, attention and gating, the
# refusals of foreign and overlapping operands, FP8, the gated product and SparseMlp,
# tensor parallelism (it says it skips on one GPU), and their C++ checkers.
ops_checkers() {
  job attention_check "$here/attention_check"
  job fp8_check "$here/fp8_check"
  # The rows Auto does not take (warpgroups taking turns), forced on the C++ checker's cases.
  local row
  for row in attn_sm90_bf16_d128_turns attn_sm90_bf16_d64_turns; do
    job "attention_check --quick [SPARSEK_VARIANT=$row]" env "SPARSEK_VARIANT=$row" "$here/attention_check" --quick
  done
  # The split-KV decode family: its checker, and every case on each of two of its rows
  # forced (both dtypes, both head_dims between them).
  job attention_decode_check "$here/attention_decode_check"
  for row in attn_decode_bf16_d128 attn_decode_f16_d64; do
    job "attention_decode_check [SPARSEK_VARIANT=$row]" env "SPARSEK_VARIANT=$row" "$here/attention_decode_check"
  done
  # Every launch in 37 splits: the combine's split loops past one round of its 32 (max, sum)
  # lanes and 8 / 16 partial-O lanes.
  job "attention_decode_check [SPARSEK_ATTENTION_DECODE_SPLITS=37]" env SPARSEK_ATTENTION_DECODE_SPLITS=37 \
    "$here/attention_decode_check"
  job sddmm_check "$here/sddmm_check"
  job linear_backward "$here/linear_backward"
  job cpp_api_errors "$here/cpp_api_errors"
  # The gated product on Hopper and sparse_mlp (tests/cpp/check_gated.cu).
  if [ -x "$here/check_gated" ]; then
    job check_gated "$here/check_gated"
  fi
}
ops_tests() {
  local row
  whole_binary gpu_tp_tests
  tests_of "" gpu_products_tests
  # The A^T rows with split tiles, every launch in 3 pieces.
  tests_of "SPARSEK_SM90_SPLIT=3" gpu_products_tests transposed_matches
  tests_of "" gpu_fp8_tests
  tests_of "" gpu_mlp_tests
  tests_of "" gpu_sddmm_tests
  tests_of "" gpu_attention_tests
  # The decode family: Auto, two rows forced, and every launch split in 3 (the combine
  # kernel) or never split.
  tests_of "" gpu_attention_decode_tests
  for row in attn_decode_bf16_d128 attn_decode_f16_d64; do
    tests_of "SPARSEK_VARIANT=$row" gpu_attention_decode_tests matches edge
  done
  tests_of "SPARSEK_ATTENTION_DECODE_SPLITS=3" gpu_attention_decode_tests matches edge deterministic
  tests_of "SPARSEK_ATTENTION_DECODE_SPLITS=37" gpu_attention_decode_tests matches deterministic
  tests_of "SPARSEK_ATTENTION_DECODE_SPLITS=1" gpu_attention_decode_tests matches deterministic
  # Packed decode shapes with every launch split in 3 (the combine kernel per sequence).
  tests_of "SPARSEK_ATTENTION_DECODE_SPLITS=3" gpu_attention_tests varlen_decode varlen_repeats
  tests_of "" gpu_hardening_tests
}

# Test executables of the bundle that neither half names (a test file added since): every
# test of each, so nothing built is left unrun.
other_jobs() {
  local known=(gpu_sm90_tests gpu_wmma_tests gpu_decode_tests gpu_families_tests device_bsr_tests
    gpu_products_tests gpu_fp8_tests gpu_mlp_tests gpu_sddmm_tests gpu_attention_tests
    gpu_attention_decode_tests gpu_hardening_tests gpu_tp_tests) bin
  for bin in "$here"/*_tests; do
    bin=${bin##*/}
    [ -x "$here/$bin" ] || continue
    [[ " ${known[*]} " == *" $bin "* ]] || tests_of "" "$bin"
  done
}

# Runs every job, up to $jobs at a time, then prints the report; exits non-zero if any
# job failed. $1: the suite's name.
run_jobs() {
  local suite=$1 jobs limit scratch dest t0 t1 i running=0 failed=0
  jobs=${SPARSEK_JOBS:-$(( $(nproc) / 2 ))}
  (( jobs > 8 && ${SPARSEK_JOBS:-0} == 0 )) && jobs=8
  (( jobs < 1 )) && jobs=1
  if nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | grep -qi exclusive; then
    echo "the GPU is in an exclusive compute mode: one job at a time"
    jobs=1
  fi
  limit=${SPARSEK_JOB_TIMEOUT:-300}
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/sparsek-suite.XXXXXX")
  echo "sparsek GPU bundle ($suite): ${#cmds[@]} jobs, $jobs at a time, each limited to $limit s; logs in $scratch"
  t0=$(date +%s.%N)
  for i in "${!cmds[@]}"; do
    if (( running >= jobs )); then
      wait -n
      running=$(( running - 1 ))
    fi
    (
      s=$(date +%s.%N)
      timeout -k 10 "$limit" bash -c "${cmds[$i]}" > "$scratch/$i.log" 2>&1
      rc=$?
      e=$(date +%s.%N)
      echo "$rc $s $e" > "$scratch/$i.rc"
      # A line as each job ends: a run cut short still shows what finished.
      awk -v s="$s" -v e="$e" -v rc="$rc" -v name="${names[$i]}" \
        'BEGIN { printf "%7.1f s  %s  %s\n", e - s, rc == 0 ? "ok  " : "FAIL", name }'
    ) &
    running=$(( running + 1 ))
  done
  wait
  t1=$(date +%s.%N)

  # One line per job: status, seconds, name (for sorting: seconds first).
  local rows=() rc s e secs status
  for i in "${!cmds[@]}"; do
    read -r rc s e 2>/dev/null < "$scratch/$i.rc" || { rc=255 s=0 e=0; }
    secs=$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.1f", e - s }')
    case $rc in
      0) status=ok ;;
      124|137) status=TIMEOUT; failed=$(( failed + 1 )) ;;
      *) status="FAIL($rc)"; failed=$(( failed + 1 )) ;;
    esac
    rows+=("$secs"$'\t'"$status"$'\t'"${names[$i]}")
    echo "$status, $secs s" > "$scratch/$i.rc"
    if [ "$rc" != 0 ]; then
      echo
      echo "==== $status ${names[$i]} (${secs} s): last lines of its log ===="
      tail -n 40 "$scratch/$i.log"
    fi
  done
  local total
  total=$(awk -v s="$t0" -v e="$t1" 'BEGIN { printf "%.0f", e - s }')
  # Every job, longest first (the console shows the 25 longest).
  printf '%s\n' "${rows[@]}" | sort -t$'\t' -k1,1 -g -r | awk -F'\t' '{ printf "%8s  %-9s %s\n", $1, $2, $3 }' \
    > "$scratch/jobs.txt"
  {
    echo
    echo "== sparsek GPU bundle ($suite): the longest jobs (seconds, status, job; all ${#cmds[@]} in summary.txt)"
    head -n 25 "$scratch/jobs.txt"
    echo "== seconds per executable (jobs, sum of their wall times, longest job)"
    printf '%s\n' "${rows[@]}" | awk -F'\t' '{ split($3, w, " "); n[w[1]]++; t[w[1]] += $1; if ($1 > m[w[1]]) m[w[1]] = $1 }
      END { for (b in n) printf "%8.1f  %3d jobs  longest %6.1f  %s\n", t[b], n[b], m[b], b }' | sort -g -r
    echo "== ${#cmds[@]} jobs, $failed failed, $jobs at a time: ${total} s wall"
    if [ "$failed" = 0 ]; then
      echo "sparsek GPU bundle ($suite): all passed"
    else
      echo "sparsek GPU bundle ($suite): FAILED"
    fi
  } | tee "$scratch/summary.txt"
  {
    echo "== every job, longest first"
    cat "$scratch/jobs.txt"
  } >> "$scratch/summary.txt"
  rm -f "$scratch/jobs.txt"

  # Every log in one file (the device tool brings back few files).
  for i in "${!cmds[@]}"; do
    echo "==== ${names[$i]}: $(cat "$scratch/$i.rc") ===="
    echo "+ ${cmds[$i]}"
    cat "$scratch/$i.log"
  done > "$scratch/suite.log"
  if [ -n "${OUT:-}" ]; then
    dest="$OUT/suite"
    mkdir -p "$dest"
    cp "$scratch/summary.txt" "$scratch/suite.log" "$dest/"
    rm -rf "$scratch"
    echo "logs: $dest/suite.log, $dest/summary.txt"
  else
    rm -f "$scratch"/*.rc
    echo "logs: $scratch/suite.log ($scratch/N.log each)"
  fi
  [ "$failed" = 0 ]
}

case "${1:-test}" in
  test)
    spmm_checkers
    ops_checkers
    spmm_tests
    ops_tests
    other_jobs
    run_jobs test
    exit $?
    ;;
  test-spmm)
    spmm_checkers
    spmm_tests
    run_jobs test-spmm
    exit $?
    ;;
  test-ops)
    ops_checkers
    ops_tests
    other_jobs
    run_jobs test-ops
    exit $?
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
    # ceiling of the same run: one line each.
    pattern="$(mktemp)"
    for blk in 128 64; do for d in 0.125 0.25; do for dt in f16 bf16; do for lay in "row col" "col row"; do
      "$here/sddmm_check" --time 8192 8192 8192 $blk $d $dt $lay 10 "$pattern" || exit 1
      [ $dt = f16 ] && python3 "$here/sddmm_torch.py" "$pattern" 8192 8192 8192 $dt $lay --iters 5 | grep -v ceiling
    done; done; done; done
    for dt in f16 bf16; do python3 "$here/sddmm_torch.py" "$pattern" 8192 8192 8192 $dt row col --iters 5 | grep ceiling; done
    rm -f "$pattern"
    ;;
  attention)
    # sparsek's timer (attention_check --time) writes each case and its mask, the peers
    # (attention_torch.py: FlexAttention, SDPA flash and cuDNN, FlashAttention-4 when
    # importable) run the same masks, bench_report tabulates. `run.sh attention [all|mha|gqa]`:
    #   mha  bf16 and f16 at batch 4, 16 heads, seq 8192, head_dim 128 (and 64 for bf16);
    #   gqa  prefill with grouped-query heads: bf16, batch 2, 32 query heads over 8 KV heads,
    #        seq 8192, head_dim 128; causal, top-k 16 of the 64 key blocks, and both; then the
    #        same with 32 KV heads, K and V the GQA case's repeated per query head (the same
    #        values, so the same top-k masks and kept pairs: the ratio is GQA's cost alone).
    which=${2:-all}
    case $which in
      all|mha|gqa) ;;
      *) echo "usage: run.sh attention [all|mha|gqa]" >&2; exit 2 ;;
    esac
    out="${OUT:-/tmp}/attention"
    mkdir -p "$out"
    : > "$out/attention.jsonl"
    specs=()  # DTYPE HEAD_DIM MASK BATCH HEADS [the timer's options]
    if [ "$which" != gqa ]; then
      specs+=("bf16 128 causal 4 16" "bf16 128 topk16 4 16" "bf16 128 dense 4 16" "bf16 128 topk16_causal 4 16"
              "f16 128 causal 4 16" "f16 128 topk16 4 16" "bf16 64 causal 4 16" "bf16 64 topk16 4 16")
    fi
    if [ "$which" != mha ]; then
      for m in causal topk16 topk16_causal; do specs+=("bf16 128 $m 2 32 --heads-kv 8"); done
      for m in causal topk16 topk16_causal; do specs+=("bf16 128 $m 2 32 --heads-kv 32 --repeat-kv 4"); done
    fi
    cases=()
    for spec in "${specs[@]}"; do
      # shellcheck disable=SC2086 # the spec is words on purpose
      set -- $spec
      dt=$1 d=$2 m=$3 b=$4 h=$5
      shift 5
      opts=$(echo "$*" | tr -d ' -')
      case_file="$out/${dt}_d${d}_${m}_b${b}_h${h}${opts:+_$opts}.json"
      "$here/attention_check" --time "$m" "$dt" "$b" "$h" 8192 "$d" 10 "$case_file" "$@" >> "$out/attention.jsonl" || exit 1
      cases+=("$case_file")
    done
    echo "run.sh attention: sparsek's ${#cases[@]} cases timed (${SECONDS} s)" >&2
    peers=0
    python3 "$here/attention_torch.py" --iters 10 "${cases[@]}" >> "$out/attention.jsonl" || peers=$?
    echo "run.sh attention: peers done (${SECONDS} s)" >&2
    "$here/bench_report" attention "$out/attention.jsonl" --json "$out/attention.json" || exit 1
    [ "$peers" = 0 ] || { echo "run.sh attention: attention_torch.py exited $peers" >&2; exit 1; }
    ;;
  decode)
    # The split-KV decode family at the issue's shapes (batch 32, 32 query heads over 8 KV
    # heads, head_dim 128, one query per sequence, seq_k 8192 and 32768), then few sequences
    # over long keys (the split path) and 4 queries per sequence: one JSON line each for the
    # dense KV and a random quarter of the 128-key blocks, each beside a device-to-device
    # copy's bandwidth in the same run; the issue's shapes again with K and V paged (a
    # shuffled pool of 16-key pages, vLLM's default, and of 128-key pages).
    for dt in bf16 f16; do for sk in 8192 32768; do
      "$here/attention_decode_check" --time $dt 32 32 8 1 $sk 128 20 || exit 1
    done; done
    for sk in 8192 32768; do for page in 16 128; do
      "$here/attention_decode_check" --time bf16 32 32 8 1 $sk 128 20 $page || exit 1
    done; done
    "$here/attention_decode_check" --time bf16 1 32 8 1 32768 128 20 || exit 1
    "$here/attention_decode_check" --time bf16 1 32 8 1 8192 128 20 || exit 1
    "$here/attention_decode_check" --time f16 1 16 4 1 8192 128 20 || exit 1
    "$here/attention_decode_check" --time bf16 4 32 8 1 8192 128 20 || exit 1
    "$here/attention_decode_check" --time bf16 8 32 8 4 8192 128 20 || exit 1
    # The HBM read ceiling of this run (E_hbm's denominator): PyTorch's sum over 4 GiB of bf16
    # (a read-only streaming kernel), the median of 20.
    python3 - <<'PY' || exit 1
import json, torch
x = torch.empty(2 * 1024**3, dtype=torch.bfloat16, device="cuda").uniform_()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = []
for _ in range(21):
    s.record(); x.sum(dtype=torch.float32); e.record(); e.synchronize()
    times.append(s.elapsed_time(e))
ms = sorted(times[1:])[10]
print(json.dumps({"impl": "torch_sum", "bytes": x.numel() * 2, "us": round(ms * 1e3, 2),
                  "read_gbs": round(x.numel() * 2 / (ms * 1e-3) / 1e9, 1)}))
del x
# The dense decode baseline of the same run: PyTorch SDPA (each backend that takes the case)
# at the issue's shape, GQA 32/8, one query per sequence, bf16; then the few-sequence shapes
# above (batch 1 and 4).
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F
for b, hq, hkv, sk in ((32, 32, 8, 8192), (32, 32, 8, 32768), (1, 32, 8, 32768), (1, 32, 8, 8192),
                       (1, 16, 4, 8192), (4, 32, 8, 8192)):
    q = torch.randn(b, hq, 1, 128, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(b, hkv, sk, 128, dtype=torch.bfloat16, device="cuda")
    v = torch.randn_like(k)
    kv_bytes = 2 * k.numel() * 2
    for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                     ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel(be):
                F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                times = []
                for _ in range(11):
                    s.record(); F.scaled_dot_product_attention(q, k, v, enable_gqa=True); e.record(); e.synchronize()
                    times.append(s.elapsed_time(e))
            ms = sorted(times[1:])[5]
            print(json.dumps({"impl": "sdpa_" + name, "batch": b, "heads_q": hq, "heads_kv": hkv, "seq_k": sk,
                              "us": round(ms * 1e3, 2),
                              "gbs": round(kv_bytes / (ms * 1e-3) / 1e9, 1)}))
        except Exception as err:  # a backend that does not take the case says why
            print(json.dumps({"impl": "sdpa_" + name, "batch": b, "seq_k": sk, "failed": str(err)[:160]}))
    del q, k, v
PY
    ;;
  candle)
    # sparsek-candle (bindings/sparsek-candle): its GPU tests (the candle ops bitwise against
    # sparsek's API), then the worked decoder at both contexts, batches 1 and 16, with where
    # a decode step's time goes (--breakdown), each run ending with the small model's
    # GPU-vs-CPU logits check; then the candle ops' cost over sparsek's own API.
    tests_of "" candle_gpu_tests
    run_jobs candle || exit 1
    for ctx in 8192 32768; do
      "$here/llama_decode" --context "$ctx" --batches 1,16 --breakdown || exit 1
    done
    "$here/op_overhead" || exit 1
    ;;
  sanitize)
    fail=0
    # A representative subset: small sweeps keep the sanitizers' slowdown bearable.
    for tool in memcheck racecheck; do
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_families_tests" --test-threads=1 \
        skewed_pattern device_errors || fail=1
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_decode_tests" --test-threads=1 \
        decode_sanitized || fail=1
      # The Decode rows: the W8A16 checker (Auto's rows), then the fill rows forced on the
      # cases that fit them.
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/fp8_check" --decode-only || fail=1
      SPARSEK_VARIANT=decode_w8_n8_fill compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 w8a16_narrow_matches_reference || fail=1
      SPARSEK_VARIANT=decode_w8_n8 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 w8a16_narrow_matches_reference || fail=1
      SPARSEK_VARIANT=decode_w8_n16_fill compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 w8a16_n16_rows_match_reference || fail=1
      SPARSEK_VARIANT=decode_n8_fill compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 decode_n8_rows_match_reference || fail=1
      SPARSEK_VARIANT=decode_n8_wide compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 decode_n8_rows_match_reference || fail=1
      SPARSEK_VARIANT=decode_n16_fill compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 decode_n16_rows_match_reference || fail=1
      SPARSEK_VARIANT=decode_n16 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 decode_n16_rows_match_reference || fail=1
      SPARSEK_VARIANT=decode_n32_fill compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 decode_n32_rows_match_reference || fail=1
      SPARSEK_VARIANT=decode_n32_bparts2 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 decode_n32_rows_match_reference || fail=1
      SPARSEK_VARIANT=decode_n48_bparts2 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 decode_n48_rows_match_reference || fail=1
      SPARSEK_VARIANT=decode_n64_bparts2 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/gpu_decode_tests" --test-threads=1 decode_n64_rows_match_reference || fail=1
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_sm90_tests" --test-threads=1 \
        any_block_sanitized || fail=1
      # Its pending-error test fails a cudaSetDevice on purpose: API errors are not reported.
      compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 9 "$here/cpp_index_check" || fail=1
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
      # The rows on 128-deep k-tiles: the f16 128x64 (narrow) row split by the rule and in 3
      # pieces, the 128x128 one in 3 pieces; W8A16 (its conversion) on the W8A16 cases.
      # (SPARSEK_SM90_SPLIT=0: not a forced split, so the rule's.)
      for run in "128x64 0" "128x64 3" "128x128 3"; do
        env SPARSEK_SM90_SPLIT="${run#* }" SPARSEK_VARIANT="sm90_f16_bm_le128_k128_bcol_${run% *}" \
          compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/spmm_check" --m 512 --k 4096 --n 100 \
          --bm 128 --bk 128 --density 0.5 --empty-rows 0.2 --beta 0.5 --b-layout col --c-layout row --backend cutlass || fail=1
      done
      # The FP8 Scaled rows (TMA stores from shared memory; split tiles on the small cases).
      for run in "bm128_k128_bcol_ccol_128x256 w8a8_scaled_ccol_matches_reference" \
                 "bm128_k128_bcol_crow_128x256_c2 w8a8_scaled_crow_cluster_matches_reference" \
                 "bm64_k64_bcol_crow w8a8_scaled64_crow_matches_reference"; do
        SPARSEK_VARIANT="sm90_e4m3_${run% *}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
          "$here/gpu_fp8_tests" --test-threads=1 "${run#* }" || fail=1
      done
      # The W8A16 rows (each thread's fragment of A read from the FP8 stage): both plain rows
      # forced, and the gated row through the MLP's Hopper cases.
      for row in sm90_e4m3_f16_bm_le128_k128_bcol_128x64 sm90_e4m3_f16_bm_le128_k128_bcol; do
        SPARSEK_VARIANT=$row compute-sanitizer --tool "$tool" --error-exitcode 9 \
          "$here/gpu_fp8_tests" --test-threads=1 w8a16_on_hopper_matches_reference || fail=1
      done
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_mlp_tests" --test-threads=1 \
        sparse_mlp_fp8_on_hopper_with_bias || fail=1
      # The ping-pong kernel (two consumer warpgroups taking turns on shared memory).
      SPARSEK_VARIANT=sm90_f16_bm128_brow_crow_pp compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/spmm_check" --m 1024 --k 1024 --n 520 --bm 128 --bk 64 --density 0.3 --empty-rows 0.2 \
        --beta 0.5 --backend cutlass || fail=1
      # The gated rows (two passes of the mainloop over one pipeline, two accumulators): the
      # checker's quick cases; sparse_mlp at the checker's sizes (n <= 16: the gated product on
      # Decode).
      if [ -x "$here/check_gated" ]; then
        compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/check_gated" --quick || fail=1
        compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/check_gated" --mlp || fail=1
      fi
      # The refusals of foreign-context operands and overlapping outputs.
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_hardening_tests" --test-threads=1 || fail=1
      # Attention (two warpgroups sharing Q, K, V stages and the O tile) and the gating kernel.
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/attention_check" --quick || fail=1
      SPARSEK_VARIANT=attn_sm90_bf16_d128_turns compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/attention_check" --quick || fail=1
      # The decode family: per-warp cp.async rings, the warps' merge in shared memory, the
      # split partials and their combine kernel, and (3 splits: a cluster) the merge in
      # distributed shared memory.
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/attention_decode_check" --quick || fail=1
      SPARSEK_ATTENTION_DECODE_SPLITS=3 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$here/attention_decode_check" --quick || fail=1
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_attention_decode_tests" --test-threads=1 \
        decode_sanitized decode_paged_sanitized || fail=1
      # Paged K/V and per-sequence key counts (unchecked bad values included: clamped) on the
      # Hopper family.
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_attention_tests" --test-threads=1 \
        attention_paged_sanitized || fail=1
      # Packed (varlen) sequences on both families, unchecked offsets that disagree with the
      # totals included (clamped), and O's rows stored by the threads (packed queries).
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$here/gpu_attention_tests" --test-threads=1 \
        attention_varlen_sanitized || fail=1
    done
    exit $fail
    ;;
  *)
    echo "usage: run.sh [test | test-spmm | test-ops | bench [ARGS] | report [ARGS] | products [ARGS] | fp8 [ARGS] | sddmm | attention [all|mha|gqa] | decode | sanitize | candle]" >&2
    exit 2
    ;;
esac
