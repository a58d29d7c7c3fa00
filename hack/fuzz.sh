#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (default 30s), one after
# the other. `make test` already runs each target's seeds and its committed corpus
# (testdata/fuzz); this searches for new inputs. A failing input is written to the
# package's testdata/fuzz/<Target>/: commit it with the fix, so it runs in every test.
# FUZZ=pattern picks targets by name.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${FUZZTIME:-30s}
pattern=${FUZZ:-.}
found=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' | grep -E -- "$pattern" || true); do
    found=$((found + 1))
    echo "fuzz: $pkg $target for $time"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" "$pkg"
  done
done
if [[ $found == 0 ]]; then
  echo "fuzz: no target matches $pattern" >&2
  exit 1
fi
echo "fuzz: $found targets, none failed"
