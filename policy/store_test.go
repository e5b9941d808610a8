package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// timeout bounds every wait in these tests. Changes take effect well within
// a second; this is only the point at which a test gives up.
const timeout = 5 * time.Second

// change is one call of Watch's onChange.
type change struct{ old, new *Set }

// watched is a Store with Watch running on a directory, stopped (and
// checked for leaked goroutines) when the test ends.
type watched struct {
	t       *testing.T
	dir     string
	store   *Store
	changes chan change
	reloads chan error // every reload's outcome, from OnReload
	// watching gets a value each time Watch starts watching a directory:
	// once at its start, once after each Move.
	watching chan struct{}
	logs     *syncBuffer
}

// startWatch creates a Store on dir and runs Watch until the test ends.
func startWatch(t *testing.T, dir string) *watched {
	t.Helper()
	goroutines := runtime.NumGoroutine()
	logs := new(syncBuffer)
	s, err := NewStore(dir, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	w := &watched{t: t, dir: dir, store: s, changes: make(chan change, 100), reloads: make(chan error, 100),
		watching: make(chan struct{}, 100), logs: logs}
	s.OnReload(func(err error) {
		select {
		case w.reloads <- err:
		default:
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	var once sync.Once
	s.testHookWatching = func() {
		once.Do(func() { close(ready) })
		w.watching <- struct{}{}
	}
	go func() {
		done <- s.Watch(ctx, func(old, new *Set) {
			select {
			case w.changes <- change{old, new}:
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
	return w
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

// waitWatching waits for Watch to start watching a directory.
func (w *watched) waitWatching() {
	w.t.Helper()
	select {
	case <-w.watching:
	case <-time.After(timeout):
		w.t.Fatal("Watch did not watch the directory")
	}
}

// waitFor waits until the current set satisfies cond, and returns it.
func (w *watched) waitFor(what string, cond func(*Set) bool) *Set {
	w.t.Helper()
	deadline := time.After(timeout)
	for {
		// The store publishes a set before calling onChange, so a set
		// published after this check is always followed by a change.
		if cur := w.store.Current(); cond(cur) {
			return cur
		}
		select {
		case <-w.changes:
		case <-deadline:
			w.t.Fatalf("timed out waiting for %s; LastError = %v", what, w.store.LastError())
		}
	}
}

// nextChange waits for the next call of onChange.
func (w *watched) nextChange() change {
	w.t.Helper()
	select {
	case c := <-w.changes:
		return c
	case <-time.After(timeout):
		w.t.Fatal("timed out waiting for a change")
		return change{}
	}
}

func (w *watched) path(name string) string { return filepath.Join(w.dir, name) }

// replaceFile replaces a file atomically, so that no reload can see it
// half-written, by renaming a temporary dotfile over it.
func replaceFile(t testing.TB, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	writeFile(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// allows returns a condition that identity may call tool.
func allows(identity, name string) func(*Set) bool {
	return func(s *Set) bool { return s.For(identity).Allows(tool(name, false)) }
}

// policyDir returns a new directory holding the given files.
func policyDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), data)
	}
	return dir
}

func TestWatchWriteInPlace(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["docs__*"]`}))
	start := time.Now()
	writeFile(t, w.path("reader.toml"), `allow = ["wiki__*"]`)
	s := w.waitFor("the new policy", allows("reader", "wiki__page"))
	t.Logf("took effect after %v", time.Since(start))
	if s.For("reader").Allows(tool("docs__search", false)) {
		t.Error("the old rule is still in force")
	}
}

func TestWatchRenameOver(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["docs__*"]`}))
	// How editors and config management save: write a temporary file in
	// the same directory, then rename it over the old one.
	tmp := w.path(".reader.toml.tmp")
	writeFile(t, tmp, `allow = ["wiki__*"]`)
	if err := os.Rename(tmp, w.path("reader.toml")); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the new policy", allows("reader", "wiki__page"))
}

func TestWatchDelete(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["docs__*"]`}))
	if err := os.Remove(w.path("reader.toml")); err != nil {
		t.Fatal(err)
	}
	w.waitFor("reader to lose its policy", func(s *Set) bool { return s.For("reader") == nil })
}

func TestWatchAdd(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["docs__*"]`}))
	writeFile(t, w.path("writer.toml"), `allow = ["tickets__*"]`)
	s := w.waitFor("writer's policy", allows("writer", "tickets__create"))
	if !s.For("reader").Allows(tool("docs__search", false)) {
		t.Error("reader's policy was lost")
	}
}

func TestWatchEmptyFile(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["docs__*"]`}))
	writeFile(t, w.path("reader.toml"), "")
	s := w.waitFor("the empty policy", func(s *Set) bool { return !s.For("reader").Allows(tool("docs__search", false)) })
	if s.For("reader") == nil {
		t.Error("an empty file is a policy that grants nothing, not no policy")
	}
	if err := w.store.LastError(); err != nil {
		t.Errorf("LastError = %v; an empty file is valid", err)
	}
}

func TestWatchBrokenKeepsLastGood(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{
		"reader.toml": `allow = ["docs__*"]`,
		"other.toml":  `allow = ["a__*"]`,
	}))
	good := w.store.Current().For("reader")

	// Written atomically: written in place, the file would pass through
	// empty, a valid policy, and a reload that caught it there would make
	// that the last good policy.
	replaceFile(t, w.path("reader.toml"), "allow = [\"wiki__*\"]\nalow = [\"*\"]\n")
	// Something must change for a reload to be observable; the reload
	// that brings other's change has also read the broken file.
	replaceFile(t, w.path("other.toml"), `allow = ["b__*"]`)
	s := w.waitFor("other's change", allows("other", "b__x"))

	if s.For("reader") != good {
		t.Errorf("reader's policy = %v; want the last good one, %v", s.For("reader"), good)
	}
	wantErr := w.path("reader.toml") + `:2: unknown key "alow"`
	if err := w.store.LastError(); err == nil || err.Error() != wantErr {
		t.Errorf("LastError = %v; want %s", err, wantErr)
	}
	w.logs.wantError(t, w.path("reader.toml"), 2, wantErr)

	writeFile(t, w.path("reader.toml"), `allow = ["wiki__*"]`)
	w.waitFor("the fixed policy", allows("reader", "wiki__page"))
	if err := w.store.LastError(); err != nil {
		t.Errorf("LastError after the fix = %v; want nil", err)
	}
}

func TestWatchBrokenFromTheStart(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{
		"reader.toml": "\n\ndeny = [\"\"]\n",
	}))
	if p := w.store.Current().For("reader"); p != nil {
		t.Errorf("For(reader) = %v; a file broken from the start grants no access", p)
	}
	wantErr := w.path("reader.toml") + ":3: empty pattern in deny"
	if err := w.store.LastError(); err == nil || err.Error() != wantErr {
		t.Errorf("LastError = %v; want %s", err, wantErr)
	}
	w.logs.wantError(t, w.path("reader.toml"), 3, wantErr)

	writeFile(t, w.path("reader.toml"), `allow = ["docs__*"]`)
	w.waitFor("the fixed policy", allows("reader", "docs__search"))
}

func TestWatchBrokenAfterDeleteHasNoLastGood(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["docs__*"]`}))
	if err := os.Remove(w.path("reader.toml")); err != nil {
		t.Fatal(err)
	}
	w.waitFor("reader to lose its policy", func(s *Set) bool { return s.For("reader") == nil })
	replaceFile(t, w.path("reader.toml"), `allow = "docs__*"`)
	writeFile(t, w.path("other.toml"), "")
	s := w.waitFor("other's policy", func(s *Set) bool { return s.For("other") != nil })
	if p := s.For("reader"); p != nil {
		t.Errorf("For(reader) = %v; a deleted policy is not a last good one", p)
	}
}

