package seal_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/seal"
)

func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, seal.KeySize)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func ring(t *testing.T, lines ...string) *seal.Ring {
	t.Helper()
	k, err := seal.ParseKeys([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return seal.NewRing(k)
}

func TestOpenWhatWasSealed(t *testing.T) {
	r := ring(t, newKey(t))
	for _, c := range []struct{ owner, local string }{
		{"10.0.0.5:7310", "mcp-session-ABC"},
		{"", ""},
		{"mcpmux-0.peers:7310", strings.Repeat("x", 300)},
		{"host:1", "with\x00nul and ünïcode"},
	} {
		id := r.Seal("session", c.owner, c.local)
		if strings.ContainsAny(id, "+/=") {
			t.Errorf("id %q is not URL-safe", id)
		}
		owner, local, err := r.Open("session", id)
		if err != nil || owner != c.owner || local != c.local {
			t.Errorf("Open(Seal(%q, %q)) = %q, %q, %v", c.owner, c.local, owner, local, err)
		}
	}
	if a, b := r.Seal("session", "o", "l"), r.Seal("session", "o", "l"); a == b {
		t.Error("two seals of the same id are equal: the nonce is not fresh")
	}
}

func TestOpenRefuses(t *testing.T) {
	r := ring(t, newKey(t))
	other := ring(t, newKey(t))
	id := r.Seal("session", "10.0.0.5:7310", "mcp-session-ABC")
	raw, _ := base64.RawURLEncoding.DecodeString(id)
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	cases := []struct {
		name, purpose, id string
	}{
		{"empty", "session", ""},
		{"not base64", "session", "mcp-session-" + id},
		{"truncated by one byte", "session", base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1])},
		{"truncated to the head", "session", base64.RawURLEncoding.EncodeToString(raw[:5])},
		{"version changed", "session", flip(0)},
		{"key id changed", "session", flip(2)},
		{"nonce changed", "session", flip(8)},
		{"ciphertext changed", "session", flip(len(raw) - 20)},
		{"tag changed", "session", flip(len(raw) - 1)},
		{"another purpose", "state", id},
		{"sealed under a foreign key", "session", other.Seal("session", "10.0.0.5:7310", "mcp-session-ABC")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			owner, local, err := r.Open(c.purpose, c.id)
			if !errors.Is(err, seal.ErrOpen) {
				t.Fatalf("Open = %q, %q, %v; want ErrOpen", owner, local, err)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	oldKey, newKey1, newKey2 := newKey(t), newKey(t), newKey(t)
	r := ring(t, oldKey)
	before := r.Seal("state", "a:1", "round-1")
	// Rotated: the new key seals, the old one still opens.
	k, err := seal.ParseKeys([]byte("# rotated\n" + newKey1 + "\n\n" + oldKey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	r.Set(k)
	after := r.Seal("state", "a:1", "round-2")
	for _, id := range []string{before, after} {
		if _, _, err := r.Open("state", id); err != nil {
			t.Errorf("Open after rotation: %v", err)
		}
	}
	onlyNew := ring(t, newKey1)
	if _, _, err := onlyNew.Open("state", after); err != nil {
		t.Errorf("an id sealed after rotation was not sealed with the new current key: %v", err)
	}
	if _, _, err := onlyNew.Open("state", before); !errors.Is(err, seal.ErrOpen) {
		t.Errorf("the old key still opens after it left the ring: %v", err)
	}
	// Rotated again: the first key is gone, so are its ids.
	k, _ = seal.ParseKeys([]byte(newKey2 + "\n" + newKey1))
	r.Set(k)
	if _, _, err := r.Open("state", before); !errors.Is(err, seal.ErrOpen) {
		t.Errorf("an id of a key that left the ring opened: %v", err)
	}
	if _, _, err := r.Open("state", after); err != nil {
		t.Errorf("an id of the previous key did not open: %v", err)
	}
}

func TestMAC(t *testing.T) {
	a, b := newKey(t), newKey(t)
	old := ring(t, a)
	rotated := ring(t, b, a)
	msg := []byte("POST /mcp 1700000000 nonce")
	if !rotated.CheckMAC(msg, old.MAC(msg)) {
		t.Error("a replica that rotated refuses one that has not yet")
	}
	if !old.CheckMAC(msg, old.MAC(msg)) {
		t.Error("a MAC does not check")
	}
	if old.CheckMAC(msg, rotated.MAC(msg)) {
		t.Error("a MAC of a key the ring does not hold checks")
	}
	if old.CheckMAC([]byte("POST /mcp 1700000001 nonce"), old.MAC(msg)) {
		t.Error("a MAC checks for another message")
	}
}

func TestParseKeysRefuses(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	k := newKey(t)
	for name, text := range map[string]string{
		"empty":            "",
		"only comments":    "# nothing\n\n",
		"not base64":       "not a key!",
		"too short":        short,
		"three keys":       k + "\n" + newKey(t) + "\n" + newKey(t),
		"the same twice":   k + "\n" + k,
		"a bad second one": k + "\n" + short,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := seal.ParseKeys([]byte(text)); !errors.Is(err, seal.ErrKeyFile) {
				t.Fatalf("ParseKeys = %v; want ErrKeyFile", err)
			}
		})
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b := make([]byte, seal.KeySize)
		b[0] = 0xfb // '+' or '-' and '/' or '_' appear
		if _, err := seal.ParseKeys([]byte(enc.EncodeToString(b))); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// TestWatchRotates swaps a real key file the way Kubernetes updates a
// Secret mount (a ..data symlink swap) and sees the ring follow; a bad
// file leaves the keys in force.
func TestWatchRotates(t *testing.T) {
	dir := t.TempDir()
	first, second := newKey(t), newKey(t)
	swap := func(gen, text string) {
		t.Helper()
		d := filepath.Join(dir, gen)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "key"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(gen, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	swap("..g1", first)
	if err := os.Symlink("..data/key", filepath.Join(dir, "key")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "key")
	k, err := seal.ReadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	r := seal.NewRing(k)
	before := r.Seal("session", "o:1", "x")

	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := r.Watch(ctx, path, zerolog.New(&logs), func() { close(watched) }); err != nil {
			t.Error(err)
		}
	})
	defer func() { cancel(); wg.Wait() }()
	<-watched

	swap("..g2", second+"\n"+first+"\n")
	onlySecond := ring(t, second)
	waitFor(t, "the rotated key in force", func() bool {
		_, _, err := onlySecond.Open("session", r.Seal("session", "o:1", "y"))
		return err == nil
	})
	if _, _, err := r.Open("session", before); err != nil {
		t.Errorf("an id of the previous key no longer opens: %v", err)
	}
	fp := r.Fingerprints()
	swap("..g3", "garbage")
	waitFor(t, "the bad file refused", func() bool { return strings.Contains(logs.String(), "not usable") })
	if got := r.Fingerprints(); len(got) != 2 || got[0] != fp[0] || got[1] != fp[1] {
		t.Errorf("a bad key file changed the keys in force: %v, was %v", got, fp)
	}
	if _, _, err := r.Open("session", before); err != nil {
		t.Errorf("after a bad key file, an id of the previous key no longer opens: %v", err)
	}
	third := newKey(t)
	swap("..g4", third+"\n"+second)
	onlyThird := ring(t, third)
	waitFor(t, "the third key in force", func() bool {
		_, _, err := onlyThird.Open("session", r.Seal("session", "o:1", "z"))
		return err == nil
	})
	if len(fp) != 2 {
		t.Errorf("fingerprints %v: want current and previous", fp)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockedBuffer is a log written by the watcher and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
