package dirwatch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// timeout bounds every wait; reloads come within a fraction of it.
const timeout = 5 * time.Second

const (
	goneMsg = "test directory is gone"
	backMsg = "test directory is back"
)

// snapshot is what one reload found in the directory: its files' contents,
// or nil if it could not be read.
type snapshot map[string]string

// watch is Watch running on a directory until the test ends.
type watch struct {
	t       *testing.T
	dir     string
	reloads chan snapshot
	logs    *syncBuffer
}

func opts(logs *syncBuffer) Options {
	return Options{
		Settle:   50 * time.Millisecond,
		MaxDelay: 300 * time.Millisecond,
		Rewatch:  50 * time.Millisecond,
		Log:      zerolog.New(logs),
		ErrorMsg: "watching the test directory",
		GoneMsg:  goneMsg,
		BackMsg:  backMsg,
	}
}

// start runs Watch on dir until the test ends, then checks that it returned
// nil and left no goroutine behind. It waits for the first reload.
func start(t *testing.T, dir string, settle time.Duration) *watch {
	t.Helper()
	goroutines := runtime.NumGoroutine()
	w := &watch{t: t, dir: dir, reloads: make(chan snapshot, 100), logs: new(syncBuffer)}
	o := opts(w.logs)
	if settle != 0 {
		o.Settle = settle
	}
	ready := make(chan struct{})
	o.Watching = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var inReload sync.Mutex // held during reload, to catch overlapping calls
	go func() {
		done <- Watch(ctx, dir, o, func() {
			if !inReload.TryLock() {
				t.Error("reload called while another was running")
				return
			}
			defer inReload.Unlock()
			select {
			case w.reloads <- read(dir):
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Watch = %v", err)
			}
		case <-time.After(timeout):
			t.Fatal("Watch did not return after its context was canceled")
		}
		waitGoroutines(t, goroutines)
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Watch = %v", err)
	case <-time.After(timeout):
		t.Fatal("Watch did not start")
	}
	w.next("the first reload")
	return w
}

func read(dir string) snapshot {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	s := snapshot{}
	for _, e := range ents {
		if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
			s[e.Name()] = string(data)
		}
	}
	return s
}

// next waits for the next reload.
func (w *watch) next(what string) snapshot {
	w.t.Helper()
	select {
	case s := <-w.reloads:
		return s
	case <-time.After(timeout):
		w.t.Fatalf("no reload: %s", what)
		return nil
	}
}

// waitFor waits for a reload whose snapshot satisfies ok.
func (w *watch) waitFor(what string, ok func(snapshot) bool) snapshot {
	w.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case s := <-w.reloads:
			if ok(s) {
				return s
			}
		case <-deadline:
			w.t.Fatalf("no reload: %s", what)
		}
	}
}

func has(name, content string) func(snapshot) bool {
	return func(s snapshot) bool { v, ok := s[name]; return ok && v == content }
}

// waitGoroutines waits until no more than n goroutines are running.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines running; want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // polling: nothing signals a goroutine's exit
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWriteReloadsOnce(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a"), "1")
	// A long settle, so that the burst below is surely one.
	w := start(t, dir, 300*time.Millisecond)

	// A burst of events: create, truncate, write, write.
	write(t, filepath.Join(dir, "b"), "x")
	write(t, filepath.Join(dir, "a"), "2")
	write(t, filepath.Join(dir, "a"), "3")
	if s := w.next("the burst"); s["a"] != "3" || s["b"] != "x" {
		t.Errorf("reload saw %v; want the burst complete", s)
	}
	// A later change: the next reload must be its own. A second reload for
	// the burst would come first and not see it.
	write(t, filepath.Join(dir, "c"), "later")
	if s := w.next("the later change"); s["c"] != "later" {
		t.Errorf("a second reload (%v) for one burst", s)
	}
}

func TestRenameOver(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a"), "old")
	w := start(t, dir, 0)

	write(t, filepath.Join(dir, ".a.tmp"), "new")
	if err := os.Rename(filepath.Join(dir, ".a.tmp"), filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the renamed-over file", has("a", "new"))
}

func TestBusyDirectory(t *testing.T) {
	dir := t.TempDir()
	w := start(t, dir, 0)
	// Events that never let the directory settle put a reload off no
	// longer than MaxDelay.
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		tick := time.NewTicker(10 * time.Millisecond) // faster than Settle
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = os.WriteFile(filepath.Join(dir, ".churn"), []byte("x"), 0o644)
			}
		}
	}()
	defer func() { close(stop); <-churned }()

	write(t, filepath.Join(dir, "a"), "1")
	w.waitFor("a despite the churn", has("a", "1"))
}

func TestDirectoryRemovedAndRecreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "a"), "1")
	w := start(t, dir, 0)

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the directory gone", func(s snapshot) bool { return s == nil })

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "a"), "2")
	w.waitFor("the recreated directory", has("a", "2"))
	// And the new directory is watched.
	write(t, filepath.Join(dir, "b"), "3")
	w.waitFor("a file added to the recreated directory", has("b", "3"))

	logs := w.logs.String()
	if strings.Count(logs, goneMsg) != 1 || strings.Count(logs, backMsg) != 1 {
		t.Errorf("log:\n%s\nwant the directory logged gone once and back once", logs)
	}
}

func TestDirectoryRenamedAndReplaced(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "a"), "1")
	w := start(t, dir, 0)

	next := filepath.Join(base, "next")
	if err := os.Mkdir(next, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(next, "a"), "2")
	if err := os.Rename(dir, filepath.Join(base, "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, dir); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the new directory", has("a", "2"))

	// Changes in the old directory no longer count; in the new one they do.
	write(t, filepath.Join(base, "old", "ghost"), "")
	write(t, filepath.Join(dir, "b"), "3")
	w.waitFor("a file added to the new directory", has("b", "3"))
}

func TestMissingDirectory(t *testing.T) {
	o := opts(new(syncBuffer))
	o.Watching = func() { t.Error("Watching called for a missing directory") }
	err := Watch(context.Background(), filepath.Join(t.TempDir(), "missing"), o, func() {
		t.Error("reload called for a missing directory")
	})
	if err == nil {
		t.Error("Watch on a missing directory succeeded")
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
