#!/usr/bin/env bash
# python-venv.sh NAME... creates (or brings up to date) one Python virtual
# environment per NAME from the pinned scripts/requirements/NAME.txt, for the
# acceptance tests that drive the server with the official Python clients.
# Each lives outside the repository, in ${EAS_PYVENV_DIR:-~/.cache/eas-server/pyvenv}/NAME,
# and records the sha256 of the requirements it was made from in
# .requirements.sha256: a changed requirements file makes it anew, an
# unchanged one costs nothing. internal/pyvenv finds them the same way.
# Separate environments because the clients pin conflicting versions
# (eas-prediction wants protobuf<=3.20.3, tritonclient[grpc] protobuf>=6.30).
# Nothing is installed into a system Python; the interpreter is python3 on
# PATH (or $EAS_VENV_PYTHON), which needs the venv module. A requirements
# file whose first line is "# python-venv.sh: --no-deps" is installed with
# pip's --no-deps: it lists every package itself, overriding a client's own
# pins (graphpipe.txt says why). Header lines "# python-venv.sh:
# --system-site-packages" and "# python-venv.sh: --python PATH" make the
# venv see the interpreter's packages and name the interpreter
# (batch-inference-torch.txt: Debian's python3-torch on /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")"
root="${EAS_PYVENV_DIR:-$HOME/.cache/eas-server/pyvenv}"
python="${EAS_VENV_PYTHON:-python3}"
[[ $# -gt 0 ]] || { echo "usage: $0 NAME... (names of scripts/requirements/*.txt)" >&2; exit 2; }
for name in "$@"; do
	req="requirements/$name.txt"
	[[ -f "$req" ]] || { echo "python-venv.sh: no $req" >&2; exit 2; }
	# "# python-venv.sh: --then NAME2" installs requirements/NAME2.txt into
	# the same venv afterwards, with NAME2's own --no-deps,
	# --no-build-isolation and "--env KEY=VALUE" header lines: a package
	# that must be built from source in a way a requirements line cannot
	# say (easycv-check's mmcv without its compiled ops).
	then="$(sed -n 's/^# python-venv.sh: --then //p' "$req" | head -n1)"
	[[ -z "$then" || -f "requirements/$then.txt" ]] || { echo "python-venv.sh: $req names --then $then, but there is no requirements/$then.txt" >&2; exit 2; }
	sum="$(cat "$req" ${then:+"requirements/$then.txt"} | sha256sum | cut -d' ' -f1)"
	dir="$root/$name"
	if [[ -x "$dir/bin/python" && "$(cat "$dir/.requirements.sha256" 2>/dev/null)" == "$sum" ]]; then
		continue
	fi
	echo "python-venv.sh: making $dir from scripts/$req"
	rm -rf "$dir"
	mkdir -p "$root"
	# Header lines may also ask for --system-site-packages (the
	# interpreter's own packages stay visible: Debian's python3-torch) and
	# name the interpreter: "# python-venv.sh: --python /usr/bin/python3".
	py="$python"
	venvopts=()
	grep -qx "# python-venv.sh: --system-site-packages" "$req" && venvopts=(--system-site-packages)
	named="$(sed -n 's/^# python-venv.sh: --python //p' "$req" | head -n1)"
	[[ -n "$named" ]] && py="$named"
	"$py" -m venv "${venvopts[@]}" "$dir"
	nodeps=()
	grep -qx "# python-venv.sh: --no-deps" "$req" && nodeps=(--no-deps)
	"$dir/bin/python" -m pip install -q --disable-pip-version-check --no-input "${nodeps[@]}" -r "$req"
	if [[ -n "$then" ]]; then
		treq="requirements/$then.txt"
		topts=()
		grep -qx "# python-venv.sh: --no-deps" "$treq" && topts+=(--no-deps)
		grep -qx "# python-venv.sh: --no-build-isolation" "$treq" && topts+=(--no-build-isolation)
		envs=()
		while IFS= read -r kv; do envs+=("$kv"); done < <(sed -n 's/^# python-venv.sh: --env //p' "$treq")
		env "${envs[@]}" "$dir/bin/python" -m pip install -q --disable-pip-version-check --no-input "${topts[@]}" -r "$treq"
	fi
	echo "$sum" >"$dir/.requirements.sha256"
done
