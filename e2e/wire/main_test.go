// Package wire records, byte for byte, what a client sees of the real
// mcpmux binary, and compares it with the transcripts in testdata: the
// proof that a rewrite of mcpmux's upstream edge changes nothing a client
// sees, or exactly what its reviewed transcripts say it changes.
//
// Each script (scripts_*_test.go) speaks raw JSON-RPC, over stdio (lines on
// a pipe to `mcpmux serve`) and over streamable HTTP (net/http requests
// with exact bodies), as a client of protocol 2025-11-25 (a session opened
// by initialize) and of 2026-07-28 (every request carrying its _meta), as
// each script says. It is sequential: each step sends one message and reads
// until its answer, recording every message mcpmux writes in between, in
// order, and the answers it makes to mcpmux's own requests. Over stdio the
// end of a script closes stdin and reads stdout to its end, so that nothing
// mcpmux writes goes unrecorded. What is legitimately variable (session,
// task and requestState ids, times, temporary paths) is replaced by
// numbered placeholders; nothing else (normalize_test.go).
//
// The transcripts are testdata/<script>.<transport>-<era>.txt:
//
//	go test ./e2e/wire                 compare, printing a unified diff
//	go test ./e2e/wire -update         record them anew
//	go test ./e2e/wire -run 'TestWire/calls_plain/'   one script
package wire

import (
	"flag"
	"os"
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

var update = flag.Bool("update", false, "record the transcripts in testdata anew instead of comparing")

func TestMain(m *testing.M) {
	// Under -race every binary the tests start (mcpmux, its supervisor, the
	// children, which inherit it: see server) would sleep a second as it
	// exits, so that reports of races found at the last moment get out;
	// each script starts and stops several. A race found while they run is
	// still reported at once.
	if os.Getenv("GORACE") == "" {
		_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	testsupport.Main(m)
}
