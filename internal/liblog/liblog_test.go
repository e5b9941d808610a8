package liblog

import (
	"bytes"
	"encoding/json"
	stdlog "log"
	"log/slog"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// lines decodes each JSON line zerolog wrote into buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestSlogKeepsLevelsAndAttributes(t *testing.T) {
	var buf bytes.Buffer
	log := Slog(zerolog.New(&buf))
	log.Debug("d")
	log.Warn("w", "peer", "docs")
	log.Error("e")
	got := lines(t, &buf)
	want := []struct{ level, msg string }{{"debug", "d"}, {"warn", "w"}, {"error", "e"}}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i]["level"] != w.level || got[i]["message"] != w.msg {
			t.Errorf("line %d = %v, want level %s message %s", i, got[i], w.level, w.msg)
		}
	}
	if got[1]["peer"] != "docs" {
		t.Errorf("the attribute is lost: %v", got[1])
	}
}

func TestStdLogsEveryLineAtItsLevel(t *testing.T) {
	var buf bytes.Buffer
	Std(zerolog.New(&buf), slog.LevelWarn).Print("http: TLS handshake error")
	got := lines(t, &buf)
	if len(got) != 1 || got[0]["level"] != "warn" || !strings.Contains(got[0]["message"].(string), "TLS handshake error") {
		t.Fatalf("got %v, want one warn line with the message", got)
	}
}

func TestRouteDefaultsTakesBothDefaultLoggers(t *testing.T) {
	oldSlog, oldOut, oldFlags, oldPrefix := slog.Default(), stdlog.Writer(), stdlog.Flags(), stdlog.Prefix()
	t.Cleanup(func() {
		slog.SetDefault(oldSlog)
		stdlog.SetOutput(oldOut)
		stdlog.SetFlags(oldFlags)
		stdlog.SetPrefix(oldPrefix)
	})
	var buf bytes.Buffer
	RouteDefaults(zerolog.New(&buf))
	slog.Info("from slog")
	stdlog.Print("from log")
	got := lines(t, &buf)
	if len(got) != 2 {
		t.Fatalf("got %d lines, want 2: %v", len(got), got)
	}
	if got[0]["level"] != "info" || got[0]["message"] != "from slog" {
		t.Errorf("slog.Default's line = %v", got[0])
	}
	if got[1]["level"] != "error" || got[1]["message"] != "from log" {
		t.Errorf("the standard logger's line = %v, want it at error, without a prefix or time", got[1])
	}
}
