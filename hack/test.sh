#!/usr/bin/env bash
# `make test`: every check and test, each part timed; the times are printed at the end,
# whether the run passed or not, with the slowest Go test packages. Environment:
# KIND_SUITE=0 leaves the kind suite out; GO_PACKAGES (./...) picks the Go packages.
set -uo pipefail
cd "$(dirname "$0")/.."
times=()
status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# part NAME CMD...: runs CMD, records its time, and stops the run at the first failure.
part() {
	local name=$1 t0=$SECONDS rc=0
	shift
	"$@" || rc=$?
	times+=("$(printf '%-22s %5ds%s' "$name" $((SECONDS - t0)) "$([ $rc = 0 ] || echo "  FAILED (exit $rc)")")")
	[ $rc = 0 ] || { status=$rc; report; exit $rc; }
}

report() {
	echo
	echo "make test: time of each part (total $((SECONDS))s)"
	printf '  %s\n' "${times[@]}"
	if [ -s "$log" ]; then
		echo "slowest Go test packages:"
		grep -E '^(ok|FAIL)[[:space:]]' "$log" | awk '{print $3, $1, $2}' | sed 's/s / /' |
			sort -rn | head -8 | awk '{printf "  %-45s %6.0fs %s\n", $3, $1, $2}'
	fi
}

mk() { make --no-print-directory "$@"; }
part setup mk setup
part tracked-sizes mk verify-tracked-sizes
part generated mk verify-generated
part fmt mk fmt-check
part vet mk vet
part test-binaries mk test-binaries
part helm mk helm
part rendered mk verify-rendered
assets=$(hack/setup-test-binaries.sh) helm=$(hack/setup-helm.sh)
part "go test" env KUBEBUILDER_ASSETS="$assets" HELM="$helm" \
	bash -o pipefail -c "go test -count=1 -race -timeout 40m ${GO_PACKAGES:-./...} 2>&1 | tee '$log'"
part oracle mk test-oracle
if [ "${KIND_SUITE:-1}" = 0 ]; then
	echo "make test: KIND_SUITE=0, so the kind suite (make test-kind) did not run"
else
	part "kind suite" hack/kind/test.sh
fi
report
exit $status
