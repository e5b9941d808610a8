package testsupport

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// HostileLab writes tools (a JSON array) to a file and a config with one
// hostile child, alias "h", that lists it; reader may call everything.
func HostileLab(t testing.TB, muxLines, tools string, env map[string]string) *Lab {
	t.Helper()
	// One line: the child sends the file as it is, and a message that spans
	// lines is no message at all.
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(tools)); err != nil {
		t.Fatalf("tools are not JSON: %v\n%s", err, tools)
	}
	file := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(file, compact.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	e := map[string]string{
		"HOSTILE_TOOLS": file,
		// Race-built, the child would sleep a second on the way out; every
		// test stops a child, some restart one.
		"GORACE": "atexit_sleep_ms=0",
	}
	for k, v := range env {
		e[k] = v
	}
	lab := NewLab(t, muxLines, Server{Alias: "h", Command: HostileBinary(t), Env: e})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	return lab
}

// Memory reads a process's resident set and its peak.
func Memory(t testing.TB, pid int) (rss, peak int64) {
	t.Helper()
	rss, err := RSS(pid)
	if err == nil {
		peak, err = PeakRSS(pid)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rss, peak
}

// RSSLimitMiB scales a bound on mcpmux's memory for a race-built binary.
func RSSLimitMiB(t testing.TB, mib int64) int64 {
	t.Helper()
	if bin, _ := Binaries(t); RaceBuilt(t, bin) {
		return mib * 3
	}
	return mib
}

// RaceBuilt reports whether a binary was built with -race, whose shadow
// memory roughly triples what a process holds.
func RaceBuilt(t testing.TB, path string) bool {
	t.Helper()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
