# genlib.sh is sourced by the code generators (gen-proto.sh,
# gen-flatbuffers.sh): their one argument and their one way of getting a
# Debian-packaged generator.

# gen_check_flag ARG: prints true for --check, false for none; anything else
# is a usage error.
gen_check_flag() {
	case "${1:-}" in
	"") echo false ;;
	--check) echo true ;;
	*) echo "usage: $0 [--check]" >&2; exit 2 ;;
	esac
}

# gen_need COMMAND PACKAGE: installs Debian's PACKAGE (sudo unless root)
# when COMMAND is not on PATH.
gen_need() {
	command -v "$1" >/dev/null 2>&1 && return
	local sudo=""
	[[ "$(id -u)" == 0 ]] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$2"
}
