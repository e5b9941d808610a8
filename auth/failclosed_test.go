package auth

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// traffic sends requests with a bearer token to a server from its own
// goroutine, as a client under load would, and checks each answer against
// the phase of the test it was sent and answered in.
type traffic struct {
	t      *testing.T
	url    string
	tok    string
	client *http.Client
	stop   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	seq     int           // the current phase, counting from 0
	want    int           // status every request of this phase must get; 0: any
	n       int           // requests answered wholly within this phase
	failed  bool          // a request of this phase was reported
	reached chan struct{} // closed once n reaches 3
}

// startTraffic starts sending requests to url with tok until the test ends.
// Every request gets 200 until the first enter.
func startTraffic(t *testing.T, url, tok string) *traffic {
	tr := &traffic{
		t: t, url: url, tok: tok,
		client:  &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second},
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		want:    http.StatusOK,
		reached: make(chan struct{}),
	}
	go tr.run()
	t.Cleanup(func() {
		close(tr.stop)
		<-tr.done
		tr.client.CloseIdleConnections()
	})
	return tr
}

func (tr *traffic) run() {
	defer close(tr.done)
	for {
		select {
		case <-tr.stop:
			return
		default:
		}
		tr.mu.Lock()
		seq, want := tr.seq, tr.want
		tr.mu.Unlock()
		status, err := tr.send()
		tr.mu.Lock()
		// Only a request sent and answered within one phase is held to it:
		// the phase moves on only after the file changed or the change
		// took effect.
		if seq == tr.seq {
			switch {
			case tr.failed:
			case err != nil:
				tr.t.Errorf("request in phase %d: %v", seq, err)
				tr.failed = true
			case want != 0 && status != want:
				tr.t.Errorf("request in phase %d: status %d, want %d", seq, status, want)
				tr.failed = true
			}
			if tr.n++; tr.n == 3 {
				close(tr.reached)
			}
		}
		tr.mu.Unlock()
	}
}

func (tr *traffic) send() (int, error) {
	req, err := http.NewRequest(http.MethodPost, tr.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tr.tok)
	resp, err := tr.client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// enter starts a new phase in which every request must get want (0: any
// status, for a phase in which a change may or may not have taken effect
// yet). For a want other than 0 it returns once three requests got it.
func (tr *traffic) enter(want int) {
	tr.t.Helper()
	tr.mu.Lock()
	tr.seq++
	tr.want, tr.n, tr.failed = want, 0, false
	reached := make(chan struct{})
	tr.reached = reached
	seq := tr.seq
	tr.mu.Unlock()
	if want == 0 {
		return
	}
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		tr.t.Fatalf("phase %d: no requests answered", seq)
	}
}

// linesWith returns the log lines whose message is msg.
func linesWith(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["message"] == msg {
			out = append(out, l)
		}
	}
	return out
}

const notUsableMsg = "JWKS file not usable; no JWT is accepted until it is fixed"

