package wire

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// Protocol versions of the two eras.
const (
	v2025 = "2025-11-25"
	v2026 = "2026-07-28"
)

// variant is one way of running a script: over stdio or HTTP, as a client
// of one protocol version.
type variant struct {
	over    string // "stdio" or "http"
	version string
}

func (v variant) String() string { return v.over + "-" + v.version[:4] }

var (
	stdio2025 = variant{"stdio", v2025}
	stdio2026 = variant{"stdio", v2026}
	http2025  = variant{"http", v2025}
	http2026  = variant{"http", v2026}
	// Each set of variants a script may run in.
	allVariants = []variant{stdio2025, stdio2026, http2025, http2026}
	legacyOnly  = []variant{stdio2025, http2025}
	modernOnly  = []variant{stdio2026, http2026}
	stdioOnly   = []variant{stdio2025, stdio2026}
	httpOnly    = []variant{http2025, http2026}
)

// script is one transcript per variant: lab makes its config and policies,
// run speaks to mcpmux.
type script struct {
	name     string
	variants []variant
	lab      func(t *testing.T) *ts.Lab
	run      func(w *W)
}

// W drives one run of a script and records its transcript. Its methods
// fail the test when mcpmux does not answer within ts.Wait.
type W struct {
	t       *testing.T
	v       variant
	lab     *ts.Lab
	log     *ts.LogTap
	tr      *transcript
	ids     int    // the last id line gave a request
	caps    string // the client capabilities, JSON
	replies map[string]string

	// Over stdio.
	mux *ts.RawMux
	// Over HTTP.
	hx *httpConn
}

// runScript starts mcpmux for one variant of s and runs it; the transcript
// is compared (or recorded) at the end.
func runScript(t *testing.T, s script, v variant) {
	lab := s.lab(t)
	w := &W{t: t, v: v, lab: lab, tr: newTranscript(), caps: "{}", replies: map[string]string{}}
	w.tr.path(lab.Dir, "<lab>")
	mcpmux, _ := ts.Binaries(t)
	w.tr.path(filepath.Dir(mcpmux), "<bin>")
	w.tr.add("# %s over %s, protocol %s", s.name, v.over, v.version)
	switch v.over {
	case "stdio":
		w.mux = ts.StartRawMux(t, lab, "--identity", "reader")
		w.log = w.mux.Log
	case "http":
		lab.AddUpstream(t, `listen = "127.0.0.1:0"`)
		h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
		w.log = h.Log
		w.hx = newHTTPConn(w, h)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("transcript so far:\n%s\nlog:\n%s", w.tr.text(), w.log.Text())
		}
	})
	// The children's first start is over, and the sessions open then told,
	// before the first line: what comes after does not depend on timing.
	w.log.WaitFirstCatalog(t)
	s.run(w)
	w.end()
	w.tr.check(t, s.name+"."+v.String()+".txt")
}

// TestWire runs every script in each of its variants, in parallel.
func TestWire(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range scripts() {
		if seen[s.name] {
			t.Fatalf("two scripts named %s", s.name)
		}
		seen[s.name] = true
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			for _, v := range s.variants {
				t.Run(v.String(), func(t *testing.T) {
					t.Parallel()
					runScript(t, s, v)
				})
			}
		})
	}
}

// openGet opens the standalone GET stream of a 2025-11-25 session and
// waits for its status; it stays open until the script closes it or ends.
func (w *W) openGet() string {
	w.t.Helper()
	label := w.hx.start("GET", "", nil)
	w.hx.awaitHead(label)
	return label
}

// modern reports whether the client speaks 2026-07-28.
func (w *W) modern() bool { return w.v.version == v2026 }

// note adds a "#" line to the transcript: something the script did that
// is not a message.
func (w *W) note(format string, args ...any) { w.tr.add("# "+format, args...) }

// policy saves identity's policy file (by rename, as editors do) and
// notes it.
func (w *W) policy(identity, body string) {
	w.lab.WritePolicy(w.t, identity, body)
	w.note("policy %s.toml: %s", identity, strings.ReplaceAll(strings.TrimSpace(body), "\n", " | "))
}

// reply has every request of method mcpmux sends from now on answered
// with result (JSON).
func (w *W) reply(method, result string) { w.replies[method] = result }

// withCaps sets the capabilities the client declares: in initialize, or in
// the _meta of every 2026-07-28 request.
func (w *W) withCaps(caps string) { w.caps = caps }

