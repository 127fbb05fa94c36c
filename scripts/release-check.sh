#!/usr/bin/env bash
# release-check.sh - prove that a release's tags install, as a user would
# fetch them, without touching this repository's tags.
#
# Usage: scripts/release-check.sh [VERSION]        (default v0.1.0)
#
# On a throwaway clone of HEAD it runs scripts/release.sh VERSION, then:
#   1. fetches every module at VERSION the way a module proxy does, from
#      the clone's tags (git, with github.com/kafkasink/kafkasink pointed
#      at the clone), into a scratch module cache, whose cache/download
#      directory is a GOPROXY file tree;
#   2. with only that file:// proxy for this project's modules (the others
#      from the usual proxy), in an empty module cache and outside any
#      workspace:
#      go install github.com/kafkasink/kafkasink/cmd/kafkasink@VERSION,
#      whose `kafkasink version` must print VERSION; and go get of each
#      module at VERSION in a new module, which must build a program
#      importing the library and each of its library modules.
# It needs git and the go command (and the Go module proxy for the
# dependencies); it prints "release-check: ok" or exits non-zero.
set -euo pipefail

version="${1:-v0.1.0}"
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
root=github.com/kafkasink/kafkasink
work="$(mktemp -d)"
# The module cache's files are read-only; -modcacherw lets rm remove them.
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOFLAGS=-modcacherw GOWORK=off GOTOOLCHAIN=local
unset GOPATH GOBIN

# Without the repository's tags: once a release is tagged there, the
# clone would carry it, and release.sh rightly refuses a tag that exists.
git clone -q --no-tags "$repo" "$work/clone"
git -C "$work/clone" checkout -q "$(git -C "$repo" rev-parse HEAD)"
# A clean CI machine has no git identity, which annotated tags need.
git -C "$work/clone" config user.name release-check
git -C "$work/clone" config user.email release-check@localhost
(cd "$work/clone" && git checkout -q -b release-check && scripts/release.sh "$version")
mapfile -t modules < <(git -C "$work/clone" tag --points-at HEAD | sed -n "s#^\(.*\)/$version\$#\1#p" | sort)
echo "release-check: tags of $version on the clone: $version ${modules[*]/%//$version}"
if (cd "$work/clone" && scripts/release.sh "$version" >/dev/null 2>&1); then
  echo "release-check: release.sh $version ran twice: it must refuse tags that exist" >&2
  exit 1
fi

# 1. The proxy: go mod download straight from the clone's tags (GOPRIVATE:
# no proxy, no checksum database for them), as proxy.golang.org would.
cat >"$work/gitconfig" <<EOF
[url "file://$work/clone"]
	insteadOf = https://$root
EOF
fetch() {
  GIT_CONFIG_GLOBAL="$work/gitconfig" GIT_ALLOW_PROTOCOL=file:https \
    GOPRIVATE="$root" GOMODCACHE="$work/fetch" GOPATH="$work/gopath" \
    go mod download -json "$@" >/dev/null
}
(cd "$work" && fetch "$root@$version")
for m in "${modules[@]}"; do
  (cd "$work" && fetch "$root/$m@$version")
done
proxy="$work/fetch/cache/download"

# 2. A user's machine: the file:// proxy first for this project, the usual
# one for the rest; no checksum database knows these modules.
user_env=(GOMODCACHE="$work/mod" GOPATH="$work/gopath" GOBIN="$work/bin"
  GOPROXY="file://$proxy,$(go env GOPROXY)" GONOSUMDB="$root" GOPRIVATE=)
(cd "$work" && env "${user_env[@]}" go install "$root/cmd/kafkasink@$version")
line="$("$work/bin/kafkasink" version)"
case "$line" in
  "kafkasink $version, "*) echo "release-check: go install ...@$version: $line" ;;
  *) echo "release-check: kafkasink version printed '$line', want kafkasink $version" >&2; exit 1 ;;
esac

mkdir "$work/user"
cd "$work/user"
env "${user_env[@]}" go mod init example.com/user >/dev/null 2>&1
gets=("$root@$version")
for m in "${modules[@]}"; do gets+=("$root/$m@$version"); done
env "${user_env[@]}" go get "${gets[@]}" 2>&1 | grep -v '^go: \(downloading\|added\) ' || true
for dep in "$root" "${modules[@]/#/$root/}"; do
  got=$(env "${user_env[@]}" go list -m -f '{{.Version}}' "$dep" 2>/dev/null || true)
  if [ "$got" != "$version" ]; then
    echo "release-check: after go get, the user's module has $dep at '$got', want $version" >&2
    exit 1
  fi
done
# A program that imports the library and its library modules must build.
cat >main.go <<EOF
package main

import (
	_ "$root"
	_ "$root/kafkasinkavro"
	_ "$root/kafkasinkotel"
	_ "$root/kafkasinkprom"
	_ "$root/pgcdc"
)

func main() {}
EOF
env "${user_env[@]}" go mod tidy 2>&1 | grep -v '^go: \(downloading\|finding\|found\) ' || true
env "${user_env[@]}" go build -o /dev/null .
echo "release-check: go get of $root and ${#modules[@]} nested modules at $version, and a build importing them: ok"
echo "release-check: ok"
