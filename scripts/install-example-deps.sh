#!/usr/bin/env bash
# install-example-deps.sh installs the Debian packages make run's generative
# examples need to be exported (scripts/gen-llm-models.py in the llm venv,
# which sees them through --system-site-packages on /usr/bin/python3):
# python3-torch, python3-numpy, python3-onnx, and python3-venv to make the
# venv. Skips apt when they are all there (scripts/install-test-deps.sh
# installs them too, for the tests).
set -euo pipefail
if ! /usr/bin/python3 -c 'import torch, numpy, onnx, ensurepip, venv' 2>/dev/null; then
	sudo=""
	[[ "$(id -u)" == 0 ]] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-torch python3-numpy python3-onnx python3-venv
fi
