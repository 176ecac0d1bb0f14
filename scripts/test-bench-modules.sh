#!/usr/bin/env bash
# test-bench-modules.sh runs the correctness tests of the nested benchmark
# modules, which `go test ./...` at the root does not reach (each has its own
# go.mod):
#   engines/trees/bench  TestBenchModelExact: the deep XGBoost model (200 trees of
#                depth 10) predicts bit for bit what XGBoost predicted.
#   engines/pmml/bench   TestSameAnswers: our PMML evaluator and goscore agree.
# Only the tests run (-run), never the benchmarks.
#
# The engines/trees/bench model is not committed (tens of megabytes): it is written
# by scripts/gen-tree-models.py --bench into $TREES_BENCH_DIR (default
# /tmp/treesbench, where the test looks) unless all its files are there.
# That needs Debian's python3-xgboost and python3-sklearn
# (scripts/install-test-deps.sh installs them).
#
# A skipped test counts as a failure here: the point is that they run.
set -euo pipefail

GO="${GO:-go}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

die() { echo "test-bench-modules: $*" >&2; exit 1; }

bench_dir="${TREES_BENCH_DIR:-/tmp/treesbench}"
export TREES_BENCH_DIR="$bench_dir"
have_model() {
	local f
	for f in bench.json bench.bin bench_rows.tsv bench_pred.txt; do
		[[ -s "$bench_dir/$f" ]] || return 1
	done
}
if ! have_model; then
	/usr/bin/python3 -c 'import xgboost, sklearn' 2>/dev/null || bash scripts/install-test-deps.sh
	echo "test-bench-modules: writing the engines/trees/bench model into $bench_dir"
	tmp="$bench_dir.tmp.$$"
	rm -rf "$tmp"
	/usr/bin/python3 scripts/gen-tree-models.py --bench "$tmp"
	rm -rf "$bench_dir"
	mkdir -p "$(dirname "$bench_dir")"
	mv "$tmp" "$bench_dir"
	have_model || die "scripts/gen-tree-models.py --bench did not write the model into $bench_dir"
fi

# run MODULE TESTS: go test -v in the module, failing when a test skipped
# or none matched.
run() {
	local mod="$1" tests="$2" out
	echo "test-bench-modules: $mod: $tests"
	out="$(cd "$mod" && "$GO" test -count=1 -v -run "$tests" . 2>&1)" || { echo "$out"; die "$mod failed"; }
	grep -E '^(--- |ok|PASS|FAIL)|^ +[a-z_]+_test\.go:' <<<"$out" || true
	# Here-strings, not pipes: with pipefail, grep -q leaving early makes
	# the echo before it fail with SIGPIPE.
	if grep -q -- '--- SKIP' <<<"$out"; then
		echo "$out"
		die "$mod: a test skipped"
	fi
	grep -q -- '--- PASS' <<<"$out" || { echo "$out"; die "$mod: no test ran"; }
}
run engines/trees/bench '^TestBenchModelExact$'
run engines/pmml/bench '^TestSameAnswers$'
