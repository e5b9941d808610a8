package testsupport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

var hostile = &extraBinary{pkg: "./internal/hostile", race: true}

// HostileBinary builds the hostile test child (internal/hostile) once per
// test process, next to the binaries of Binaries (and with -race when the
// tests run with it), and returns its path.
func HostileBinary(t testing.TB) string {
	t.Helper()
	return hostile.path(t)
}

// AddServer appends a stdio server's table to the lab's config, with the
// environment NewLab gives each labserver.
func (l *Lab) AddServer(t testing.TB, s Server) {
	t.Helper()
	_, labserver := Binaries(t)
	var b strings.Builder
	l.writeServer(&b, s, labserver)
	l.appendConfig(t, b.String())
}

// RawMux is a running mcpmux binary whose stdio the test speaks itself,
// line by line, to send what no MCP client library would.
type RawMux struct {
	Cmd    *exec.Cmd
	Log    *LogTap
	in     io.WriteCloser
	lines  chan []byte // stdout, one message a line; closed at its end
	exited chan struct{}
}

// StartRawMux starts `mcpmux serve --config lab.Config` with extra args
// (say --identity NAME). It is stopped at cleanup, and the test fails if
// any child it started outlives it.
func StartRawMux(t testing.TB, lab *Lab, args ...string) *RawMux {
	t.Helper()
	bin, _ := Binaries(t)
	cmd := exec.Command(bin, append([]string{"serve", "--config", lab.Config}, args...)...)
	in, stdout, stderr := startPiped(t, cmd)
	r := &RawMux{Cmd: cmd, Log: newLogTap(stderr), in: in, lines: make(chan []byte, 1024), exited: make(chan struct{})}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(r.lines)
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				r.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-r.Log.done
		<-readerDone // Wait closes stdout
		_ = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = r.in.Close()
		awaitExit(t, cmd, r.exited, r.Log, "after its stdin closed")
		for _, pid := range r.Log.ChildPids() {
			if Alive(pid) {
				t.Errorf("child pid %d outlived mcpmux", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return r
}

// Write writes p to mcpmux's stdin as it is.
func (r *RawMux) Write(t testing.TB, p []byte) {
	t.Helper()
	if _, err := r.in.Write(p); err != nil {
		t.Fatalf("write to mcpmux: %v", err)
	}
}

// Line returns the next line mcpmux writes, whatever it is.
func (r *RawMux) Line(t testing.TB) []byte {
	t.Helper()
	select {
	case line := <-r.lines:
		return line
	case <-time.After(Wait):
		t.Fatalf("mcpmux wrote nothing more; log:\n%s", r.Log.Text())
		return nil
	}
}

// Next returns the next message mcpmux writes that is not a notification,
// decoded to its top level.
func (r *RawMux) Next(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	timeout := time.After(Wait)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				t.Fatalf("mcpmux closed its stdout; log:\n%s", r.Log.Text())
			}
			var msg map[string]json.RawMessage
			if err := json.Unmarshal(line, &msg); err != nil {
				t.Fatalf("mcpmux wrote %.300q: %v", line, err)
			}
			if _, ok := msg["id"]; !ok && msg["method"] != nil {
				continue
			}
			return msg
		case <-timeout:
			t.Fatalf("mcpmux wrote nothing more; log:\n%s", r.Log.Text())
			return nil
		}
	}
}

// NextLine returns the next line mcpmux writes on stdout, without its
// newline, or false once stdout has ended; it fails the test if none comes
// within Wait.
func (r *RawMux) NextLine(t testing.TB) ([]byte, bool) {
	t.Helper()
	select {
	case line, ok := <-r.lines:
		return bytes.TrimSuffix(line, []byte("\n")), ok
	case <-time.After(Wait):
		t.Fatalf("mcpmux wrote nothing more; log:\n%s", r.Log.Text())
		return nil, false
	}
}

// CloseStdin closes mcpmux's stdin, as a client that is done does.
func (r *RawMux) CloseStdin() { _ = r.in.Close() }