// A JWKS file that is deleted, emptied or made unusable revokes every key
// while requests keep coming: once the reload is done, every JWT gets 401
// (reason no_keys), KeysStatus says so, and the state is logged once as an
// error however many reloads find it again. A usable file restores the
// keys.
func TestWatchFailsClosed(t *testing.T) {
	good := func(t *testing.T) []byte { return jwksJSON(t, jwkEntry{kid: "rsa1", pub: &rsaKey1().PublicKey}) }
	replace := func(content string) func(t *testing.T, dir, name string) {
		return func(t *testing.T, dir, name string) {
			testsupport.ReplaceFile(t, filepath.Join(dir, name), []byte(content))
		}
	}
	inPlace := func(content string) func(t *testing.T, dir, name string) {
		return func(t *testing.T, dir, name string) {
			must(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
		}
	}
	tests := []struct {
		name    string
		layout  func(t *testing.T, dir, name string, data []byte) // nil: a plain file
		breakIt func(t *testing.T, dir, name string)
		// again makes the directory change without leaving the bad state;
		// nil writes another file in it.
		again   func(t *testing.T, dir, name string)
		restore func(t *testing.T, dir, name string, data []byte) // nil: rename a good file over it
		wantErr string
	}{
		{name: "deleted", breakIt: func(t *testing.T, dir, name string) { must(t, os.Remove(filepath.Join(dir, name))) }, wantErr: "no such file"},
		{name: "emptied in place", breakIt: inPlace(""), wantErr: "not a JWKS"},
		{name: "emptied by rename", breakIt: replace(""), wantErr: "not a JWKS"},
		{name: "cut short in place", breakIt: inPlace(`{"keys":[{"kty":"RSA",`), wantErr: "not a JWKS"},
		{name: "corrupted", breakIt: replace("\x00\xff\x13garbage"), wantErr: "not a JWKS"},
		{name: "not a JWKS", breakIt: replace(`{"foo":[]}`), wantErr: `no "keys" array`},
		{name: "no keys", breakIt: replace(`{"keys":[]}`), wantErr: "no key usable"},
		{name: "only unusable keys", breakIt: replace(`{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"},{"kty":"RSA","kid":"r","n":"!!!","e":"AQAB"}]}`),
			wantErr: `no key usable to verify signatures (key 1 (kid "h"): symmetric keys are not accepted; key 2 (kid "r"): malformed`},
		{
			name:    "directory removed",
			breakIt: func(t *testing.T, dir, name string) { must(t, os.RemoveAll(dir)) },
			again:   func(t *testing.T, dir, name string) { must(t, os.Mkdir(dir, 0o755)) },
			wantErr: "no such file",
		},
		{
			name:    "kubernetes ..data swap to a bad file",
			layout:  k8sLayout,
			breakIt: func(t *testing.T, dir, name string) { k8sSwap(t, dir, name, []byte(`{"keys":`)) },
			restore: k8sSwap,
			wantErr: "not a JWKS",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := testUpstream(t, jwkEntry{kid: "rsa1", pub: &rsaKey1().PublicKey})
			dir, name := filepath.Dir(up.JWT.JWKSFile), filepath.Base(up.JWT.JWKSFile)
			if tc.layout != nil {
				dir = filepath.Join(t.TempDir(), "jwks")
				must(t, os.Mkdir(dir, 0o755))
				up.JWT.JWKSFile = filepath.Join(dir, name)
				tc.layout(t, dir, name, good(t))
			}
			a, logs := mustNew(t, up)
			if ok, detail := a.KeysStatus(); !ok || detail != "JWT keys in force: 1" {
				t.Errorf("KeysStatus at start = %v, %q", ok, detail)
			}
			reloads := startWatch(t, a)
			srv := httptest.NewServer(a.Middleware(echo, withIdentity))
			t.Cleanup(srv.Close)
			tr := startTraffic(t, srv.URL+"/mcp", sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil)))

			tr.enter(http.StatusOK)
			tr.enter(0)
			tc.breakIt(t, dir, name)
			r := await(t, reloads, "keys revoked", revoked)
			if !strings.Contains(r.err.Error(), tc.wantErr) {
				t.Errorf("reload error %q; want it to contain %q", r.err, tc.wantErr)
			}
			tr.enter(http.StatusUnauthorized)

			ok, detail := a.KeysStatus()
			if want := "no JWT accepted: jwks_file " + up.JWT.JWKSFile + ": "; ok || !strings.HasPrefix(detail, want) || !strings.Contains(detail, tc.wantErr) {
				t.Errorf("KeysStatus while revoked = %v, %q; want false, %q...%q", ok, detail, want, tc.wantErr)
			}
			// Static tokens are not JWTs: they keep working.
			if id, err := authWith(t, a, bobToken); id != "bob" {
				t.Errorf("static token while the keys are revoked = %q, %v", id, err)
			}
			raw, lines := logs.take(t)
			if bad := linesWith(lines, notUsableMsg); len(bad) != 1 || bad[0]["level"] != "error" ||
				bad[0]["file"] != up.JWT.JWKSFile || !strings.Contains(fmt.Sprint(bad[0]["error"]), tc.wantErr) {
				t.Errorf("log: %s\nwant one error line %q with the file and why", raw, notUsableMsg)
			}
			refused := linesWith(lines, "HTTP request refused: not authenticated")
			if len(refused) == 0 {
				t.Errorf("log: %s\nwant the refused requests logged", raw)
			}
			for _, l := range refused {
				if l["reason"] != "no_keys" || l["level"] != "warn" {
					t.Errorf("refused request logged as %v; want warn, reason no_keys", l)
					break
				}
			}

			// The directory changes again, the file is still bad: no new
			// error line.
			if tc.again != nil {
				tc.again(t, dir, name)
			} else {
				must(t, os.WriteFile(filepath.Join(dir, "unrelated.txt"), []byte("x"), 0o600))
			}
			await(t, reloads, "the same bad state again", func(r reload) bool { return !r.changed && r.err != nil })
			if raw, lines := logs.take(t); len(linesWith(lines, notUsableMsg)) != 0 {
				t.Errorf("log: %s\nthe same bad state was reported again", raw)
			}

			tr.enter(0)
			if tc.restore != nil {
				tc.restore(t, dir, name, good(t))
			} else {
				testsupport.ReplaceFile(t, up.JWT.JWKSFile, good(t))
			}
			await(t, reloads, "keys restored", goodReload)
			tr.enter(http.StatusOK)
			if ok, detail := a.KeysStatus(); !ok || detail != "JWT keys in force: 1" {
				t.Errorf("KeysStatus after the restore = %v, %q", ok, detail)
			}
			raw, lines = logs.take(t)
			if l := linesWith(lines, "JWKS reloaded"); len(l) != 1 || l[0]["restored"] != true || l[0]["level"] != "info" {
				t.Errorf("log: %s\nwant one JWKS reloaded line, restored", raw)
			}
		})
	}
}

