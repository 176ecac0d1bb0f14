#!/bin/sh
# gen.sh rebuilds the .tar.bz2 fixtures (Go's compress/bzip2 only reads, so
# the tests cannot make them). Run from this directory: sh gen.sh
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/good/sub"
printf 'weights v1\n' >"$tmp/good/model.bin"
printf '{"layers": 2}\n' >"$tmp/good/sub/config.json"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$tmp/good" -cf - model.bin sub | bzip2 -9 >model.tar.bz2
# evil.tar.bz2 holds an entry named ../escaped.txt.
mkdir -p "$tmp/evil/a"
printf 'escaped\n' >"$tmp/evil/escaped.txt"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$tmp/evil/a" -P -cf - ../escaped.txt | bzip2 -9 >evil.tar.bz2
