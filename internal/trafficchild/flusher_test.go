package trafficchild

import (
	"sync/atomic"
	"testing"
)

// TestFlusherWaitsForItsOwn: two calls wait at once for their notifications
// to be written (as the traffic tool's calls of TestChildLogOfTwoIdentities
// do); the first one's being written ends only its own wait: the second
// returns only once its notification is out, so that its answer, which
// mcp-go writes on another goroutine, cannot overtake it.
func TestFlusherWaitsForItsOwn(t *testing.T) {
	lines := map[string][]byte{
		"a": []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"log of a","level":"error","logger":"traffic"}}` + "\n"),
		"b": []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"log of b","level":"error","logger":"traffic"}}` + "\n"),
	}
	f := NewFlusher(discard{})
	sent := make(chan string, 2) // what the sends handed to mcp-go's writer
	var written [2]atomic.Bool   // a's, b's line is written
	done := map[string]chan bool{"a": make(chan bool, 1), "b": make(chan bool, 1)}
	for i, tag := range []string{"a", "b"} {
		go func() {
			f.wait(func() { sent <- tag }, note{"notifications/message", map[string]any{"data": "log of " + tag, "level": "error", "logger": "traffic"}})
			done[tag] <- written[i].Load()
		}()
	}
	<-sent
	<-sent // both calls wait now
	written[0].Store(true)
	_, _ = f.Write(lines["a"])
	if !<-done["a"] {
		t.Fatal("a's wait returned before its line was written")
	}
	written[1].Store(true)
	_, _ = f.Write(lines["b"])
	if !<-done["b"] {
		t.Error("b's wait returned when a's line was written, before its own")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