// init opens the session as a client of the variant's version does: for
// 2025-11-25, initialize and notifications/initialized; for 2026-07-28,
// server/discover.
func (w *W) init() *msg {
	if w.modern() {
		return w.req("server/discover", "")
	}
	res := w.send(w.line("initialize", fmt.Sprintf(`{"protocolVersion":%q,"capabilities":%s,"clientInfo":{"name":"wire","version":"1"}}`, v2025, w.caps)))
	w.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return res
}

// modernMeta is the _meta members a 2026-07-28 request carries, as mcp-go's
// client writes them.
func (w *W) modernMeta() string {
	return fmt.Sprintf(`"io.modelcontextprotocol/clientCapabilities":%s,"io.modelcontextprotocol/clientInfo":{"name":"wire","version":"1"},"io.modelcontextprotocol/protocolVersion":%q`, w.caps, v2026)
}

// params builds a request's params: the members given (JSON, without
// braces; "" for none), after a _meta of the members meta (likewise) and,
// for 2026-07-28, the protocol's own. It returns "" when there is nothing.
func (w *W) params(meta, members string) string {
	if w.modern() {
		meta = join(w.modernMeta(), meta)
	}
	var parts []string
	if meta != "" {
		parts = append(parts, `"_meta":{`+meta+`}`)
	}
	if members != "" {
		parts = append(parts, members)
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// line is a request of method with params (JSON, "" for none) under the
// next id.
func (w *W) line(method, params string) string {
	w.ids++
	if params == "" {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, w.ids, method)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, w.ids, method, params)
}

// req sends a request of method whose params hold members (JSON without
// braces) and returns its answer.
func (w *W) req(method, members string) *msg {
	return w.send(w.line(method, w.params("", members)))
}

// reqMeta is req with _meta members of its own (a progressToken).
func (w *W) reqMeta(method, meta, members string) *msg {
	return w.send(w.line(method, w.params(meta, members)))
}

// call calls tool with arguments (JSON; "" for none).
func (w *W) call(tool, args string) *msg {
	return w.req("tools/call", callMembers(tool, args))
}

func callMembers(tool, args string) string {
	if args == "" {
		return fmt.Sprintf(`"name":%q`, tool)
	}
	return fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args)
}

// send sends line, a request exactly as written, and reads until its
// answer.
func (w *W) send(line string) *msg {
	w.t.Helper()
	return w.finish(w.begin(line))
}

// pending is a request sent and not yet answered.
type pending struct {
	id    json.RawMessage
	label string // over HTTP, its POST's
}

// begin sends line, a request exactly as written, without waiting for its
// answer.
func (w *W) begin(line string) pending {
	w.t.Helper()
	if w.hx != nil {
		return pending{id: idOf(line), label: w.hx.start("POST", line, nil)}
	}
	w.write(line)
	return pending{id: idOf(line)}
}

// finish reads until p's answer (over HTTP, to the end of its response)
// and returns it; nil when its HTTP response held none.
func (w *W) finish(p pending) *msg {
	w.t.Helper()
	if w.hx != nil {
		return w.hx.finish(p)
	}
	for {
		in := w.next("the answer to " + string(p.id))
		if m := w.received(in.label, in.raw); m.answers(p.id) {
			return m
		}
	}
}

// callAlso calls tool with args, during which mcpmux also sends a message
// of method that is no part of the call (resources/updated of a resource
// the call touched), in any order with the call's answer (see
// sendAnyOrder): mcpmux writes such a message outside the call, and over
// HTTP on another stream.
func (w *W) callAlso(tool, args, method string) *msg {
	w.t.Helper()
	return w.sendAnyOrder(w.line("tools/call", w.params("", callMembers(tool, args))), method)
}

// incoming is one message mcpmux wrote (on the HTTP response label), or
// the end of an HTTP response.
type incoming struct {
	label string
	raw   []byte
	end   bool
}

// next reads the next message mcpmux writes, on stdout or on any HTTP
// response open, failing the test if none comes within ts.Wait. Over HTTP
// it records the statuses, headers, bodies that are not JSON and ends of
// responses as they come; the messages are the caller's to record.
func (w *W) next(what string) incoming {
	w.t.Helper()
	if w.hx != nil {
		return w.hx.next(what)
	}
	line, ok := w.mux.NextLine(w.t)
	if !ok {
		w.t.Fatalf("mcpmux closed its stdout before %s", what)
	}
	return incoming{raw: line}
}

