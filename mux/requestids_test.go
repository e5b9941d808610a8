package mux

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/edge"
	"github.com/mcpmux/mcpmux/mux/edge/reqid"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// rpcMessage decodes one JSON-RPC message, or the data of the one event of
// a server-sent event stream, into its members.
func rpcMessage(t *testing.T, text string) map[string]json.RawMessage {
	t.Helper()
	if i := strings.Index(text, "data: "); i >= 0 && !strings.HasPrefix(strings.TrimSpace(text), "{") {
		text = text[i+len("data: "):]
		text = text[:strings.IndexByte(text+"\n", '\n')]
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &msg); err != nil {
		t.Fatalf("%q is not a JSON-RPC message: %v", text, err)
	}
	return msg
}

// refusalOf is what a request refused at the edge for its id is answered.
func refusalOf(id, message string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32600,"message":"` + message + `"}}`
}

// A search call's line with id, its arguments echoed by the lab.
func searchLine(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"lab__search","arguments":{"query":"q"}}}`
}

// idCases are ids the edge refuses, with what it answers, and ids it takes,
// each answered under the id exactly as the client wrote it.
var idCases = []struct {
	name, id string
	refused  string // the whole answer, for a refused id
}{
	{"object", `{"a":1}`, refusalOf("null", reqid.BadIDText)},
	{"array", `[1]`, refusalOf("null", reqid.BadIDText)},
	{"true", `true`, refusalOf("null", reqid.BadIDText)},
	{"false", `false`, refusalOf("null", reqid.BadIDText)},
	{"null", `null`, refusalOf("null", reqid.NullIDText)},
	{"30 digits", `123456789012345678901234567890`, ""},
	{"past float64's integers", `9007199254740993`, ""},
	{"negative", `-5`, ""},
	{"fraction", `1.5`, ""},
	{"exponent", `1E2`, ""},
	{"out of float64's range", `1e400`, ""},
	{"small", `42`, ""},
	{"string", `"req-1"`, ""},
}

// Over stdio, on the fast path and through mcp-go alike, an id that is an
// object, an array or a boolean, or a request's null id, is refused with
// -32600 under a null id; every number comes back exactly as written; a
// notification with a null id stays a notification.
func TestStdioRequestIDs(t *testing.T) {
	l := startCallLab(t, "", "")
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slow=%v", slow), func(t *testing.T) {
			s := openSessionAs(t, l.m, "reader")
			defer s.close()
			for _, c := range idCases {
				if c.refused != "" {
					if got := s.answerTo(t, searchLine(c.id), "null"); strings.TrimSpace(got) != c.refused {
						t.Errorf("%s: %s, want %s", c.name, got, c.refused)
					}
					continue
				}
				got := s.answerTo(t, searchLine(c.id), c.id)
				if msg := rpcMessage(t, got); !strings.Contains(string(msg["result"]), `{\"query\":\"q\"}`) {
					t.Errorf("%s: %s, want the search's result under id %s", c.name, got, c.id)
				}
			}
			if got := s.lines(t, `{"jsonrpc":"2.0","id":null,"method":"notifications/roots/list_changed"}`); len(got) != 0 {
				t.Errorf("a notification with a null id was answered: %q", got)
			}
		})
	}
}

// lines sends line and returns the messages written before the answer to
// a ping sent after it.
func (s *stdioSession) lines(t *testing.T, line string) []string {
	t.Helper()
	s.send(line)
	s.syncs++
	sync := fmt.Sprintf(`"sync-%d"`, s.syncs)
	s.send(`{"jsonrpc":"2.0","id":` + sync + `,"method":"ping"}`)
	var got []string
	timeout := time.After(testsupport.Wait)
	for {
		select {
		case msg, ok := <-s.out:
			if !ok {
				t.Fatalf("the session ended after %q", line)
			}
			if id, ok := testsupport.RefAnswerID([]byte(msg)); ok && id == sync {
				return got
			}
			got = append(got, msg)
		case <-timeout:
			t.Fatalf("no answer to the ping after %q", line)
		}
	}
}

// answerTo sends line and returns the first message written after it
// whose id is, byte for byte, id.
func (s *stdioSession) answerTo(t *testing.T, line, id string) string {
	t.Helper()
	s.send(line)
	return s.awaitID(t, id)
}

