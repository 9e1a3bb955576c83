#!/usr/bin/env bash
# The accelerator run: the first thing to run whenever a GPU or TPU is available (issue 44).
#
#   pip install --no-deps -e .            # the device's image already has jax and its plugin
#   benchmarks/accelerator_run.sh          # <= 8 minutes on one GPU
#   benchmarks/accelerator_run.sh --dry-run [--out DIR]   # the same steps, small, on the CPU (< 1 min)
#
# Steps, each under its own time limit (30 + 150 + 180 + 60 + 60 s = 8 minutes at most), each recorded
# in steps.tsv with its log NAME.log (a failed step does not stop the others; the exit status is
# non-zero if any failed):
#   1. environment.json: device, driver, Python and package versions (nvidia-smi where present);
#   2. the tests of every non-CPU branch: partial_top_k's float32 keys behind the exactness check,
#      dp_aggregate's select over non-finite rows, the exact samplers, sharding over the device count
#      (the dry run collects them instead: the node ids stay valid);
#   3. dpjax bench --quick --no-peers (bench/results.json, .md, .png): every family, limit ratios;
#   4. the training benchmark's rows, when benchmarks/bench_training.py exists:
#      python -m benchmarks.bench_training --rounds 2 --steps 10 (its table in training.log);
#   5. the exact-noise benchmark: python -m benchmarks.bench_exact (exact.log).
# Everything goes to benchmarks/results/<device>/ (--out DIR overrides; the dry run defaults to a
# temporary folder). Render the bench table into benchmarks/README.md with the command in
# <device>/summary.md: dpjax bench --from-json DIR/bench/results.json --update-readme
# benchmarks/README.md --region accelerator.
set -u -o pipefail

dry=0
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "accelerator_run.sh: unknown argument $1 (use --dry-run, --out DIR)" >&2; exit 2 ;;
  esac
  shift
done

cd "$(dirname "$0")/.."
python="${PYTHON:-python}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # the test workers share the device

if [ "$dry" = 1 ]; then
  export JAX_PLATFORMS=cpu
fi
device="$("$python" -c '
import re, jax
d = jax.devices()[0]
kind = d.platform if d.platform == "cpu" else getattr(d, "device_kind", d.platform)
print(re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-"))')" || { echo "accelerator_run.sh: jax does not start" >&2; exit 2; }
if [ -z "$out" ]; then
  if [ "$dry" = 1 ]; then out="$(mktemp -d)/$device-dry-run"; else out="benchmarks/results/$device"; fi
fi
mkdir -p "$out"
printf 'step\tstatus\tseconds\n' > "$out/steps.tsv"
failed=0

step() {  # step NAME LIMIT_SECONDS COMMAND...: runs COMMAND under a time limit, logs to NAME.log
  local name="$1" limit="$2" start rc
  shift 2
  start=$(date +%s)
  echo "== $name (at most ${limit} s): $*"
  timeout -s INT -k 10 "$limit" "$@" > "$out/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - start ))" >> "$out/steps.tsv"
  tail -n 5 "$out/$name.log"
  [ "$rc" = 0 ] || { echo "== $name failed (exit $rc); see $out/$name.log"; failed=1; }
}

step environment 30 "$python" -m dpjax._src.tools.bench.environment "$out/environment.json"

TESTS=(
  tests/test_partial_top_k.py
  tests/topk/test_topk.py
  tests/optax/test_transform.py
  tests/exact/test_exact_noise.py
  tests/exact/test_tables.py
  tests/cross/test_sharding.py
)
workers=()
if "$python" -c "import xdist" 2>/dev/null && [ "$dry" = 0 ]; then workers=(-n 4); fi
if [ "$dry" = 1 ]; then
  step tests 60 "$python" -m pytest -q -p no:cacheprovider --collect-only "${TESTS[@]}"
  step bench 120 "$python" -m dpjax.cli bench training --size 1e-6 --repeats 1 --no-peers \
    --out "$out/bench" --overwrite
else
  step tests 150 "$python" -m pytest -q -p no:cacheprovider "${workers[@]}" \
    --junitxml "$out/tests.xml" "${TESTS[@]}"
  step bench 180 "$python" -m dpjax.cli bench --quick --no-peers --out "$out/bench" --overwrite
fi

if [ -f benchmarks/bench_training.py ]; then
  if [ "$dry" = 1 ]; then
    step training 30 "$python" -m benchmarks.bench_training --help
  else
    step training 60 "$python" -m benchmarks.bench_training --rounds 2 --steps 10
  fi
else
  printf 'training\tabsent (no benchmarks/bench_training.py)\t0\n' >> "$out/steps.tsv"
fi

if [ "$dry" = 1 ]; then
  step exact 30 "$python" -m benchmarks.bench_exact --help
else
  step exact 60 "$python" -m benchmarks.bench_exact --lanes 10000000 --rounds 3
fi

{
  echo "# Accelerator run on $device"
  echo
  echo "Made by \`benchmarks/accelerator_run.sh$([ "$dry" = 1 ] && echo ' --dry-run')\` on $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo "Steps (exit status 0 = passed; 124 or 130 = stopped at its time limit):"
  echo
  echo '```'
  cat "$out/steps.tsv"
  echo '```'
  echo
  echo "Render the bench table into the README:"
  echo "\`dpjax bench --from-json $out/bench/results.json --update-readme benchmarks/README.md --region accelerator\`"
} > "$out/summary.md"
echo "== wrote $out (summary.md, steps.tsv, the logs and results)"
exit "$failed"
