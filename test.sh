#!/usr/bin/env bash
# Runs every test of mcpmux: formatting, vet, the Go tests with the race
# detector (unit, end-to-end over the real binary), and the interop test with
# the official TypeScript SDK and reference server (needs Node 20+ and npm).
set -euo pipefail
cd "$(dirname "$0")"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './interop/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 10m ./...

echo "== interop (TypeScript SDK client, server-everything child)"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node and npm are needed for the interop test (Node 20 or later)"; exit 1
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" ./cmd/mcpmux ./internal/labserver
(cd interop && npm ci --no-audit --no-fund --loglevel=error && MCPMUX_BIN="$bin/mcpmux" LABSERVER_BIN="$bin/labserver" npm test)
