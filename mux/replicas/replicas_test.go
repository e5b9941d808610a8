package replicas

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/seal"
)

func node(t *testing.T, keys ...string) *Node {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(strings.Join(keys, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := New(config.Replicas{Enabled: true, KeyFile: path, Listen: "127.0.0.1:7310", Advertise: "127.0.0.1:7310",
		Peers: []string{"127.0.0.1:7310", "127.0.0.1:7311"}, DialTimeout: time.Second},
		config.Limits{MaxBodyBytes: 1 << 20, MaxMessageBytes: 1 << 20, ReadTimeout: time.Second}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRequestState(t *testing.T) {
	for _, c := range []struct {
		body, want string
		ok         bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":"abc-_9"}}`, "abc-_9", true},
		{`{"params":{"requestState":"abc"},"method":"tools/call"}`, "abc", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"requestState":"nested"}}}`, "", false},
		{`{"requestState":"not in params"}`, "", false},
		{`{"params":{"requestState":1}}`, "", false},
		{`{"params":{"requestState":"a\u0062"}}`, "", false},
		{`{"params":{"requestState":"abc"`, "", false},
		{`[{"params":{"requestState":"abc"}}]`, "", false},
	} {
		got, ok := requestState([]byte(c.body))
		if got != c.want || ok != c.ok {
			t.Errorf("requestState(%s) = %q, %v; want %q, %v", c.body, got, ok, c.want, c.ok)
		}
	}
}

func signed(t *testing.T, n *Node, sid, auth string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://owner/mcp?x=1", nil)
	r.Header.Set("Mcp-Session-Id", sid)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	n.sign(r)
	return r
}

func TestPeerProof(t *testing.T) {
	k1, k2 := testsupport.NewReplicaKey(), testsupport.NewReplicaKey()
	a, b := node(t, k1), node(t, k1)
	if err := b.checkPeer(signed(t, a, "s1", "Bearer x")); err != nil {
		t.Errorf("a replica's request refused: %v", err)
	}
	// Rotation: a replica that has the new key hears one that does not yet.
	rotated := node(t, k2, k1)
	if err := rotated.checkPeer(signed(t, a, "s1", "")); err != nil {
		t.Errorf("a request signed with the previous key refused: %v", err)
	}
	if err := a.checkPeer(signed(t, node(t, k2), "s1", "")); !errors.Is(err, ErrBadProof) {
		t.Errorf("a request signed with a foreign key: %v", err)
	}
	changed := map[string]func(r *http.Request){
		"another session":   func(r *http.Request) { r.Header.Set("Mcp-Session-Id", "s2") },
		"other credentials": func(r *http.Request) { r.Header.Set("Authorization", "Bearer y") },
		"another method":    func(r *http.Request) { r.Method = http.MethodDelete },
		"another path":      func(r *http.Request) { r.URL.Path = "/other" },
		// The MAC's first character, which carries six bits of it (its last
		// carries fewer, and 1 run in 1,024 changed nothing).
		"a changed MAC": func(r *http.Request) {
			f := strings.Fields(r.Header.Get(PeerHeader))
			c := byte('A')
			if f[3][0] == c {
				c = 'B'
			}
			f[3] = string(c) + f[3][1:]
			r.Header.Set(PeerHeader, strings.Join(f, " "))
		},
		// A 32-byte MAC is 43 characters whose last two bits are padding: a
		// strict decoder refuses them set, so one MAC has one spelling.
		"padding bits set": func(r *http.Request) {
			const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			f := strings.Fields(r.Header.Get(PeerHeader))
			last := strings.IndexByte(alphabet, f[3][len(f[3])-1])
			f[3] = f[3][:len(f[3])-1] + string(alphabet[last|1])
			r.Header.Set(PeerHeader, strings.Join(f, " "))
		},
		"a malformed header":  func(r *http.Request) { r.Header.Set(PeerHeader, "v1 x") },
		"another version tag": func(r *http.Request) { r.Header.Set(PeerHeader, "v2"+r.Header.Get(PeerHeader)[2:]) },
	}
	for name, change := range changed {
		r := signed(t, a, "s1", "Bearer x")
		change(r)
		if err := b.checkPeer(r); !errors.Is(err, ErrBadProof) {
			t.Errorf("%s: %v, want ErrBadProof", name, err)
		}
	}
	if err := b.checkPeer(httptest.NewRequest(http.MethodPost, "/mcp", nil)); !errors.Is(err, ErrNoProof) {
		t.Errorf("no header: %v", err)
	}
	// A proof signed long ago: made by hand with a's key.
	r := httptest.NewRequest(http.MethodPost, "http://owner/mcp", nil)
	ts := strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
	r.Header.Set(PeerHeader, "v1 "+ts+" n "+encode(a.ring.MAC(proofMessage(ts, "n", r))))
	if err := b.checkPeer(r); !errors.Is(err, ErrStale) {
		t.Errorf("a minute-old proof: %v, want ErrStale", err)
	}
}

// Public forwards only what another replica among the peers owns.
func TestOwnerOf(t *testing.T) {
	k := testsupport.NewReplicaKey()
	n := node(t, k)
	other := seal.NewRing(mustKeys(t, k))
	for _, c := range []struct {
		name, sid, want string
	}{
		{"own", "mcp-session-" + n.SealSessionID("x"), "127.0.0.1:7310"},
		{"a peer's", "mcp-session-" + other.Seal(purposeSession, "127.0.0.1:7311", "x"), "127.0.0.1:7311"},
		{"a requestState as a session id", "mcp-session-" + n.SealRequestState("x"), ""},
		{"unsealed, as one replica hands out", "mcp-session-ABCDEF", ""},
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
		r.Header.Set("Mcp-Session-Id", c.sid)
		owner, _, ok := n.ownerOf(httptest.NewRecorder(), r)
		if owner != c.want || !ok {
			t.Errorf("%s: owner %q, %v; want %q", c.name, owner, ok, c.want)
		}
	}
	if !n.peers.has(context.Background(), "127.0.0.1:7311") || n.peers.has(context.Background(), "10.9.9.9:7311") {
		t.Error("the static peers are not the configured list")
	}
}

func TestDNSPeers(t *testing.T) {
	p := dnsPeers("localhost", "7310", time.Second)
	if !p.has(context.Background(), "127.0.0.1:7310") {
		t.Errorf("localhost's address is not a peer after a miss's look-up: %v", *p.set.Load())
	}
	if p.has(context.Background(), "127.0.0.1:7311") {
		t.Error("another port is a peer")
	}
}

func mustKeys(t *testing.T, lines ...string) *seal.Keys {
	t.Helper()
	k, err := seal.ParseKeys([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