func TestWatchGenerationAndOnChange(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{
		"reader.toml": `allow = ["docs__*"]`,
		"other.toml":  `allow = ["a__*"]`,
	}))
	first := w.store.Current()
	if first.Generation() != 1 {
		t.Fatalf("initial Generation = %d; want 1", first.Generation())
	}

	// Same rules, different file: not a change.
	replaceFile(t, w.path("reader.toml"), "# reformatted\nallow = [\n  \"docs__*\",\n]\n")
	replaceFile(t, w.path("other.toml"), `allow = ["b__*"]`)
	c := w.nextChange()
	if c.old != first || c.new != w.store.Current() {
		t.Errorf("onChange(%p, %p); want (%p, current %p)", c.old, c.new, first, w.store.Current())
	}
	if got := Changed(c.old, c.new); len(got) != 1 || got[0] != "other" {
		t.Errorf("Changed = %q; want [other]", got)
	}
	if c.new.Generation() != 2 {
		t.Errorf("Generation = %d; want 2", c.new.Generation())
	}
	if c.new.For("reader") != first.For("reader") {
		t.Error("reader's unchanged policy was replaced")
	}

	// Had anything been published in between, this would not be the very
	// next change, or its generation would be higher.
	replaceFile(t, w.path("other.toml"), `allow = ["c__*"]`)
	c2 := w.nextChange()
	if c2.old != c.new || c2.new.Generation() != 3 || !c2.new.For("other").Allows(tool("c__x", false)) {
		t.Errorf("second change: old %p (want %p), generation %d (want 3), other = %v",
			c2.old, c.new, c2.new.Generation(), c2.new.For("other"))
	}
}

