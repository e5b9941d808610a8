#!/usr/bin/env bash
# Shows mcpmux doing its main job with config.example.toml: two children with
# a tool of the same name (search), merged under aliases, seen and called as
# the identity "reader". Needs only Go.
set -euo pipefail
cd "$(dirname "$0")"
go build -o .bin/ ./cmd/mcpmux ./internal/labserver
mux=".bin/mcpmux"
cfg="config.example.toml"
# Logs (JSON on stderr) are left out; what the command itself says is kept.
run() {
  echo; printf '$ mcpmux'
  for a in "$@"; do case "$a" in *[\ \"{]*) printf " '%s'" "$a" ;; *) printf ' %s' "$a" ;; esac; done
  echo
  local code=0
  "$mux" "$@" 2> >(grep -v '^{"level"' >&2) || code=$?
  echo "(exit $code)"
}

run validate --config "$cfg"
run tools --config "$cfg" --as reader
run call --config "$cfg" --as reader docs__search '{"query":"public"}'
run call --config "$cfg" --as reader tickets__search '{"query":"public"}'
run call --config "$cfg" --as reader tickets__search '{"query":"private"}'
run call --config "$cfg" --as reader docs__search '{"query":3}'
run call --config "$cfg" --as reader tickets__append_note '{"text":"hi"}'
run call --config "$cfg" --as reader nope__search '{"query":"public"}'
echo
echo "To serve it to an MCP client over stdio: $mux serve --config $cfg"
