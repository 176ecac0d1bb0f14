#!/usr/bin/env bash
# install-test-deps.sh installs what the test-model generator
# (scripts/gen-test-models.py) needs: Debian's python3-onnx and numpy, used
# through /usr/bin/python3 (another python3 on PATH may not see them).
# scripts/gen-tree-models.py needs python3-xgboost (1.7.4) and python3-sklearn.
# engines/torchscript/testdata/gen_models.py needs python3-torch (1.13, pulls libtorch)
# and python3-torchvision (0.14: ResNet-18, MobileNetV3; pulls python3-pil).
# The custom processor tests (processors/custom) compile C with gcc and run
# python processors on python3 with the venv module (python3-venv). The
# JetStream queue backend's tests run Debian's nats-server. The Caffe tests
# compare with OpenCV's DNN module (python3-opencv, through /usr/bin/python3).
# The console's browser tests drive Debian's chromium (headless). The README
# test (e2e) runs the README's shell examples, which call curl.
# Skips apt when all of them are there already.
#
# Then scripts/build-k8s-tools.sh: the Kubernetes control plane, kwok and helm
# that the tests of internal/kube and deploy run against (built once per
# machine, about 20 minutes on 2 cores; instant afterwards).
set -euo pipefail
if ! /usr/bin/python3 -c 'import onnx, numpy, xgboost, sklearn, torch, torchvision, PIL, ensurepip, venv, cv2' 2>/dev/null ||
	! command -v gcc >/dev/null || ! { command -v nats-server || test -x /usr/sbin/nats-server; } >/dev/null ||
	! command -v chromium >/dev/null || ! command -v curl >/dev/null; then
	sudo=""
	[[ "$(id -u)" == 0 ]] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-onnx python3-numpy python3-venv gcc nats-server python3-opencv chromium curl
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-xgboost python3-sklearn
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-torch python3-torchvision python3-pil
fi
bash "$(dirname "$0")/build-k8s-tools.sh" >/dev/null
