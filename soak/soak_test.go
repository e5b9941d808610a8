package soak

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

var (
	duration = flag.Duration("soak.duration", 20*time.Second, "how long each transport's soak keeps up its load")
	seedFlag = flag.Uint64("soak.seed", 0, "the random seed of the run (0: from the clock); every run prints its seed")
)

func TestMain(m *testing.M) { ts.Main(m) }

func seed() uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	return uint64(time.Now().UnixNano())
}

// Over stdio: two mcpmux processes sharing one policy directory, reader's
// (whose grant never changes) and writer's (whose grant alternates), each
// with its own half of the children and one MCP client that all of its
// callers share.
func TestSoakStdio(t *testing.T) {
	muxes := []struct {
		identity string
		callers  int
	}{{"reader", 10}, {"writer", 6}}
	s := newSoak(t, "stdio", len(muxes))
	s.lab.AddUpstream(t, `admin_listen = "127.0.0.1:0"`)
	for _, who := range muxes {
		m := ts.StartMux(t, s.lab, "--identity", who.identity)
		addr := m.Log.WaitLine(t, "the admin address", ts.Msg("serving HTTP"))["addr"]
		tg := &target{name: "stdio-" + who.identity, pid: m.Cmd.Process.Pid, log: m.Log,
			admin: fmt.Sprintf("http://%s", addr), stop: m.Stop, lister: m.Client}
		s.targets = append(s.targets, tg)
		for i := range who.callers {
			s.callers = append(s.callers, &caller{name: fmt.Sprintf("%s-%d", who.identity, i), identity: who.identity, client: m.Client})
		}
	}
	s.run(*duration)
}

// Over the HTTP upstream: one mcpmux with all the children, three identities by bearer token
// (reader may call everything, writer's grant alternates, auditor may call
// only read-only tools), each caller on a session of its own, half of them
// on protocol 2025-11-25 and half on the client's choice.
func TestSoakHTTP(t *testing.T) {
	s := newSoak(t, "http", 1)
	upstream := "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n"
	tokens := map[string]string{}
	for _, id := range []string{"reader", "writer", "auditor"} {
		tokens[id] = "soak-token-" + id
		d := sha256.Sum256([]byte(tokens[id]))
		upstream += fmt.Sprintf("\n[[upstream.tokens]]\nidentity = %q\nsha256 = %q\n", id, hex.EncodeToString(d[:]))
	}
	s.lab.AddUpstream(t, upstream)
	h := ts.StartHTTPMux(t, s.lab, ts.HTTPStart{Listeners: 2})
	tg := &target{name: "http", pid: h.Cmd.Process.Pid, log: h.Log, admin: h.Base(1), stop: h.Stop}
	s.targets = append(s.targets, tg)
	for _, who := range []struct {
		identity string
		callers  int
	}{{"reader", 8}, {"writer", 6}, {"auditor", 4}} {
		for i := range who.callers {
			o := ts.HTTPClient{Token: tokens[who.identity], Log: h.Log}
			if i%2 == 0 {
				o.Version = mcp.LATEST_LEGACY_PROTOCOL_VERSION
			}
			conn := ts.ConnectHTTP(t, h.URL(), o)
			if tg.lister == nil {
				tg.lister = conn.Client
			}
			s.callers = append(s.callers, &caller{name: fmt.Sprintf("%s-%d", who.identity, i), identity: who.identity,
				client: conn.Client, close: conn.Client.Close})
		}
	}
	s.run(*duration)
}