// awaitID returns the next message written whose id is, byte for byte,
// id, failing after testsupport.Wait.
func (s *stdioSession) awaitID(t *testing.T, id string) string {
	t.Helper()
	timeout := time.After(testsupport.Wait)
	for {
		select {
		case msg, ok := <-s.out:
			if !ok {
				t.Fatalf("the session ended waiting for an answer under %s", id)
			}
			if top, ok := jsonwire.Members([]byte(msg)); ok {
				if m := top.Last("id"); m != nil && msg[m.Start:m.End] == id {
					return msg
				}
			}
		case <-timeout:
			t.Fatalf("no answer under %s", id)
			return ""
		}
	}
}

// await returns the next message written, failing after testsupport.Wait.
func (s *stdioSession) await(t *testing.T) string {
	t.Helper()
	select {
	case msg, ok := <-s.out:
		if !ok {
			t.Fatal("the session ended")
		}
		return msg
	case <-time.After(testsupport.Wait):
		t.Fatal("nothing written")
		return ""
	}
}

// A request whose id is that of a request still in flight on the session
// is refused under that id, and the first goes on undisturbed; ids equal
// as numbers are the same id (7 and 7.0), ids that only a float64 cannot
// tell apart are not. Once answered, an id may be used again.
func TestStdioDuplicateIDInFlight(t *testing.T) {
	l := startCallLab(t, "", "")
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slow=%v", slow), func(t *testing.T) {
			s := openSessionAs(t, l.m, "reader")
			defer s.close()
			for i, c := range []struct{ first, again string }{
				{"7", "7"},
				{"8", "8.0"},
				{`"x"`, `"\u0078"`},
				{"123456789012345678901234567890", "123456789012345678901234567890"},
			} {
				tag := fmt.Sprintf("dup-%v-%d", slow, i)
				s.send(`{"jsonrpc":"2.0","id":` + c.first + `,"method":"tools/call","params":{"name":"lab__hold","arguments":{"tag":"` + tag + `"}}}`)
				if got := <-l.started; got != tag {
					t.Fatalf("started %q", got)
				}
				if got := s.answerTo(t, searchLine(c.again), c.again); strings.TrimSpace(got) != refusalOf(c.again, reqid.DupIDText) {
					t.Errorf("id %s while %s is in flight: %s, want %s", c.again, c.first, got, refusalOf(c.again, reqid.DupIDText))
				}
				close(l.releaseCh(tag))
				if msg := rpcMessage(t, s.awaitID(t, c.first)); !strings.Contains(string(msg["result"]), "released "+tag) {
					t.Errorf("the first call under %s: %v", c.first, msg)
				}
				if msg := rpcMessage(t, s.answerTo(t, searchLine(c.again), c.again)); msg["result"] == nil {
					t.Errorf("id %s once %s was answered: %v", c.again, c.first, msg)
				}
			}
			// Two ids a float64 holds as one are two ids.
			const a, b = "123456789012345678901234567890", "123456789012345678901234567891"
			tag := fmt.Sprintf("near-%v", slow)
			s.send(`{"jsonrpc":"2.0","id":` + a + `,"method":"tools/call","params":{"name":"lab__hold","arguments":{"tag":"` + tag + `"}}}`)
			<-l.started
			if msg := rpcMessage(t, s.answerTo(t, searchLine(b), b)); msg["result"] == nil {
				t.Errorf("id %s while %s is in flight: %v", b, a, msg)
			}
			close(l.releaseCh(tag))
			if msg := rpcMessage(t, s.awaitID(t, a)); !strings.Contains(string(msg["result"]), "released "+tag) {
				t.Errorf("the call under %s: %v", a, msg)
			}
		})
	}
}

// A client's cancellation of a request under an id mcp-go could not hold
// exactly reaches that request.
func TestStdioCancelCarriedID(t *testing.T) {
	l := startCallLab(t, "", "")
	s := openSessionAs(t, l.m, "reader")
	defer s.close()
	const big = "123456789012345678901234567890"
	s.send(`{"jsonrpc":"2.0","id":` + big + `,"method":"tools/call","params":{"name":"lab__hold","arguments":{"tag":"cut"}}}`)
	<-l.started
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + big + `}}`)
	testsupport.WaitFor(t, "the cancelled call to end", func() bool { return strings.Contains(l.log.String(), `"outcome":"cancelled"`) })
	if msg := rpcMessage(t, s.answerTo(t, searchLine("1"), "1")); msg["result"] == nil {
		t.Errorf("after the cancellation: %v", msg)
	}
}

