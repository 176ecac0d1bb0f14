#!/usr/bin/env bash
# install-test-deps.sh installs what the test-model generator
# (scripts/gen-test-models.py) needs: Debian's python3-onnx and numpy, used
# through /usr/bin/python3 (another python3 on PATH may not see them).
# Skips apt when both import already.
set -euo pipefail
if /usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null; then
	exit 0
fi
sudo=""
[[ "$(id -u)" == 0 ]] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-onnx python3-numpy