// An edit that changes only which servers' resources an identity may read
// is a change: it is published and reported for that identity alone.
func TestWatchResourcesOnlyEdit(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{
		"reader.toml": "allow = [\"docs__*\"]\nallow_resources = [\"docs\"]\n",
		"other.toml":  `allow = ["a__*"]`,
	}))
	first := w.store.Current()
	ticketsResources := func(s *Set) bool {
		return s.For("reader").Allows(Item{Kind: Resource, Server: "tickets"})
	}
	if ticketsResources(first) {
		t.Fatal("reader may read tickets' resources before the edit")
	}
	replaceFile(t, w.path("reader.toml"), "allow = [\"docs__*\"]\nallow_resources = [\"docs\", \"tick*\"]\n")
	c := w.nextChange()
	if !ticketsResources(c.new) {
		t.Fatalf("the change did not bring the new allow_resources: reader = %v", c.new.For("reader"))
	}
	if got := Changed(c.old, c.new); !slices.Equal(got, []string{"reader"}) {
		t.Errorf("Changed = %q; want [reader]", got)
	}
	if c.new.For("other") != first.For("other") {
		t.Error("other's unchanged policy was replaced")
	}
}

func TestWatchKubernetesConfigMap(t *testing.T) {
	// The layout kubelet writes for a ConfigMap volume.
	dir := t.TempDir()
	mkdir(t, filepath.Join(dir, "..2026_01"))
	writeFile(t, filepath.Join(dir, "..2026_01", "reader.toml"), `allow = ["docs__*"]`)
	symlink(t, "..2026_01", filepath.Join(dir, "..data"))
	symlink(t, "..data/reader.toml", filepath.Join(dir, "reader.toml"))

	w := startWatch(t, dir)
	if !w.store.Current().For("reader").Allows(tool("docs__search", false)) {
		t.Fatal("initial policy not read through the symlinks")
	}

	// An update: a new timestamped directory, a ..data_tmp symlink to it
	// renamed over ..data, and the old directory removed. This one also
	// adds a key, whose visible symlink kubelet creates.
	swap := func(old, new string, files map[string]string) {
		mkdir(t, filepath.Join(dir, new))
		for name, data := range files {
			writeFile(t, filepath.Join(dir, new, name), data)
		}
		for name := range files {
			if _, err := os.Lstat(filepath.Join(dir, name)); os.IsNotExist(err) {
				symlink(t, "..data/"+name, filepath.Join(dir, name))
			}
		}
		symlink(t, new, filepath.Join(dir, "..data_tmp"))
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
	swap("..2026_01", "..2026_02", map[string]string{
		"reader.toml": `allow = ["wiki__*"]`,
		"writer.toml": `allow = ["tickets__*"]`,
	})
	s := w.waitFor("the new ConfigMap", func(s *Set) bool {
		return s.For("reader").Allows(tool("wiki__page", false)) && s.For("writer").Allows(tool("tickets__x", false))
	})
	if s.For("reader").Allows(tool("docs__search", false)) {
		t.Error("the old rule is still in force")
	}

	// A second update, which changes only the symlinked content.
	swap("..2026_02", "..2026_03", map[string]string{
		"reader.toml": `allow = ["docs__*"]`,
		"writer.toml": `allow = ["tickets__*"]`,
	})
	w.waitFor("the second ConfigMap", allows("reader", "docs__search"))
}

func TestWatchBusyDirectory(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["docs__*"]`}))
	// Events that never let the directory settle must not put a reload
	// off indefinitely.
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		tick := time.NewTicker(10 * time.Millisecond) // faster than settleDelay
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				os.WriteFile(w.path(".churn"), []byte("x"), 0o644)
			}
		}
	}()
	defer func() { close(stop); <-churned }()

	writeFile(t, w.path("reader.toml"), `allow = ["wiki__*"]`)
	w.waitFor("the new policy despite the churn", allows("reader", "wiki__page"))
}

func TestWatchDirectoryRemovedAndRecreated(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["docs__*"]`}))
	good := w.store.Current()

	if err := os.RemoveAll(w.dir); err != nil {
		t.Fatal(err)
	}
	// Nothing is published while the directory is gone, so poll for the
	// reload having seen it.
	deadline := time.Now().Add(timeout)
	for w.store.LastError() == nil {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for LastError to report the missing directory")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(w.store.LastError(), fs.ErrNotExist) {
		t.Errorf("LastError = %v; want a not-exist error", w.store.LastError())
	}
	if w.store.Current() != good {
		t.Error("the policies changed when the directory disappeared; want them kept")
	}

	mkdir(t, w.dir)
	writeFile(t, w.path("reader.toml"), `allow = ["wiki__*"]`)
	w.waitFor("the recreated directory's policy", allows("reader", "wiki__page"))
	if err := w.store.LastError(); err != nil {
		t.Errorf("LastError = %v after the directory came back", err)
	}

	// And the new directory is watched.
	writeFile(t, w.path("writer.toml"), "")
	w.waitFor("a file added to the recreated directory", func(s *Set) bool { return s.For("writer") != nil })
}

