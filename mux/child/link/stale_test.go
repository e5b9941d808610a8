package link

import (
	"errors"
	"io"
	"net"
	"net/url"
	"testing"
	"time"
)

// tcpPair is a connected pair of real loopback TCP connections.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// eventually waits for the kernel to deliver what the peer did.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPeerClosed(t *testing.T) {
	t.Run("open and quiet", func(t *testing.T) {
		c, _ := tcpPair(t)
		if peerClosed(c) {
			t.Error("an open connection with nothing to read is taken as closed")
		}
	})
	t.Run("closed by the peer", func(t *testing.T) {
		c, s := tcpPair(t)
		s.Close()
		eventually(t, "the peer's close seen", func() bool { return peerClosed(c) })
	})
	t.Run("unsolicited bytes, left unread", func(t *testing.T) {
		c, s := tcpPair(t)
		if _, err := s.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the peer's bytes seen", func() bool { return peerClosed(c) })
		var b [1]byte
		if n, err := c.Read(b[:]); n != 1 || b[0] != 'x' {
			t.Errorf("the byte was consumed: n=%d %v", n, err)
		}
	})
	t.Run("closed here", func(t *testing.T) {
		c, _ := tcpPair(t)
		c.Close()
		if peerClosed(c) {
			t.Error("a connection closed on this side is for net/http to judge")
		}
	})
	t.Run("not a socket", func(t *testing.T) {
		c, s := net.Pipe()
		defer c.Close()
		defer s.Close()
		if peerClosed(c) {
			t.Error("a pipe is taken as closed")
		}
	})
}

func TestNotSent(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("http: server closed idle connection"), true},
		{&url.Error{Op: "Post", URL: "http://x/mcp", Err: errors.New("http: server closed idle connection")}, true},
		{io.EOF, false}, // written, then the server went away: maybe run
		{&url.Error{Op: "Post", URL: "http://x/mcp", Err: io.ErrUnexpectedEOF}, false},
	} {
		if got := errors.Is(notSent(tc.err), ErrNotSent); got != tc.want {
			t.Errorf("notSent(%v) is ErrNotSent: %v, want %v", tc.err, got, tc.want)
		}
		if !errors.Is(notSent(tc.err), tc.err) {
			t.Errorf("notSent(%v) lost the error it marks", tc.err)
		}
	}
}
