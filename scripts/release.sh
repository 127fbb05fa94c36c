#!/usr/bin/env bash
# release.sh - tag a release of every module of the repository on HEAD.
#
# Usage: scripts/release.sh VERSION        (such as v0.1.0)
#
# It tags HEAD with VERSION (the root module, github.com/kafkasink/kafkasink)
# and with DIR/VERSION for each nested module the workspace (go.work) uses
# (cmd/kafkasink/v0.1.0, kafkasinkavro/v0.1.0, ...): the go command finds a
# nested module's versions by those prefixed tags. The nested modules must
# require their siblings at VERSION, with no replace directive, so that
# `go install github.com/kafkasink/kafkasink/cmd/kafkasink@VERSION` and
# `go get` of each module resolve to this same commit; when they require
# another version, it first moves the requirements and go.work's
# replacements to VERSION and commits that ("release VERSION").
#
# It refuses a dirty tree, a VERSION that is not vMAJOR.MINOR.PATCH (with
# an optional -pre-release), and a tag that exists. It pushes nothing:
# it prints the git push line. scripts/release-check.sh proves the tags
# work, on a throwaway clone.
set -euo pipefail

version="${1:-}"
if ! [[ "$version" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release.sh: want a version such as v0.1.0 (vMAJOR.MINOR.PATCH), got '$version'" >&2
  exit 2
fi
if [[ "$version" != v0.* && "$version" != v1.* ]]; then
  echo "release.sh: $version needs a /${version%%.*} module path suffix (Go's major version rule); only v0 and v1 are supported" >&2
  exit 2
fi
cd "$(git rev-parse --show-toplevel)"
if [ -n "$(git status --porcelain)" ]; then
  echo "release.sh: the working tree has changes: commit or stash them first" >&2
  exit 1
fi

root=github.com/kafkasink/kafkasink
# The nested modules: go.work's use lines other than the root.
mapfile -t modules < <(GOWORK="$PWD/go.work" go work edit -json | sed -n 's/^[[:space:]]*"DiskPath": "\.\/\(.*\)"$/\1/p')
if [ "${#modules[@]}" -eq 0 ]; then
  echo "release.sh: go.work names no nested module" >&2
  exit 1
fi
tags=("$version")
for m in "${modules[@]}"; do tags+=("$m/$version"); done
for tag in "${tags[@]}"; do
  if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
    echo "release.sh: tag $tag exists already (on $(git rev-list -n1 "$tag"))" >&2
    exit 1
  fi
done

# Move every requirement of a sibling module to VERSION, and go.work's
# replacements (which point those versions at the source here) with it.
moved=false
for m in "${modules[@]}"; do
  while read -r dep have; do
    [ "$have" = "$version" ] && continue
    (cd "$m" && GOWORK=off go mod edit -require="$dep@$version")
    go work edit -dropreplace="$dep@$have" -replace="$dep@$version=.${dep#"$root"}"
    moved=true
  done < <(cd "$m" && GOWORK=off go mod edit -print | awk -v root="$root" '
    $1 == "require" { $1 = "" ; $0 = substr($0, 2) }
    ($1 == root || index($1, root "/") == 1) && NF >= 2 { print $1, $2 }')
done
if $moved; then
  git commit -q -am "release $version: the nested modules require their siblings at $version"
  echo "committed: $(git log --oneline -1)"
fi

for tag in "${tags[@]}"; do
  git tag -a "$tag" -m "kafkasink $version" HEAD
done
echo "tagged $(git rev-parse --short HEAD): ${tags[*]}"
echo "publish with: git push origin ${tags[*]}"