func TestWatchDirectoryRenamedAndReplaced(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["docs__*"]`}))
	// Swap in a new directory by renaming, as a deploy script might.
	next := w.dir + ".next"
	mkdir(t, next)
	writeFile(t, filepath.Join(next, "reader.toml"), `allow = ["wiki__*"]`)
	if err := os.Rename(w.dir, w.dir+".old"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(w.dir + ".old") })
	if err := os.Rename(next, w.dir); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the new directory's policy", allows("reader", "wiki__page"))

	// Edits to the old directory no longer count; edits to the new one do.
	writeFile(t, filepath.Join(w.dir+".old", "ghost.toml"), "")
	writeFile(t, w.path("writer.toml"), "")
	s := w.waitFor("a file added to the new directory", func(s *Set) bool { return s.For("writer") != nil })
	if s.For("ghost") != nil {
		t.Error("a file in the renamed-away directory was loaded")
	}
}

func TestWatchAlreadyRunning(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": ""}))
	// Only a running Watch reloads, so once this arrives, it is running.
	writeFile(t, w.path("writer.toml"), "")
	w.waitFor("writer's policy", func(s *Set) bool { return s.For("writer") != nil })
	if err := w.store.Watch(context.Background(), nil); err == nil {
		t.Error("a second concurrent Watch succeeded")
	}
}

func TestWatchMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Watch(context.Background(), nil); err == nil {
		t.Error("Watch on a missing directory succeeded")
	}
}

func TestNewStore(t *testing.T) {
	dir := policyDir(t, map[string]string{
		"reader.toml": `allow = ["docs__*"]`,
		"broken.toml": "deny = 1",
	})
	s, err := NewStore(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	cur := s.Current()
	if got := cur.Identities(); len(got) != 1 || got[0] != "reader" {
		t.Errorf("Identities = %q; want [reader]", got)
	}
	if cur.Generation() != 1 {
		t.Errorf("Generation = %d; want 1", cur.Generation())
	}
	if err := s.LastError(); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, "broken.toml")+":1: ") {
		t.Errorf("LastError = %v; want broken.toml's problem", err)
	}

	if _, err := NewStore(filepath.Join(dir, "missing"), zerolog.Nop()); err == nil {
		t.Error("NewStore on a missing directory succeeded")
	}
	if _, err := NewStore(filepath.Join(dir, "reader.toml"), zerolog.Nop()); err == nil {
		t.Error("NewStore on a file succeeded")
	}
}

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// wantError checks that an error was logged for file and line, with the
// given error text.
func (b *syncBuffer) wantError(t *testing.T, file string, line int, errText string) {
	t.Helper()
	b.mu.Lock()
	logs := b.buf.String()
	b.mu.Unlock()
	for l := range strings.Lines(logs) {
		var e struct {
			Level string `json:"level"`
			File  string `json:"file"`
			Line  int    `json:"line"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if e.Level == "error" && e.File == file && e.Line == line && e.Error == errText {
			return
		}
	}
	t.Errorf("no error logged for %s:%d %q; logs:\n%s", file, line, errText, logs)
}

