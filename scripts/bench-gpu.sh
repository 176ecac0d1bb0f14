#!/usr/bin/env bash
# bench-gpu.sh is the one prepared run for a machine with an NVIDIA GPU: it
# checks that the machine can serve the ONNX path on CUDA, checks CUDA's
# answers against PyTorch's on the CPU, and measures the GPU table of
# BENCHMARKS.md, printing it as markdown (also to OUT_DIR/bench-gpu.md):
#   1. the CUDA libraries: the folders of a pip-installed PyTorch's nvidia-*
#      wheels that hold CUDA 13 and cuDNN 9, put on LD_LIBRARY_PATH, and
#      what the provider still cannot load (ldd);
#   2. processors/onnx's TestCUDAProvider and TestGPUDeployErrors, when the
#      test binary bin/onnx.test is there (go test -c -o bin/onnx.test
#      ./processors/onnx);
#   3. ResNet-50 and BERT-base (random weights, scripts/gpu-models.py) plus
#      the committed MobileNetV3 and tiny BERT (e2e/testdata/real), each
#      deployed as pytorch_gpu_1.6 with metadata.gpu 1: every case answered
#      over KServe v2 within ATOL + RTOL * max|PyTorch| of PyTorch's CPU
#      float32 outputs (tensor.GPU, tensor/close.go);
#   4. for ResNet-50 and BERT-base (T=SEQ), CLIENTS closed-loop clients of one
#      row each: batching on vs off (same worker_threads), then batched HTTP
#      vs in-process ONNX Runtime on CUDA at the mean batch the batched run
#      formed (eas-server bench --in-process --gpu 1, WORKERS loops at once,
#      their rows/s summed), and the GPU's utilisation and memory
#      (nvidia-smi, every 200 ms) during each HTTP run.
#
# Usage: scripts/bench-gpu.sh [DURATION]   (default 10s per point)
# Env: DEVICE (cuda; cpu runs the same steps on the CPU codes, a dry run of
# the script on a machine without a GPU), PREBUILT=1 (bin/eas-server and
# third_party/ as they are: no Go toolchain needed), PY (python3 with torch,
# torchvision, numpy; transformers for BERT-base, else the tiny BERT is
# measured), CLIENTS (64), MAX_BATCH (32), BATCH_TIMEOUT (ms, 5), WORKERS
# (rpc.worker_threads, 2), SEQ (BERT's sequence length, 128), RTOL (1e-3) and
# ATOL (1e-4) (tensor.GPU's numbers; a tensor test keeps them equal),
# OUT_DIR (default $OUT when set, else bench-gpu-out), PORT (18094).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh

DUR=${1:-10s}
DEVICE=${DEVICE:-cuda}
PY=${PY:-python3}
CLIENTS=${CLIENTS:-64}
MAX_BATCH=${MAX_BATCH:-32}
BATCH_TIMEOUT=${BATCH_TIMEOUT:-5}
WORKERS=${WORKERS:-2}
SEQ=${SEQ:-128}
RTOL=${RTOL:-1e-3}
ATOL=${ATOL:-1e-4}
PORT=${PORT:-18094}
OUT_DIR=${OUT_DIR:-${OUT:-bench-gpu-out}}
mkdir -p "$OUT_DIR"
lib_dir=third_party/onnxruntime/lib
case "$DEVICE" in
cuda) code=pytorch_gpu_1.6; inproc_code=onnx_cu100; gpu=1 ;;
cpu) code=pytorch_cpu_1.6; inproc_code=onnx_cpu; gpu=0 ;;
*) echo "DEVICE must be cuda or cpu, got $DEVICE" >&2; exit 2 ;;
esac
log() { echo "bench-gpu: $*" >&2; }

if [[ -z "${PREBUILT:-}" ]]; then
	make -s deps $([[ $DEVICE == cuda ]] && echo GPU=1) >/dev/null
	go build -trimpath -o bin/eas-server ./cmd/eas-server
	go test -c -o bin/onnx.test ./processors/onnx
fi
[[ -x bin/eas-server ]] || { echo "bin/eas-server missing (build it, or unset PREBUILT)" >&2; exit 1; }

