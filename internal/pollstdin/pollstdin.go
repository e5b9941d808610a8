// Package pollstdin owns reading a process's stdin pipe through Go's
// network poller.
package pollstdin

import (
	"os"
	"syscall"
)

// Of returns f, the process's stdin, as a file Go's network
// poller reads, when it is a pipe or a socket (what an MCP client hands
// its server), with what puts it back as it was; f itself, and a restore
// that does nothing, otherwise (a terminal, a file: their flags are
// shared with whoever else holds them).
//
// A stdin read in blocking mode parks a thread in read(2) between
// requests: each request then wakes that thread and hands its work to
// another, and with few processors a ready goroutine waits for the
// runtime to take the processor back from the blocked thread. Through the
// poller the goroutine that reads a request is woken like any other.
func Of(f *os.File) (polled *os.File, restore func()) {
	none := func() {}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f, none
	}
	fd := int(f.Fd())
	// A descriptor of its own, so that closing the polled file leaves
	// stdin open; O_NONBLOCK is the pipe's, shared by both.
	dup, err := syscall.Dup(fd)
	if err != nil {
		return f, none
	}
	syscall.CloseOnExec(dup)
	if err := syscall.SetNonblock(dup, true); err != nil {
		_ = syscall.Close(dup)
		return f, none
	}
	polled = os.NewFile(uintptr(dup), f.Name()) // non-blocking: the poller's
	return polled, func() {
		_ = polled.Close()
		_ = syscall.SetNonblock(fd, false)
	}
}
