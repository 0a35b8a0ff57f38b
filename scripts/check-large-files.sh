#!/usr/bin/env bash
# Fails when a file over 1 MiB that is not data is committed (make test runs
# it as `make check-large-files`). It checks the sizes of the files in git's
# index, which is what a commit takes: a built binary such as bin/workq or
# the quickstart example belongs in .gitignore, never in the repository.
#
# Data that has to be committed at that size goes on the allow-list below,
# one path or shell pattern a line, with why it is there.
set -euo pipefail

max_bytes=$((1024 * 1024))

# Committed data files allowed over max_bytes (none so far), e.g.
#   'testdata/big/*.json' # corpus of the X test
allow=(
)

allowed() {
  local p
  for p in "${allow[@]+"${allow[@]}"}"; do
    # shellcheck disable=SC2053 # $p is a pattern
    [[ $1 == $p ]] && return 0
  done
  return 1
}

cd "$(dirname "$0")/.."
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-large-files: not a git work tree, no committed files to check"
  exit 0
fi

# Each index entry as "mode object stage<TAB>path"; gitlinks (submodules,
# mode 160000) have no blob here. cat-file gives each blob's size.
large=()
while read -r size path; do
  if [ "$size" -gt "$max_bytes" ] && ! allowed "$path"; then
    large+=("$path ($size bytes)")
  fi
done < <(git ls-files --stage | awk -F '\t' '{ split($1, f, " "); if (f[1] != "160000") print f[2], $2 }' |
  git cat-file --batch-check='%(objectsize) %(rest)')

if [ ${#large[@]} -gt 0 ]; then
  echo "files over $max_bytes bytes are committed (git rm --cached them and add them to .gitignore," >&2
  echo "or, for data, to the allow-list in scripts/check-large-files.sh):" >&2
  printf '  %s\n' "${large[@]}" >&2
  exit 1
fi