// Every reload is reported, also one that changed nothing or kept a broken
// file's last good policy, so metrics can count reloads and their errors.
func TestWatchReportsEveryReload(t *testing.T) {
	dir := policyDir(t, map[string]string{"reader.toml": `allow = ["a__*"]`})
	w := startWatch(t, dir)
	next := func() error {
		t.Helper()
		select {
		case err := <-w.reloads:
			return err
		case <-time.After(timeout):
			t.Fatal("no reload reported")
			return nil
		}
	}
	// Watch's own first re-read.
	if err := next(); err != nil {
		t.Fatalf("first reload: %v", err)
	}
	replaceFile(t, w.path("reader.toml"), "allow = [")
	if err := next(); err == nil {
		t.Fatal("a broken file was reported as a clean reload")
	}
	replaceFile(t, w.path("reader.toml"), `allow = ["a__*"]`)
	if err := next(); err != nil {
		t.Fatalf("fixed file: %v", err)
	}
}

// An edit that only moves a rule to another line publishes the policy read
// from it, so that a refusal names the line the rule is on now, but changes
// no identity's access.
func TestWatchRuleMovedOnly(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": publicReader, "other.toml": `allow = ["a__*"]`}))
	before := w.store.Current()
	line := before.For("reader").Rules()[0].Line
	replaceFile(t, w.path("reader.toml"), "# two lines\n# above\n"+publicReader)
	c := w.nextChange()
	if got := c.new.For("reader").Rules()[0].Line; got != line+2 {
		t.Errorf("rule 1 is on line %d; want %d", got, line+2)
	}
	if ids := Changed(c.old, c.new); len(ids) != 0 {
		t.Errorf("Changed = %q; want none", ids)
	}
	if c.new.For("other") != before.For("other") {
		t.Error("other's policy was read again")
	}
	if c.new.Generation() <= before.Generation() {
		t.Errorf("generation %d after %d", c.new.Generation(), before.Generation())
	}

	// A comment that moves no rule publishes nothing.
	replaceFile(t, w.path("reader.toml"), "# two lines\n# above\n"+publicReader+"# below\n")
	replaceFile(t, w.path("other.toml"), `allow = ["b__*"]`)
	s := w.waitFor("other's change", allows("other", "b__x"))
	if s.For("reader") != c.new.For("reader") {
		t.Error("a comment below the rules replaced reader's policy")
	}
}

// Move puts another directory's policies in force as one step, tells
// onChange, and from then on Watch follows the new directory; a directory
// that cannot be read changes nothing.
func TestMove(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["docs__*"]`}))
	w.waitWatching()
	first := w.store.Current()
	to := policyDir(t, map[string]string{"reader.toml": `allow = ["tickets__*"]`, "other.toml": `allow = ["a__*"]`})

	if err := w.store.Move(filepath.Join(to, "missing")); err == nil {
		t.Fatal("Move to a directory that does not exist: nil error")
	}
	if w.store.Current() != first || w.store.Dir() != w.dir {
		t.Fatalf("a failed Move changed the store: dir %s, set %p (want %s, %p)", w.store.Dir(), w.store.Current(), w.dir, first)
	}

	if err := w.store.Move(to); err != nil {
		t.Fatal(err)
	}
	c := w.nextChange()
	if c.old != first || c.new != w.store.Current() || w.store.Dir() != to {
		t.Fatalf("Move told onChange(%p, %p), dir %s; want (%p, current %p), %s", c.old, c.new, w.store.Dir(), first, w.store.Current(), to)
	}
	if got := Changed(c.old, c.new); !slices.Equal(got, []string{"other", "reader"}) {
		t.Errorf("Changed = %q; want [other reader]", got)
	}
	if !c.new.For("reader").Allows(tool("tickets__x", false)) || c.new.Generation() != 2 {
		t.Errorf("after Move: reader %v, generation %d; want tickets__*, 2", c.new.For("reader"), c.new.Generation())
	}

	w.waitWatching() // the new directory is watched
	replaceFile(t, filepath.Join(to, "reader.toml"), `allow = ["wiki__*"]`)
	c = w.nextChange()
	if !c.new.For("reader").Allows(tool("wiki__x", false)) || c.new.Generation() != 3 {
		t.Errorf("an edit in the new directory: reader %v, generation %d; want wiki__*, 3", c.new.For("reader"), c.new.Generation())
	}
}
