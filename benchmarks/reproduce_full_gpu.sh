#!/usr/bin/env bash
# `dpjax reproduce freegap --full` (10,000 runs per point, the paper's count) on one GPU: on 2 shared CPU
# cores it would take hours (issue 31), so the stored report has freegap at --quick, where 17 of its
# Fig. 1/2 rows are "inconclusive at this size". Run from the repository root on a machine with jax's
# CUDA build; it prints the device, writes benchmarks/reproduction-full/freegap/ (commit it) and
# re-renders benchmarks/REPRODUCTION.md and the summary in benchmarks/README.md from the stored runs.
# It stops after LIMIT seconds (default 540) without writing anything if the run has not finished.
set -euo pipefail
limit=${1:-540}
python -c "import jax; print(jax.devices())"
/usr/bin/time -v timeout "$limit" python -m dpjax.cli reproduce freegap --full \
  --out benchmarks/reproduction-full/freegap --overwrite
python -m dpjax.cli reproduce --from-csv benchmarks/reproduction/reproduction.csv \
  benchmarks/reproduction-full/*/reproduction.csv --markdown benchmarks/REPRODUCTION.md \
  --update-readme benchmarks/README.md