// sendAnyOrder sends line and reads until its answer and one message of
// each of methods have come. They are sent independently of each other
// (the status notification of a task and the answer of the request that
// ended it), so their order varies from run to run: the transcript notes
// that and has them in a fixed order, the answer first, then methods',
// then whatever else came meanwhile. A request of mcpmux's is recorded
// (and replied to) as it comes.
func (w *W) sendAnyOrder(line string, methods ...string) *msg {
	w.t.Helper()
	p := w.begin(line)
	return w.anyOrder(&p, methods)
}

// awaitAnyOrder reads until one message of each of methods has come, in
// any order (see sendAnyOrder).
func (w *W) awaitAnyOrder(methods ...string) {
	w.t.Helper()
	w.anyOrder(nil, methods)
}

// anyOrder reads until p's answer (when p is not nil) and one message of
// each of methods have come, and records them in that order; it returns
// p's answer.
func (w *W) anyOrder(p *pending, methods []string) *msg {
	w.t.Helper()
	got := make([]*incoming, 1+len(methods))
	if p == nil {
		got[0] = &incoming{end: true} // nothing to wait for
	}
	var extra []incoming
	early := false                   // a request awaited was recorded as it came
	ended := p == nil || w.hx == nil // over HTTP the response must end too
	for !ended || slices.Contains(got, nil) {
		in := w.next(strings.Join(methods, ", "))
		if in.end {
			ended = ended || in.label == p.label
			continue
		}
		m := parseMsg(in.raw)
		i := -1
		if got[0] == nil && in.label == p.label && m.answers(p.id) {
			i = 0
		}
		for j, method := range methods {
			if i < 0 && got[1+j] == nil && m.method == method {
				i = 1 + j
			}
		}
		if m.isRequest() && w.replies[m.method] != "" {
			// Answered at once, so recorded at once, its answer after it.
			w.received(in.label, in.raw)
			if i >= 0 {
				got[i] = &incoming{end: true}
				early = true
			}
			continue
		}
		if i < 0 {
			extra = append(extra, in)
			continue
		}
		got[i] = &in
	}
	got = slices.DeleteFunc(got, func(in *incoming) bool { return in.end })
	if early {
		w.note("the next %d messages and the requests just above come in any order", len(got))
	} else {
		w.note("the next %d messages come in any order", len(got))
	}
	for _, in := range got {
		w.received(in.label, in.raw)
	}
	for _, in := range extra {
		w.received(in.label, in.raw)
	}
	if p == nil {
		return nil
	}
	return w.answerOf(*p, got)
}

// answerOf returns p's answer among got.
func (w *W) answerOf(p pending, got []*incoming) *msg {
	for _, in := range got {
		if m := parseMsg(in.raw); m.answers(p.id) {
			return m
		}
	}
	return nil
}

// notify sends line, a notification (or any message that gets no answer)
// exactly as written.
func (w *W) notify(line string) {
	w.t.Helper()
	if w.hx != nil {
		w.hx.inline("POST", line, nil)
		return
	}
	w.write(line)
}

// await reads until a message of method comes (over HTTP, on any response
// open) and returns it.
func (w *W) await(method string) *msg {
	w.t.Helper()
	for {
		in := w.next(method)
		if in.end {
			continue
		}
		if m := w.received(in.label, in.raw); m.method == method {
			return m
		}
	}
}

// end ends the session: over stdio stdin is closed and everything mcpmux
// writes until its stdout ends is recorded; over HTTP a 2025-11-25 session
// is deleted and the streams still open are closed.
func (w *W) end() {
	w.t.Helper()
	if w.t.Failed() {
		return
	}
	if w.hx != nil {
		w.hx.end()
		return
	}
	w.mux.CloseStdin()
	w.tr.add("> (stdin closed)")
	for {
		line, ok := w.mux.NextLine(w.t)
		if !ok {
			w.tr.add("< (stdout closed)")
			return
		}
		w.received("", line)
	}
}

// write sends one line on mcpmux's stdin.
func (w *W) write(line string) {
	w.t.Helper()
	w.tr.add("> %s", line)
	w.mux.Write(w.t, []byte(line+"\n"))
}

// received records a message mcpmux wrote (on the stream label, over
// HTTP) and answers it if it is a request the script has a reply for.
func (w *W) received(label string, raw []byte) *msg {
	w.t.Helper()
	if label == "" {
		w.tr.add("< %s", raw)
	} else {
		w.tr.add("< %s %s", label, raw)
	}
	m := parseMsg(raw)
	if m.isRequest() {
		if result, ok := w.replies[m.method]; ok {
			w.notify(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.id, result))
		}
	}
	return m
}