// Over HTTP the same: a bad or null id is refused with 400 and -32600
// under a null id, numbers come back as written, a notification with a
// null id is accepted, and an id in flight on the session is refused under
// it while the first call goes on.
func TestHTTPRequestIDs(t *testing.T) {
	l := startCallLab(t, "", "")
	_, url := serveLab(t, l.m, edge.HTTPOptions{Path: "/mcp", SessionIdleTimeout: time.Hour},
		func(r *http.Request) string { return r.Header.Get("X-Identity") })
	h := &httpMux{m: l.m, url: url}
	sid, code, text := h.open(t, "reader")
	if sid == "" {
		t.Fatalf("initialize: %d %s", code, text)
	}
	for _, c := range idCases {
		code, text, _ := h.send(t, http.MethodPost, "reader", sid, searchLine(c.id))
		if c.refused != "" {
			if code != http.StatusBadRequest || strings.TrimSpace(text) != c.refused {
				t.Errorf("%s: %d %s, want 400 %s", c.name, code, text, c.refused)
			}
			continue
		}
		msg := rpcMessage(t, text)
		if code != http.StatusOK || string(msg["id"]) != c.id || !strings.Contains(string(msg["result"]), `{\"query\":\"q\"}`) {
			t.Errorf("%s: %d %s, want the search's result under id %s", c.name, code, text, c.id)
		}
	}
	if code, text, _ := h.send(t, http.MethodPost, "reader", sid, `{"jsonrpc":"2.0","id":null,"method":"notifications/roots/list_changed"}`); code != http.StatusAccepted {
		t.Errorf("a notification with a null id: %d %s", code, text)
	}

	first := make(chan string, 1)
	go func() {
		_, text, _ := h.send(t, http.MethodPost, "reader", sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lab__hold","arguments":{"tag":"http-dup"}}}`)
		first <- text
	}()
	if got := <-l.started; got != "http-dup" {
		t.Fatalf("started %q", got)
	}
	if code, text, _ := h.send(t, http.MethodPost, "reader", sid, searchLine("7.0")); code != http.StatusBadRequest || strings.TrimSpace(text) != refusalOf("7.0", reqid.DupIDText) {
		t.Errorf("id 7.0 while 7 is in flight: %d %s", code, text)
	}
	// Another session may use the id.
	other, _, _ := h.open(t, "reader")
	if code, text, _ := h.send(t, http.MethodPost, "reader", other, searchLine("7")); code != http.StatusOK || string(rpcMessage(t, text)["id"]) != "7" {
		t.Errorf("id 7 on another session: %d %s", code, text)
	}
	close(l.releaseCh("http-dup"))
	if msg := rpcMessage(t, <-first); string(msg["id"]) != "7" || !strings.Contains(string(msg["result"]), "released http-dup") {
		t.Errorf("the first call under 7: %v", msg)
	}
	if code, text, _ := h.send(t, http.MethodPost, "reader", sid, searchLine("7")); code != http.StatusOK || string(rpcMessage(t, text)["id"]) != "7" {
		t.Errorf("id 7 once answered: %d %s", code, text)
	}

	// A cancellation naming a carried id reaches its request.
	const big = "123456789012345678901234567890"
	cut := make(chan int, 1)
	go func() {
		code, _, _ := h.send(t, http.MethodPost, "reader", sid, `{"jsonrpc":"2.0","id":`+big+`,"method":"tools/call","params":{"name":"lab__hold","arguments":{"tag":"http-cut"}}}`)
		cut <- code
	}()
	<-l.started
	if code, text, _ := h.send(t, http.MethodPost, "reader", sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+big+`}}`); code != http.StatusAccepted {
		t.Errorf("the cancellation: %d %s", code, text)
	}
	testsupport.WaitFor(t, "the cancelled call to end", func() bool { return strings.Contains(l.log.String(), `"outcome":"cancelled"`) })
	<-cut

	// A 2026-07-28 request has no session, and its id comes back as
	// written too.
	params := `{"name":"lab__search","arguments":{"query":"q"},"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"` + mcp.ProtocolVersion20260728 +
		`","` + mcp.MetaKeyClientCapabilities + `":{},"` + mcp.MetaKeyClientInfo + `":{"name":"t","version":"1"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":`+big+`,"method":"tools/call","params":`+params+`}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Identity", "reader")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	for k, v := range mcp.StandardHeaders(mcp.ProtocolVersion20260728, mcp.MethodToolsCall, json.RawMessage(params)) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if msg := rpcMessage(t, string(b)); resp.StatusCode != http.StatusOK || string(msg["id"]) != big || msg["result"] == nil {
		t.Errorf("a 2026-07-28 request under %s: %d %s", big, resp.StatusCode, b)
	}
}
