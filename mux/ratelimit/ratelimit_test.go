package ratelimit

import (
	"strings"
	"testing"
)

func TestLimiters(t *testing.T) {
	var l Buckets
	for i := range 3 {
		if !l.Allow("alice", 0.001, 3) {
			t.Fatalf("call %d of a burst of 3 refused", i+1)
		}
	}
	if l.Allow("alice", 0.001, 3) {
		t.Fatal("fourth call of a burst of 3 allowed")
	}
	if !l.Allow("bob", 0.001, 3) {
		t.Fatal("another identity shares alice's bucket")
	}
	if msg := Message("alice", 0.5, 3); msg != `rate limit exceeded for identity "alice": at most 0.5 calls per second (bursts of 3); try again later` {
		t.Errorf("message %q", msg)
	}
	if msg := Message("", 10, 10); !strings.Contains(msg, "the anonymous identity") {
		t.Errorf("message %q", msg)
	}
}

// A change of the limit (a reload) applies to a bucket already spent: it
// keeps its tokens and refills at the new rate.
func TestLimitersRetuned(t *testing.T) {
	var l Buckets
	if !l.Allow("alice", 0.001, 1) || l.Allow("alice", 0.001, 1) {
		t.Fatal("a burst of 1 at 0.001/s: want one call, then a refusal")
	}
	if l.Allow("alice", 0.001, 3) {
		t.Fatal("a larger burst refilled the spent bucket at once")
	}
	if !l.Allow("alice", 1e9, 3) {
		t.Fatal("a huge rate did not refill the bucket")
	}
	for i := range 3 {
		if !l.Allow("alice", 1e9, 3) {
			t.Fatalf("call %d at a huge rate refused", i+1)
		}
	}
	if !l.Allow("alice", 0.001, 3) || !l.Allow("alice", 0.001, 3) {
		// Full at the huge rate: its 3 tokens are spent one by one.
		t.Fatal("the bucket lost the tokens it had when the rate went down")
	}
}

// Buckets that are full again are dropped once there are many, and those
// still spent are kept.
func TestLimitersSweep(t *testing.T) {
	var l Buckets
	l.Allow("spender", 0.001, 1) // spent for 1000s
	for i := range minSweep + 1 {
		// Each of these refills at once: a huge rate.
		l.Allow(strings.Repeat("x", i+1), 1e9, 1)
	}
	// allow swept when the map passed minSweep; sweep again for the last.
	l.sweep()
	n := 0
	l.m.Range(func(k, _ any) bool { n++; return true })
	if _, ok := l.m.Load("spender"); !ok || n > minSweep/2 {
		t.Fatalf("after a sweep: %d buckets, spender kept: %v", n, ok)
	}
	if l.Allow("spender", 0.001, 1) {
		t.Fatal("the spent bucket was replaced by a full one")
	}
}
