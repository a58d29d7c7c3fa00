#!/usr/bin/env bash
# Fails when git tracks a file larger than the limit (1 MiB by default): built binaries,
# captures and test output belong outside the repository. Files that are not there
# (deleted in the work tree) are skipped; they are not in the next commit either.
set -euo pipefail
limit=${TRACKED_SIZE_LIMIT:-1048576}
cd "$(dirname "$0")/.."
big=()
while IFS= read -r -d '' f; do
  [[ -f "$f" ]] || continue
  size=$(stat -c %s -- "$f")
  (( size > limit )) && big+=("$f ($size bytes)")
done < <(git ls-files -z)
if (( ${#big[@]} > 0 )); then
  echo "tracked files over $limit bytes (build them, or keep them outside git):" >&2
  printf '  %s\n' "${big[@]}" >&2
  exit 1
fi
