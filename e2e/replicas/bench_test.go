package replicas

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// BenchmarkForwardedCall measures what forwarding costs: each iteration
// makes the same tools/call of one 2025-11-25 session twice, straight to
// the replica that owns it and to another replica, which forwards it, in
// alternating order, so that both see the same machine. It reports the
// p50 of each and their ratio (forwarded/direct); the bar is 1.3.
// go test -run '^$' -bench ForwardedCall -benchtime 2000x ./e2e/replicas
func BenchmarkForwardedCall(b *testing.B) {
	lab := ts.NewLab(b, "", ts.Server{Alias: "docs"})
	lab.WritePolicy(b, "reader", `allow = ["*"]`)
	rs := ts.StartReplicas(b, lab, 2)
	c := ts.ConnectHTTP(b, "http://"+rs.Public[0]+"/mcp", ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION})
	sid := sessionID(c)
	if o := rs.OwnerOf("session", sid); o != 0 {
		b.Fatalf("a session initialized on replica 0 is replica %d's", o)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer hc.CloseIdleConnections()
	call := func(replica, n int) time.Duration {
		token := fmt.Sprintf("tok-%d-%d", replica, n)
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"docs__echo","arguments":{"message":%q}}}`, n, token)
		req, _ := http.NewRequest(http.MethodPost, "http://"+rs.Public[replica]+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		took := time.Since(start)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(got), "docs: "+token) {
			b.Fatalf("replica %d: %d %v %s", replica, resp.StatusCode, err, got)
		}
		return took
	}
	for i := range 50 { // warm both paths: connections, the peer transport
		call(0, -1-i)
		call(1, -1-i)
	}
	direct := make([]time.Duration, 0, b.N)
	forwarded := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			direct = append(direct, call(0, i))
			forwarded = append(forwarded, call(1, i))
		} else {
			forwarded = append(forwarded, call(1, i))
			direct = append(direct, call(0, i))
		}
	}
	b.StopTimer()
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	dp, fp := p50(direct), p50(forwarded)
	b.ReportMetric(float64(dp.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(fp.Microseconds()), "forwarded-p50-µs")
	b.ReportMetric(float64(fp)/float64(dp), "forwarded/direct")
}