work=$(mktemp -d)
cleanup() {
	[[ -n "${smi_pid:-}" ]] && kill "$smi_pid" 2>/dev/null || true
	[[ -n "${srv_pid:-}" ]] && kill "$srv_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
report="$OUT_DIR/bench-gpu.md"
: >"$report"
say() { echo "$*" | tee -a "$report"; }

# 1. The machine and its CUDA libraries.
say "## GPU machine check ($(date -u '+%Y-%m-%d %H:%M UTC'), DEVICE=$DEVICE)"
say ""
if [[ $DEVICE == cuda ]]; then
	command -v nvidia-smi >/dev/null || { echo "no nvidia-smi: not a GPU machine (DEVICE=cpu for a dry run)" >&2; exit 1; }
	say "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
	for f in libonnxruntime_providers_shared.so libonnxruntime_providers_cuda.so; do
		[[ -f $lib_dir/$f ]] || { echo "$lib_dir/$f missing: make deps GPU=1" >&2; exit 1; }
	done
	site=$($PY -c 'import site; print(site.getsitepackages()[0])')
	dirs=()
	for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcudnn.so.9 libcufft.so.12; do
		found=$(find "$site/nvidia" -name "$lib" 2>/dev/null | head -1 || true)
		if [[ -n $found ]]; then
			say "- $lib: ${found#"$site"/}"
			dirs+=("$(dirname "$found")")
		else
			say "- $lib: **not found** under $site/nvidia"
		fi
	done
	ld=$(printf '%s\n' "${dirs[@]}" | awk '!seen[$0]++' | paste -sd:)
	export LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	missing=$(ldd "$lib_dir/libonnxruntime_providers_cuda.so" | awk '/not found/{print $1}' | paste -sd' ' || true)
	say "- the provider's libraries the loader does not find: ${missing:-none}"
	say "- torch $($PY -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())')"
fi
say ""

# 2. The processor's own GPU tests.
if [[ -x bin/onnx.test ]]; then
	log "processors/onnx GPU tests"
	if (cd processors/onnx && ../../bin/onnx.test -test.run '^(TestCUDAProvider|TestGPUDeployErrors)$' -test.v) >"$OUT_DIR/onnx-gpu-tests.log" 2>&1; then
		say "- processors/onnx TestCUDAProvider, TestGPUDeployErrors: PASS ($(grep -c -- '--- PASS' "$OUT_DIR/onnx-gpu-tests.log") passed, $(grep -c -- '--- SKIP' "$OUT_DIR/onnx-gpu-tests.log") skipped)"
	else
		say "- processors/onnx TestCUDAProvider, TestGPUDeployErrors: **FAIL** (onnx-gpu-tests.log)"
	fi
fi

# 3. The models, and CUDA's answers against PyTorch's.
log "exporting ResNet-50 and BERT-base with random weights"
$PY scripts/gpu-models.py export "$work/models" >"$work/models.txt"
bert=bert_base
if ! grep -q '^bert_base ' "$work/models.txt"; then
	bert=bert_tiny
	SEQ=$((SEQ > 64 ? 64 : SEQ)) # its position table has 64 rows
fi
cp e2e/testdata/real/bert_tiny.onnx e2e/testdata/real/bert_tiny.json \
	e2e/testdata/real/mobilenet_v3_small.onnx e2e/testdata/real/mobilenet_v3_small.json "$work/models/"
svc() { # name model batching
	cat >"$work/$1.json" <<EOF
{"name":"$1","processor":"$code","model_path":"$work/models/$2.onnx","token":"bench",
 "metadata":{"instance":1,"gpu":$gpu,"rpc":{"batching":$3,"max_batch_size":$MAX_BATCH,"max_batch_timeout":$BATCH_TIMEOUT,
 "worker_threads":$WORKERS,"max_queue_size":1024,"keepalive":120000}}}
EOF
	echo "--deploy $work/$1.json"
}
checked=(mobilenet_v3_small bert_tiny resnet50)
[[ $bert == bert_base ]] && checked+=(bert_base)
deploys=$(
	for m in "${checked[@]}"; do svc "chk_$m" "$m" false; done
	svc rn_on resnet50 true
	svc rn_off resnet50 false
	svc bert_on "$bert" true
	svc bert_off "$bert" false
)
# shellcheck disable=SC2086
./bin/eas-server serve --listen 127.0.0.1:$PORT --state-dir "$work/state" --log-level warn $deploys 2>"$OUT_DIR/server.log" &
srv_pid=$!
wait_ready "$PORT" 120 "$OUT_DIR/server.log" "$srv_pid"
say ""
say "| service | cases | worst error / (ATOL + RTOL * max abs of PyTorch CPU) | within ATOL $ATOL + RTOL $RTOL * max |"
say "|---|---|---|---|"
ok=1
for m in "${checked[@]}"; do
	r=$($PY scripts/gpu-models.py check "http://127.0.0.1:$PORT" bench "chk_$m" "$work/models/$m.json" "$RTOL" "$ATOL") || ok=0
	say "${r:-| chk_$m | - | the check failed | **no** |}"
done
say ""

# 4. Batching on vs off, batched HTTP vs in-process, GPU utilisation.
B="./bin/eas-server bench --endpoint http://127.0.0.1:$PORT --token bench -o json -d $DUR --warmup 2s -c $CLIENTS"
tensors() { # BATCH NAME:DTYPE:Bx... -> a --tensor NAME:DTYPE:BATCHx... pair for each
	local n=$1 spec
	shift
	for spec in "$@"; do printf -- '--tensor\n%s\n' "${spec/:Bx/:${n}x}"; done
}
gpu_util() { # runs "$@" while sampling the GPU; prints the mean utilisation % and peak memory MiB
	if [[ $DEVICE != cuda ]]; then "$@" >"$work/run.json"; echo "- -"; return; fi
	nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 >"$work/smi.csv" &
	smi_pid=$!
	"$@" >"$work/run.json"
	kill "$smi_pid" 2>/dev/null || true
	wait "$smi_pid" 2>/dev/null || true
	smi_pid=
	awk -F', *' '{u+=$1; n++; if ($2>m) m=$2} END{if (n) printf "%.0f %d\n", u/n, m; else print "- -"}' "$work/smi.csv"
}
rows=()
for m in rn bert; do
	if [[ $m == rn ]]; then
		model=resnet50; specs=("input:FP32:Bx3x224x224")
	else
		model=$bert; specs=("input_ids:INT64:Bx$SEQ" "attention_mask:INT64:Bx$SEQ")
	fi
	mapfile -t t < <(tensors 1 "${specs[@]}")
	log "$model: batching off, $CLIENTS clients"
	read -r uoff moff < <(gpu_util $B --service "${m}_off" "${t[@]}")
	off=$(cat "$work/run.json")
	log "$model: batching on, $CLIENTS clients"
	read -r s0 c0 < <(batch_stats "$PORT" "${m}_on")
	read -r uon mon < <(gpu_util $B --service "${m}_on" "${t[@]}")
	on=$(cat "$work/run.json")
	read -r s1 c1 < <(batch_stats "$PORT" "${m}_on")
	mb=$($PY -c "print(max(1, round(($s1-$s0)/max(1,$c1-$c0))))")
	log "$model: in-process $inproc_code at batch $mb, $WORKERS loops at once (as the service's workers)"
	mapfile -t tb < <(tensors "$mb" "${specs[@]}")
	pids=()
	for w in $(seq 1 "$WORKERS"); do
		./bin/eas-server bench --in-process "$work/models/$model.onnx" --processor "$inproc_code" --gpu "$gpu" \
			"${tb[@]}" -d "$DUR" --warmup 2s -o json >"$work/inproc.$w.json" &
		pids+=($!)
	done
	wait "${pids[@]}" # not the server
	ip=$($PY -c 'import json,sys; print(sum(json.load(open(f))["rows_per_second"] for f in sys.argv[1:]))' "$work"/inproc.*.json)
	rows+=("$model $(field throughput_rps <<<"$off") $(field p99_ms <<<"$off") $uoff $moff $(field throughput_rps <<<"$on") $(field p99_ms <<<"$on") $uon $mon $mb $ip")
done
$PY - "$CLIENTS" "$MAX_BATCH" "$BATCH_TIMEOUT" "$WORKERS" "$SEQ" "$DUR" "$DEVICE" "${rows[@]}" <<'EOF' | tee -a "$report"
import sys
clients, maxb, timeout, workers, seq, dur, device = sys.argv[1:8]
print(f"{clients} closed-loop clients of one row each, {dur} per point after 2s of warm-up; max_batch_size {maxb}, "
      f"max_batch_timeout {timeout} ms, worker_threads {workers} on both services; BERT T={seq}; device {device}.\n")
print("| model | batching off: rows/s, p99 ms, GPU util %, MiB | batching on: rows/s, p99 ms, GPU util %, MiB | on vs off | in-process ORT at the mean batch | batched HTTP vs in-process |")
print("|---|---|---|---|---|---|")
for r in sys.argv[8:]:
    m, off, p99off, uoff, moff, on, p99on, uon, mon, mb, ip = r.split()
    off, on, ip = float(off), float(on), float(ip)
    mark = "met" if on / ip >= 0.8 else "**missed**"
    print(f"| {m} | {off:.0f}, {float(p99off):.1f}, {uoff}, {moff} | {on:.0f}, {float(p99on):.1f}, {uon}, {mon} | "
          f"**{on/off:.2f}x** | {ip:.0f} rows/s at batch {mb} | **{100*on/ip:.0f}%** (goal >= 80%: {mark}) |")
EOF
[[ $ok == 1 ]] || { log "some answers were outside ATOL $ATOL + RTOL $RTOL * max|PyTorch| of PyTorch's"; exit 1; }
