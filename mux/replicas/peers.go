package replicas

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Timing of the peers found from DNS.
const (
	// dnsRefresh is how often the peers' name is looked up.
	dnsRefresh = 5 * time.Second
	// missRefresh is how soon after a look-up an owner that is not among
	// the peers makes another: a replica that just started may own
	// sessions before the last look-up saw it.
	missRefresh = time.Second
)

// peers is who the other replicas are: the only addresses a request is
// forwarded to. An id's owner is trusted only as far as the key that
// sealed it; were the key to leak, this set still keeps a forwarded
// request, and the caller's credentials in it, on the replicas.
type peers struct {
	set atomic.Pointer[map[string]bool]

	// With DNS: the name, the port of every peer (this replica's
	// listen port) and the look-up.
	name, port string
	lookup     func(ctx context.Context, host string) ([]string, error)
	timeout    time.Duration

	mu   sync.Mutex // a look-up after a miss; one at a time
	last atomic.Int64
}

func staticPeers(addrs []string) *peers {
	p := &peers{}
	set := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		set[a] = true
	}
	p.set.Store(&set)
	return p
}

func dnsPeers(name, port string, timeout time.Duration) *peers {
	p := &peers{name: name, port: port, lookup: net.DefaultResolver.LookupHost, timeout: timeout}
	p.set.Store(&map[string]bool{})
	return p
}

// has reports whether addr is a peer's; with DNS, an address not found
// makes one more look-up, at most every missRefresh, which the request
// waits for (within ctx and the dial timeout).
func (p *peers) has(ctx context.Context, addr string) bool {
	if (*p.set.Load())[addr] {
		return true
	}
	if p.lookup == nil || time.Since(time.Unix(0, p.last.Load())) < missRefresh {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(time.Unix(0, p.last.Load())) >= missRefresh {
		_ = p.refresh(ctx)
	}
	return (*p.set.Load())[addr]
}

// refresh looks the peers' name up; a failed look-up keeps the peers
// found last.
func (p *peers) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	p.last.Store(time.Now().UnixNano())
	hosts, err := p.lookup(ctx, p.name)
	if err != nil {
		return fmt.Errorf("looking up the peers at %s: %w", p.name, err)
	}
	set := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		set[net.JoinHostPort(h, p.port)] = true
	}
	p.set.Store(&set)
	return nil
}

// run looks the peers up every dnsRefresh until ctx is done; failures
// are told to failed. With a static list it returns at once.
func (p *peers) run(ctx context.Context, failed func(error)) {
	if p.lookup == nil {
		return
	}
	t := time.NewTicker(dnsRefresh)
	defer t.Stop()
	for {
		p.mu.Lock()
		err := p.refresh(ctx)
		p.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			failed(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
