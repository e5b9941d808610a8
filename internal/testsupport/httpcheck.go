package testsupport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// LabHidden are labserver's test-only tools, kept out of every catalog.
var LabHidden = []string{"crash_for_test", "spawn_grandchild", "notify_changed"}

// HTTPLab is NewLab with an [upstream] table (upstream is its TOML) and,
// when no servers are given, labservers docs and tickets; every server hides
// LabHidden and has search read-only unless it says otherwise.
func HTTPLab(t testing.TB, muxLines string, upstream string, servers ...Server) *Lab {
	t.Helper()
	if len(servers) == 0 {
		servers = []Server{{Alias: "docs"}, {Alias: "tickets"}}
	}
	for i := range servers {
		if servers[i].Hide == nil {
			servers[i].Hide = LabHidden
		}
		if servers[i].ReadOnly == nil {
			servers[i].ReadOnly = []string{"search"}
		}
	}
	lab := NewLab(t, muxLines, servers...)
	lab.AddUpstream(t, upstream)
	return lab
}

// SameSet reports whether a and b hold the same names, in any order.
func SameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// SHA256Hex is the hex SHA-256 of s, as token digests are written.
func SHA256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// TokenEntry is an [[upstream.tokens]] table.
func TokenEntry(identity, key, value string) string {
	return fmt.Sprintf("\n[[upstream.tokens]]\nidentity = %q\n%s = %q\n", identity, key, value)
}

// RefusedCall checks that a call was refused as an unknown tool: -32602
// naming it. It returns "" or what is wrong, for use off the test goroutine.
func RefusedCall(res *mcp.CallToolResult, err error, name string) string {
	switch {
	case err == nil:
		return fmt.Sprintf("call %s: got a result (isError=%v %q), want -32602", name, res.IsError, Text(res))
	case !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), name):
		return fmt.Sprintf("call %s: got %v, want -32602 naming the tool", name, err)
	}
	return ""
}

// Answer is a plain HTTP response, read in full.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends one plain HTTP request with a bound of Wait. host, when set,
// replaces the Host header.
func Do(t testing.TB, method, url, host string, header http.Header, body string) Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Get is Do of a plain GET.
func Get(t testing.TB, url string) Answer {
	t.Helper()
	return Do(t, http.MethodGet, url, "", nil, "")
}

// InitializeBody is a 2025-11-25 initialize request.
const InitializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// PingBody is a ping request, id 2.
const PingBody = `{"jsonrpc":"2.0","id":2,"method":"ping"}`

// PostInitialize sends InitializeBody to the MCP endpoint with the given
// Authorization header values (none for nil).
func PostInitialize(t testing.TB, url string, authorization ...string) Answer {
	t.Helper()
	h := http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json, text/event-stream"},
	}
	if authorization != nil {
		h["Authorization"] = authorization
	}
	return Do(t, http.MethodPost, url, "", h, InitializeBody)
}

// readiness is the JSON body of /readyz.
type Readiness struct {
	Ready   bool `json:"ready"`
	Servers []struct {
		Name     string  `json:"name"`
		State    string  `json:"state"`
		Required bool    `json:"required"`
		Attempt  int     `json:"attempt"`
		Reason   *string `json:"reason"`
		Tools    int     `json:"tools"`
	} `json:"servers"`
	Policy struct {
		Generation uint64  `json:"generation"`
		LastErr    *string `json:"last_error"`
	} `json:"policy"`
	Config struct {
		Generation uint64  `json:"generation"`
		LastErr    *string `json:"last_error"`
	} `json:"config"`
}

func Readyz(t testing.TB, base string) (int, Readiness) {
	t.Helper()
	a := Get(t, base+"/readyz")
	var r Readiness
	if err := json.Unmarshal(a.Body, &r); err != nil {
		t.Fatalf("/readyz %d: %v: %q", a.Status, err, a.Body)
	}
	if (a.Status == http.StatusOK) != r.Ready {
		t.Fatalf("/readyz status %d with ready=%v", a.Status, r.Ready)
	}
	return a.Status, r
}

// WaitReadyz polls /readyz until cond holds of its answer: readiness is
// only observable by asking.
func WaitReadyz(t testing.TB, base, what string, cond func(int, Readiness) bool) Readiness {
	t.Helper()
	var last Readiness
	var lastStatus int
	deadline := time.Now().Add(Wait)
	for {
		lastStatus, last = Readyz(t, base)
		if cond(lastStatus, last) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for /readyz: %s; last %d %+v", what, lastStatus, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Scrape reads /metrics and parses it.
func Scrape(t testing.TB, base string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	a := Get(t, base+"/metrics")
	if a.Status != http.StatusOK {
		t.Fatalf("/metrics: %d %q", a.Status, a.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(a.Body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, a.Body)
	}
	return fams, string(a.Body)
}

// Sample returns the value of the series of family name with exactly the
// given labels, and whether there is one.
func Sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}
