package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// reload is one reload attempt reported by Watch's test hook.
type reload struct {
	changed bool
	err     error
}

// startWatch runs a.Watch until the test ends (see runWatch) and waits
// until it watches. It returns the reload attempts.
func startWatch(t *testing.T, a *Authenticator) <-chan reload {
	t.Helper()
	ctx := t.Context()
	reloads := make(chan reload, 16)
	ready := make(chan struct{})
	a.testHookWatching = func() { close(ready) }
	a.testHookReload = func(changed bool, err error) {
		select {
		case reloads <- reload{changed, err}:
		case <-ctx.Done():
		}
	}
	returned := runWatch(t, a, nil)
	select {
	case <-ready:
	case <-returned:
		t.Fatal("Watch returned before it watched")
	case <-time.After(ts.Wait):
		t.Fatal("Watch did not start")
	}
	return reloads
}

// runWatch runs a.Watch until the test ends: then it checks that Watch
// returned nil once its context was canceled, calls after (if not nil),
// and checks that no goroutine is left that was not running before. The
// channel returned is closed when Watch returns.
func runWatch(t *testing.T, a *Authenticator, after func()) <-chan struct{} {
	t.Helper()
	goroutines := runtime.NumGoroutine()
	returned := make(chan struct{})
	var err error
	go func() {
		defer close(returned)
		err = a.Watch(t.Context())
	}()
	t.Cleanup(func() {
		select {
		case <-returned:
			if err != nil {
				t.Errorf("Watch = %v", err)
			}
		case <-time.After(ts.Wait):
			t.Fatal("Watch did not return after its context was canceled")
		}
		if after != nil {
			after()
		}
		waitGoroutines(t, goroutines)
	})
	return returned
}

// waitGoroutines waits until no more than n goroutines are running.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(ts.Wait)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines running; want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // polling: nothing signals a goroutine's exit
	}
}

// await waits for the next value from ch that ok accepts.
func await[T any](t *testing.T, ch <-chan T, what string, ok func(T) bool) T {
	t.Helper()
	timeout := time.After(ts.Wait)
	for {
		select {
		case v := <-ch:
			if ok(v) {
				return v
			}
		case <-timeout:
			t.Fatalf("waiting for %s: not seen within %s", what, ts.Wait)
		}
	}
}

// goodReload is a reload that put a usable file's keys in force.
func goodReload(r reload) bool { return r.changed && r.err == nil }

// revoked is a reload that revoked every key.
func revoked(r reload) bool { return r.changed && r.err != nil }

func authWith(t *testing.T, a *Authenticator, tok string) (string, error) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return a.Authenticate(r)
}

// k8sLayout sets dir up as Kubernetes mounts a ConfigMap or Secret: the
// file is a symlink through the ..data symlink to a timestamped directory.
func k8sLayout(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	ts := filepath.Join(dir, "..2024_01_01_00_00_00.000000001")
	must(t, os.Mkdir(ts, 0o755))
	must(t, os.WriteFile(filepath.Join(ts, name), data, 0o600))
	must(t, os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")))
	must(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
}

// k8sSwap updates a k8sLayout as the kubelet does: a new timestamped
// directory, a ..data_tmp symlink to it renamed over ..data, the old
// directory removed.
func k8sSwap(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	old, err := os.Readlink(filepath.Join(dir, "..data"))
	must(t, err)
	ts, err := os.MkdirTemp(dir, "..2024_01_01_00_00_01.")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(ts, name), data, 0o600))
	must(t, os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(t, os.RemoveAll(filepath.Join(dir, old)))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWatchKeyRotation(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir, name string, data []byte) // lays the first JWKS out
		replace func(t *testing.T, dir, name string, data []byte)
	}{
		{"rename over", nil, func(t *testing.T, dir, name string, data []byte) {
			testsupport.ReplaceFile(t, filepath.Join(dir, name), data)
		}},
		{"write in place", nil, func(t *testing.T, dir, name string, data []byte) {
			must(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
		}},
		{"remove and recreate", nil, func(t *testing.T, dir, name string, data []byte) {
			must(t, os.Remove(filepath.Join(dir, name)))
			must(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
		}},
		{"kubernetes ..data swap", k8sLayout, k8sSwap},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := testUpstream(t, jwkEntry{kid: "rsa1", pub: &rsaKey1().PublicKey})
			dir, name := filepath.Dir(up.JWT.JWKSFile), filepath.Base(up.JWT.JWKSFile)
			if tc.setup != nil {
				dir = t.TempDir()
				up.JWT.JWKSFile = filepath.Join(dir, name)
				tc.setup(t, dir, name, jwksJSON(t, jwkEntry{kid: "rsa1", pub: &rsaKey1().PublicKey}))
			}
			a, logs := mustNew(t, up)
			oldTok := sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil))
			newTok := sign(t, jwt.SigningMethodRS256, rsaKey2(), "rsa2", claims(map[string]any{"sub": "bob"}))
			if id, err := authWith(t, a, oldTok); id != "alice" {
				t.Fatalf("before rotation: old key's token = %q, %v", id, err)
			}
			if _, err := authWith(t, a, newTok); Reason(err) != "bad_token" {
				t.Fatalf("before rotation: new key's token = %v; want bad_token", err)
			}
			reloads := startWatch(t, a)

			// Requests keep coming while the keys change.
			stop := make(chan struct{})
			var clients sync.WaitGroup
			for range 2 {
				clients.Go(func() {
					for i := 0; i < 10000; i++ {
						select {
						case <-stop:
							return
						default:
						}
						_, _ = authWith(t, a, oldTok)
					}
				})
			}

			tc.replace(t, dir, name, jwksJSON(t, jwkEntry{kid: "rsa2", pub: &rsaKey2().PublicKey}))
			await(t, reloads, "new keys", goodReload)
			close(stop)
			clients.Wait()

			if id, err := authWith(t, a, newTok); id != "bob" {
				t.Errorf("after rotation: new key's token = %q, %v; want bob", id, err)
			}
			if _, err := authWith(t, a, oldTok); Reason(err) != "bad_token" {
				t.Errorf("after rotation: removed key's token = %v; want bad_token", err)
			}
			if raw, _ := logs.take(t); !strings.Contains(raw, "JWKS reloaded") {
				t.Errorf("log: %s; want the reload logged", raw)
			}
		})
	}
}

func TestWatchWithoutJWT(t *testing.T) {
	up := testUpstream(t)
	up.JWT = nil
	a, _ := mustNew(t, up)
	done := make(chan error, 1)
	go func() { done <- a.Watch(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch without JWT did not return at once")
	}
}

func TestWatchTwice(t *testing.T) {
	a, _ := mustNew(t, testUpstream(t))
	startWatch(t, a)
	if err := a.Watch(context.Background()); err == nil {
		t.Error("a second Watch started")
	}
}
