#!/usr/bin/env bash
# The version make stamps into the workq binary (cmd/workq/version.go):
# `git describe` when a version is tagged (v1.2.3, v1.2.3-4-gabcdef0,
# with -dirty for uncommitted changes), else v0.0.0-dev+COMMIT (.dirty),
# else v0.0.0-dev outside a git checkout.
set -u
cd "$(dirname "$0")/.."
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo v0.0.0-dev
  exit 0
fi
if v=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
  echo "$v"
  exit 0
fi
v="v0.0.0-dev+$(git rev-parse --short=12 HEAD)"
git diff --quiet HEAD -- 2>/dev/null || v="$v.dirty"
echo "$v"
