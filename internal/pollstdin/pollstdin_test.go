package pollstdin

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A pipe given as stdin is read through the poller (its descriptor
// non-blocking, its reads interruptible by closing), reads what was
// written, and is left blocking and open once restored; a regular file is
// read as it is.
func TestOf(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	polled, restore := Of(r)
	if polled == r {
		t.Fatal("a pipe was not made a polled file")
	}
	if !nonblocking(t, r) {
		t.Fatal("the pipe is not non-blocking")
	}
	if _, err := w.Write([]byte("line\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := polled.Read(buf); err != nil || string(buf[:n]) != "line\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	restore()
	if nonblocking(t, r) {
		t.Fatal("the pipe is still non-blocking after restore")
	}
	if _, err := w.Write([]byte("more\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "more\n" {
		t.Fatalf("after restore, stdin read %q, %v", buf[:n], err)
	}

	path := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	same, restore := Of(f)
	defer restore()
	if same != f || nonblocking(t, f) {
		t.Fatal("a regular file was changed")
	}
	if b, err := io.ReadAll(same); err != nil || string(b) != "x" {
		t.Fatalf("read %q, %v", b, err)
	}
}

// nonblocking reports f's O_NONBLOCK, read without f.Fd, which would
// clear it.
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl int
	var ferr error
	if err := rc.Control(func(fd uintptr) { fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil {
		t.Fatal(err, ferr)
	}
	return fl&unix.O_NONBLOCK != 0
}
