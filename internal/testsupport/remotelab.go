package testsupport

import (
	"strings"
	"testing"
)

// RemoteTransports are the two ways to reach a remote child.
var RemoteTransports = []string{"streamable", "sse"}

// RemoteLab starts a remote labserver "docs" over transport and writes a
// config with it, after the given stdio labservers. extra is raw TOML for
// the docs table.
func RemoteLab(t testing.TB, transport, extra string, stdio ...Server) (*Lab, *Remote) {
	t.Helper()
	return RemoteLabMux(t, `call_timeout = "30s"`, transport, extra, stdio...)
}

// RemoteLabMux is RemoteLab with the given [mux] lines.
func RemoteLabMux(t testing.TB, muxLines, transport, extra string, stdio ...Server) (*Lab, *Remote) {
	t.Helper()
	lab := NewLab(t, muxLines, stdio...)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	r := StartRemote(t, lab, "docs", transport)
	lab.AddRemote(t, RemoteServer{
		Alias: "docs", URL: r.URL(), Transport: transport, ReadOnly: RemoteReadOnly, Extra: extra,
	})
	return lab, r
}

// HasPrefix reports whether any of names starts with prefix.
func HasPrefix(names []string, prefix string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// WentAway lists the log lines saying docs's session was lost.
func WentAway(m *Mux) []map[string]any {
	return m.Log.Lines(Msg("server went away; restarting", "server", "docs"))
}

// RemoteReadOnly names the labserver tools that are safe to re-run.
var RemoteReadOnly = []string{"search", "slow", "whoami", "echo", "extra"}