// A file with some keys that cannot be used keeps its good keys and says
// which keys it refused and why; a key made malformed stops verifying its
// tokens at once.
func TestWatchPartlyBadJWKS(t *testing.T) {
	up := testUpstream(t,
		jwkEntry{kid: "rsa1", pub: &rsaKey1().PublicKey},
		jwkEntry{kid: "rsa2", pub: &rsaKey2().PublicKey})
	a, logs := mustNew(t, up)
	tok1 := sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil))
	tok2 := sign(t, jwt.SigningMethodRS256, rsaKey2(), "rsa2", claims(map[string]any{"sub": "bob"}))
	if id, err := authWith(t, a, tok2); id != "bob" {
		t.Fatalf("rsa2's token before the edit = %q, %v", id, err)
	}
	reloads := startWatch(t, a)
	srv := httptest.NewServer(a.Middleware(echo, withIdentity))
	t.Cleanup(srv.Close)
	tr := startTraffic(t, srv.URL+"/mcp", tok1)
	tr.enter(http.StatusOK)

	// rsa2's key is made malformed (as an operator revoking it by hand
	// might), and unusable keys of every other kind are added.
	var set struct{ Keys []map[string]any }
	must(t, json.Unmarshal(jwksJSON(t,
		jwkEntry{kid: "rsa1", pub: &rsaKey1().PublicKey},
		jwkEntry{kid: "rsa2", pub: &rsaKey2().PublicKey},
		jwkEntry{kid: "enc", pub: &rsaKey2().PublicKey, use: jwkset.UseEnc},
		jwkEntry{kid: "ec-rs", pub: &ecKey1().PublicKey, alg: jwkset.AlgRS256},
	), &set))
	set.Keys[1]["n"] = "!!!not base64url!!!"
	keys := []any{set.Keys[0], set.Keys[1], set.Keys[2], set.Keys[3],
		map[string]any{"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
		"not an object",
		map[string]any{"kty": "OKP", "crv": "Ed448", "kid": "ed448", "x": "AAAA"},
	}
	data, err := json.Marshal(map[string]any{"keys": keys})
	must(t, err)
	testsupport.ReplaceFile(t, up.JWT.JWKSFile, data)
	await(t, reloads, "the partly bad file", goodReload)
	tr.enter(http.StatusOK) // rsa1's tokens were accepted all along

	if _, err := authWith(t, a, tok2); Reason(err) != "bad_token" || !strings.Contains(err.Error(), "no key with the token's kid") {
		t.Errorf("rsa2's token after its key was made malformed = %v; want bad_token", err)
	}
	if ok, detail := a.KeysStatus(); !ok || detail != "JWT keys in force: 1, refused: 6" {
		t.Errorf("KeysStatus = %v, %q", ok, detail)
	}
	raw, lines := logs.take(t)
	for _, want := range []string{
		`JWKS: refusing key 2 (kid "rsa2"): malformed: `,
		`JWKS: refusing key 3 (kid "enc"): use is "enc", not sig`,
		`JWKS: refusing key 4 (kid "ec-rs"): alg "RS256" is not a signature algorithm for this key`,
		`JWKS: refusing key 5 (kid "hmac"): symmetric keys are not accepted`,
		`JWKS: refusing key 6: not a JWK: `,
		`JWKS: refusing key 7 (kid "ed448"): unsupported key type or curve`,
	} {
		found := false
		for _, l := range lines {
			if m, _ := l["message"].(string); strings.HasPrefix(m, want) && l["level"] == "warn" && l["file"] == up.JWT.JWKSFile {
				found = true
			}
		}
		if !found {
			t.Errorf("log: %s\nwant a warning %q", raw, want)
		}
	}
	if l := linesWith(lines, "JWKS reloaded"); len(l) != 1 || l[0]["keys"] != 1.0 || l[0]["refused"] != 6.0 || l[0]["restored"] != false {
		t.Errorf("log: %s\nwant JWKS reloaded with 1 key, 6 refused", raw)
	}
	if len(linesWith(lines, notUsableMsg)) != 0 {
		t.Errorf("log: %s\na partly bad file was reported as unusable", raw)
	}
}

func TestKeysStatusWithoutJWT(t *testing.T) {
	up := testUpstream(t)
	up.JWT = nil
	a, _ := mustNew(t, up)
	if ok, detail := a.KeysStatus(); !ok || detail != "" {
		t.Errorf("KeysStatus without JWT = %v, %q; want true, \"\"", ok, detail)
	}
}
