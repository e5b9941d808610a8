package childproc

import (
	"fmt"
	"io"
	"sync"
)

// Prestart starts the supervisor now, on a goroutine the Spawner owns,
// rather than with the first child: it then initialises while mcpmux
// reads its config, and the first children do not wait for it to exec.
// It does nothing without a supervisor binary. A failure is not reported
// here: the first Start tries again and says why it failed.
//
// What the supervisor writes on its stderr before SetSupervisorStderr is
// called is held (up to maxHeldStderr bytes) and written to that writer
// when it is set, or to mcpmux's stderr at Close if it never is.
func (s *Spawner) Prestart() {
	if s.supervisor == "" {
		return
	}
	s.supMu.Lock()
	if s.supStderr == nil {
		s.early = &heldWriter{}
		s.supStderr = s.early
	}
	s.supMu.Unlock()
	s.threads.Go(func() { _, _ = s.supervisorConn() })
}

// maxHeldStderr bounds what a supervisor's stderr holds before it has
// somewhere to go: the supervisor writes only why it failed.
const maxHeldStderr = 64 << 10

// heldWriter holds what is written to it until bind gives it a writer, and
// then writes through to that.
type heldWriter struct {
	mu      sync.Mutex
	w       io.Writer
	held    []byte
	dropped int
}

func (h *heldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		return h.w.Write(p)
	}
	n := min(len(p), maxHeldStderr-len(h.held))
	h.held = append(h.held, p[:n]...)
	h.dropped += len(p) - n
	return len(p), nil
}

// bind writes what is held to w, and everything after it. It does nothing
// on a nil heldWriter or once bound.
func (h *heldWriter) bind(w io.Writer) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		return
	}
	if len(h.held) > 0 {
		_, _ = w.Write(h.held)
	}
	if h.dropped > 0 {
		fmt.Fprintf(w, "mcpmux supervisor: %d more bytes of stderr were dropped\n", h.dropped)
	}
	h.w, h.held = w, nil
}
