package fidelity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The catalog side of protocol fidelity, end to end: prompts, resources,
// resource templates, subscriptions, completion, verbatim results and
// definitions, unprefixed children and list_changed, through the real
// mcpmux binary (over its stdio and its HTTP upstream) to real labserver
// children with LAB_FIDELITY (see internal/labserver/fidelity.go), each of
// which records every request it receives.

// The labserver's resources, templates and their exposed forms.
const (
	readmeURI = "file:///lab/readme.txt"
	pixelURI  = "file:///lab/pixel.png"
	notesTmpl = "lab://notes/{name}"
	itemsTmpl = "lab://items/{id}{?fmt}"
	// pixelBlob is the blob of pixelURI: base64 of the PNG signature.
	pixelBlob = "iVBORw0KGgo="
)

func exposed(alias, uri string) string { return "mcpmux://" + alias + "/" + uri }

// fLab is a lab whose children offer the catalog side of fidelity.
type fLab struct {
	*ts.Lab
	requests map[string]string // alias -> the file its requests are recorded in
}

// fidelityLab writes a config whose servers are fidelity labservers. Each
// server keeps its own Env, Hide and Extra on top.
func fidelityLab(t *testing.T, muxLines string, servers ...ts.Server) *fLab {
	t.Helper()
	dir := t.TempDir()
	l := &fLab{requests: map[string]string{}}
	for i := range servers {
		path := filepath.Join(dir, "requests."+servers[i].Alias)
		l.requests[servers[i].Alias] = path
		env := ts.FidelityEnv(path)
		maps.Copy(env, servers[i].Env)
		servers[i].Env = env
	}
	l.Lab = ts.NewLab(t, muxLines, servers...)
	return l
}

// childGot returns the requests with method that alias's child received.
func (l *fLab) childGot(t *testing.T, alias, method string) []ts.ChildRequest {
	t.Helper()
	return ts.ChildRequests(t, l.requests[alias], method)
}

// childGotURI reports how many method requests alias's child received
// for uri.
func (l *fLab) childGotURI(t *testing.T, alias, method, uri string) int {
	t.Helper()
	n := 0
	for _, r := range l.childGot(t, alias, method) {
		var p struct{ URI string }
		_ = json.Unmarshal(r.Params, &p)
		if p.URI == uri {
			n++
		}
	}
	return n
}

// fSess is one upstream session and the notifications it received.
type fSess struct {
	c     *client.Client
	notes *ts.NoteLog
}

// fMux is a running mcpmux and one session per identity.
type fMux struct {
	log  *ts.LogTap
	url  string // the MCP endpoint
	sess map[string]*fSess
	// connect opens one more session as identity (HTTP only).
	connect func(identity string) *fSess
}

// upstream starts mcpmux over one of its upstreams with a session for
// each of ids; the stdio upstream has the one identity "reader".
type upstream struct {
	name  string
	start func(t *testing.T, l *fLab, ids ...string) *fMux
}

var upstreams = []upstream{{"stdio", startStdio}, {"http", startHTTP}}

func startStdio(t *testing.T, l *fLab, ids ...string) *fMux {
	t.Helper()
	if len(ids) != 1 || ids[0] != "reader" {
		t.Fatalf("the stdio upstream serves the one identity reader, not %v", ids)
	}
	m := ts.StartMux(t, l.Lab)
	return &fMux{log: m.Log, sess: map[string]*fSess{"reader": {c: m.Client, notes: ts.RecordNotes(m.Client)}}}
}

func startHTTP(t *testing.T, l *fLab, ids ...string) *fMux {
	t.Helper()
	up := `listen = "127.0.0.1:0"`
	for _, id := range ids {
		up += ts.TokenEntry(id, "sha256", ts.SHA256Hex(ts.FidelityToken(id)))
	}
	l.AddUpstream(t, up)
	h := ts.StartHTTPMux(t, l.Lab, ts.HTTPStart{})
	fm := &fMux{log: h.Log, sess: map[string]*fSess{}, url: h.URL()}
	fm.connect = func(id string) *fSess {
		conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: ts.FidelityToken(id), Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Listen: true, Log: h.Log})
		return &fSess{c: conn.Client, notes: ts.RecordNotes(conn.Client)}
	}
	for _, id := range ids {
		fm.sess[id] = fm.connect(id)
	}
	return fm
}

// names returns the member key of each raw item.
func names(t *testing.T, items []json.RawMessage, key string) []string {
	t.Helper()
	var out []string
	for _, it := range items {
		var m map[string]any
		if err := json.Unmarshal(it, &m); err != nil {
			t.Fatal(err)
		}
		s, _ := m[key].(string)
		out = append(out, s)
	}
	return out
}

// listKeys names, for each list method, the result member that holds its
// items and the member of an item that names it.
var listKeys = map[string]struct{ member, key string }{
	"tools/list":               {"tools", "name"},
	"prompts/list":             {"prompts", "name"},
	"resources/list":           {"resources", "uri"},
	"resources/templates/list": {"resourceTemplates", "uriTemplate"},
}

// listed returns the name (or URI, or template) of each item of every
// page of method.
func (s *fSess) listed(t *testing.T, method string) []string {
	t.Helper()
	k, ok := listKeys[method]
	if !ok {
		t.Fatalf("no list method %s", method)
	}
	return names(t, ts.ListAll(t, s.c, method, k.member), k.key)
}

// checkListed checks that method lists the items want, in any order.
func (s *fSess) checkListed(t *testing.T, method string, want []string) {
	t.Helper()
	if got := s.listed(t, method); !ts.SameSet(got, want) {
		t.Errorf("%s: %v, want %v", method, got, want)
	}
}

// reader gives the identity reader policy and starts mcpmux over up with
// a session for it.
func (l *fLab) reader(t *testing.T, up upstream, policy string) *fSess {
	t.Helper()
	l.WritePolicy(t, "reader", policy)
	return up.start(t, l, "reader").sess["reader"]
}

func compact(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	return b.String()
}

// call calls a tool and returns its raw result.
func (s *fSess) call(t *testing.T, name string, args map[string]any) json.RawMessage {
	t.Helper()
	return ts.MustRPC(t, s.c, "tools/call", map[string]any{"name": name, "arguments": args})
}

// callText calls a tool and returns its text.
func (s *fSess) callText(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	raw := s.call(t, name, args)
	res, err := mcp.ParseCallToolResult(&raw)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: error result %s", name, raw)
	}
	return ts.Text(res)
}

// readContents reads uri and returns its contents.
func (s *fSess) readContents(t *testing.T, uri string) []map[string]any {
	t.Helper()
	raw := ts.MustRPC(t, s.c, "resources/read", map[string]any{"uri": uri})
	var res struct {
		Contents []map[string]any `json:"contents"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("resources/read %s: %v in %s", uri, err, raw)
	}
	return res.Contents
}

// checkRead reads uri and checks that it answers one content item under
// the URI asked for, with the given text (or blob).
func (s *fSess) checkRead(t *testing.T, uri, key, want string) {
	t.Helper()
	cs := s.readContents(t, uri)
	if len(cs) != 1 || cs[0]["uri"] != uri || cs[0][key] != want {
		t.Errorf("resources/read %s: %v, want one item with uri %s and %s %q", uri, cs, uri, key, want)
	}
}

// sameRefusal checks that err answers like ref, with the name each was
// asked under in its message replaced.
func sameRefusal(t *testing.T, what string, err *ts.RPCError, name string, ref *ts.RPCError, refName string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: answered, want a refusal like %v", what, ref)
	case ref == nil:
		t.Fatalf("the unknown %s was answered", refName)
	case err.Code != ref.Code || strings.ReplaceAll(err.Message, name, "NAME") != strings.ReplaceAll(ref.Message, refName, "NAME") ||
		strings.ReplaceAll(string(err.Data), name, "NAME") != strings.ReplaceAll(string(ref.Data), refName, "NAME"):
		t.Errorf("%s: refused with %v, the unknown %s with %v", what, err, refName, ref)
	}
}

// allPrompts are the prompts of a docs and a tickets child, exposed.
var allPrompts = []string{"docs__brief", "docs__greet", "docs__internal_notes", "tickets__brief", "tickets__greet", "tickets__internal_notes"}

// policyCase is one identity with its policy and what it is allowed.
type policyCase struct {
	identity, policy string
	allowed          []string
}

// startPolicies gives each case's identity its policy and starts mcpmux
// over HTTP with a session for each.
func startPolicies(t *testing.T, l *fLab, cases []policyCase) *fMux {
	t.Helper()
	var ids []string
	for _, c := range cases {
		l.WritePolicy(t, c.identity, c.policy)
		ids = append(ids, c.identity)
	}
	return startHTTP(t, l, ids...)
}

// Prompts are listed as alias__name, route to the child under its own name
// with their arguments, and come back with the embedded resource and the
// resource_link in the messages rewritten so that both read back through
// mcpmux; otherwise the result is what the child sent.
func TestFidelityPromptGet(t *testing.T) {
	t.Parallel()
	direct := ts.StartLabDirect(t, "LAB_FIDELITY=1", "LAB_SOURCE=docs")
	args := map[string]any{"topic": "alpha", "style": "short"}
	childSent := compact(t, ts.MustRPC(t, direct, "prompts/get", map[string]any{"name": "brief", "arguments": args}))
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			t.Parallel()
			l := fidelityLab(t, "", ts.Server{Alias: "docs"}, ts.Server{Alias: "tickets"})
			s := l.reader(t, up, "allow = [\"*\"]\nallow_resources = [\"docs\"]\n")

			s.checkListed(t, "prompts/list", allPrompts)

			raw := ts.MustRPC(t, s.c, "prompts/get", map[string]any{"name": "docs__brief", "arguments": args})
			reached := l.childGot(t, "docs", "prompts/get")
			if len(reached) != 1 || string(sortedJSON(t, reached[0].Params)) != `{"arguments":{"style":"short","topic":"alpha"},"name":"brief"}` {
				t.Errorf("the child received prompts/get %v, want one with name brief and the arguments", reached)
			}
			if n := len(l.childGot(t, "tickets", "prompts/get")); n != 0 {
				t.Errorf("tickets received %d prompts/get", n)
			}
			note := "lab://notes/alpha"
			wantRaw := strings.NewReplacer(`"uri":"`+readmeURI+`"`, `"uri":"`+exposed("docs", readmeURI)+`"`,
				`"uri":"`+note+`"`, `"uri":"`+exposed("docs", note)+`"`).Replace(childSent)
			if got := compact(t, raw); got != wantRaw {
				t.Errorf("prompts/get through mcpmux:\n%s\nwant the child's, URIs rewritten:\n%s", got, wantRaw)
			}
			s.checkRead(t, exposed("docs", readmeURI), "text", "docs: readme")
			s.checkRead(t, exposed("docs", note), "text", "docs: note alpha")
		})
	}
}

// Which prompts an identity sees and may get: hide globs over the child's
// names, allow/deny globs over exposed names, allow_read_only never; a
// prompts/get of any other answers exactly as an unknown prompt does, and
// never reaches a child. So does a completion/complete of its arguments:
// -32602 and the text of prompts/get's refusal, not -32603.
func TestFidelityPromptPolicy(t *testing.T) {
	t.Parallel()
	l := fidelityLab(t, "", ts.Server{Alias: "docs", Hide: []string{"internal_*"}}, ts.Server{Alias: "tickets"})
	// allowed: the prompts the identity sees.
	cases := []policyCase{
		{"all", `allow = ["*"]`, []string{"docs__brief", "docs__greet", "tickets__brief", "tickets__greet", "tickets__internal_notes"}},
		{"globs", "allow = [\"docs__*\", \"tickets__brief\"]\ndeny = [\"docs__greet\"]", []string{"docs__brief", "tickets__brief"}},
		{"readonly", `allow_read_only = ["*"]`, nil},
		{"resources", `allow_resources = ["*"]`, nil},
	}
	fm := startPolicies(t, l, cases)
	for _, c := range cases {
		t.Run(c.identity, func(t *testing.T) {
			s := fm.sess[c.identity]
			s.checkListed(t, "prompts/list", c.allowed)
			_, unknown := ts.RPC(t, s.c, "prompts/get", map[string]any{"name": "docs__no_such_prompt"})
			for _, name := range allPrompts {
				res, err := ts.RPC(t, s.c, "prompts/get", map[string]any{"name": name, "arguments": map[string]any{"topic": "x"}})
				if slices.Contains(c.allowed, name) {
					if err != nil {
						t.Errorf("prompts/get %s: %v", name, err)
					}
					continue
				}
				if res != nil {
					t.Errorf("prompts/get %s answered %s", name, res)
				}
				sameRefusal(t, "prompts/get "+name, err, name, unknown, "docs__no_such_prompt")
				res, err = ts.RPC(t, s.c, "completion/complete", ts.CompletePrompt(name))
				if res != nil {
					t.Errorf("completion/complete of %s answered %s", name, res)
				}
				sameRefusal(t, "completion/complete of "+name, err, name, unknown, "docs__no_such_prompt")
			}
			_, err := ts.RPC(t, s.c, "completion/complete", ts.CompletePrompt("docs__no_such_prompt"))
			sameRefusal(t, "completion/complete of an unknown prompt", err, "docs__no_such_prompt", unknown, "docs__no_such_prompt")
			if unknown == nil || unknown.Code != mcp.INVALID_PARAMS {
				t.Errorf("prompts/get of an unknown prompt: %v, want code %d", unknown, mcp.INVALID_PARAMS)
			}
		})
	}
	// Only refused completions were asked for: none reached a child.
	for _, alias := range []string{"docs", "tickets"} {
		if got := l.childGot(t, alias, "completion/complete"); len(got) != 0 {
			t.Errorf("%s received %d refused completions", alias, len(got))
		}
	}
	// Only the gets that were allowed reached a child.
	for alias, want := range map[string]int{"docs": 3, "tickets": 4} {
		if got := len(l.childGot(t, alias, "prompts/get")); got != want {
			t.Errorf("%s received %d prompts/get, want %d (those allowed)", alias, got, want)
		}
	}
	for _, r := range l.childGot(t, "docs", "prompts/get") {
		if strings.Contains(string(r.Params), "internal_notes") {
			t.Errorf("the hidden prompt reached docs: %s", r.Params)
		}
	}
}

// resources/list and resources/templates/list hold every page of every
// child, rewritten, and each item otherwise as the child listed it;
// reads route back with the child's own URI; template expansions read
// back; a tool's resource_link and embedded resource are rewritten and
// read back.
func TestFidelityResources(t *testing.T) {
	t.Parallel()
	direct := ts.StartLabDirect(t, "LAB_FIDELITY=1", "LAB_SOURCE=docs")
	childResources := ts.ListAll(t, direct, "resources/list", "resources")
	childTemplates := ts.ListAll(t, direct, "resources/templates/list", "resourceTemplates")
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			t.Parallel()
			l := fidelityLab(t, "", ts.Server{Alias: "docs"}, ts.Server{Alias: "tickets"})
			s := l.reader(t, up, "allow = [\"*\"]\nallow_resources = [\"*\"]\n")

			// The children page their lists one item at a time.
			for _, m := range []string{"resources/list", "resources/templates/list"} {
				if n := len(l.childGot(t, "docs", m)); n < 2 {
					t.Errorf("docs was asked for %d pages of %s; the test needs the child to page", n, m)
				}
			}
			resources := ts.ListAll(t, s.c, "resources/list", "resources")
			templates := ts.ListAll(t, s.c, "resources/templates/list", "resourceTemplates")
			checkListed(t, "resources/list", resources, childResources, "uri")
			checkListed(t, "resources/templates/list", templates, childTemplates, "uriTemplate")

			reads := []struct{ alias, child, key, want string }{
				{"docs", readmeURI, "text", "docs: readme"},
				{"tickets", readmeURI, "text", "tickets: readme"},
				{"docs", pixelURI, "blob", pixelBlob},
				{"tickets", "lab://notes/beta", "text", "tickets: note beta"},
				{"docs", "lab://items/7?fmt=json", "text", "docs: item 7 json"},
				{"docs", "lab://notes/a%20b", "text", "docs: note a%20b"},
			}
			for _, r := range reads {
				s.checkRead(t, exposed(r.alias, r.child), r.key, r.want)
				if n := l.childGotURI(t, r.alias, "resources/read", r.child); n != 1 {
					t.Errorf("%s received %d resources/read of its %s, want 1", r.alias, n, r.child)
				}
			}

			raw := s.call(t, "docs__link_resource", nil)
			var res struct {
				Content []struct {
					Type     string
					URI      string
					Resource struct{ URI, Blob string }
				}
			}
			if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) != 3 {
				t.Fatalf("docs__link_resource: %s (%v)", raw, err)
			}
			if c := res.Content[1]; c.Type != "resource_link" || c.URI != exposed("docs", readmeURI) {
				t.Errorf("resource_link: %+v, want uri %s", c, exposed("docs", readmeURI))
			}
			if c := res.Content[2]; c.Type != "resource" || c.Resource.URI != exposed("docs", pixelURI) || c.Resource.Blob != pixelBlob {
				t.Errorf("embedded resource: %+v, want uri %s", c, exposed("docs", pixelURI))
			}
			s.checkRead(t, res.Content[1].URI, "text", "docs: readme")
			s.checkRead(t, res.Content[2].Resource.URI, "blob", pixelBlob)
		})
	}
}

// checkListed checks that got is each of the two children's (docs first,
// then tickets) items of want, with key rewritten and nothing else changed.
func checkListed(t *testing.T, method string, got, child []json.RawMessage, key string) {
	t.Helper()
	var want []string
	for _, alias := range []string{"docs", "tickets"} {
		for _, it := range child {
			var m map[string]json.RawMessage
			_ = json.Unmarshal(it, &m)
			var id string
			_ = json.Unmarshal(m[key], &id)
			v, _ := json.Marshal(exposed(alias, id))
			want = append(want, strings.Replace(compact(t, it), `"`+key+`":`+string(m[key]), `"`+key+`":`+string(v), 1))
		}
	}
	var have []string
	for _, it := range got {
		have = append(have, compact(t, it))
	}
	if !slices.Equal(have, want) {
		t.Errorf("%s:\n%s\nwant:\n%s", method, strings.Join(have, "\n"), strings.Join(want, "\n"))
	}
}

// A subscription reaches the child under its own URI; the child's
// notifications/resources/updated comes back under the URI the client
// subscribed with, fields the child added kept; after unsubscribing, the
// child no longer holds the subscription.
func TestFidelitySubscribe(t *testing.T) {
	t.Parallel()
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			t.Parallel()
			l := fidelityLab(t, "", ts.Server{Alias: "docs"})
			s := l.reader(t, up, "allow = [\"*\"]\nallow_resources = [\"docs\"]\n")
			uri := exposed("docs", readmeURI)

			ts.MustRPC(t, s.c, "resources/subscribe", map[string]any{"uri": uri})
			if n := l.childGotURI(t, "docs", "resources/subscribe", readmeURI); n != 1 {
				t.Errorf("docs received %d resources/subscribe of %s, want 1", n, readmeURI)
			}
			from := s.notes.Len()
			if got := s.callText(t, "docs__touch", map[string]any{"uri": readmeURI}); got != "notified: "+readmeURI {
				t.Fatalf("docs__touch: %q", got)
			}
			i := s.notes.Await(t, "resources/updated", from, ts.Method(string(mcp.MethodNotificationResourceUpdated)))
			n := s.notes.All()[i]
			if n.Params.AdditionalFields["uri"] != uri || n.Params.AdditionalFields["x-lab-note"] != "kept" {
				t.Errorf("resources/updated params %v, want uri %s and x-lab-note kept", n.Params.AdditionalFields, uri)
			}

			ts.MustRPC(t, s.c, "resources/unsubscribe", map[string]any{"uri": uri})
			if n := l.childGotURI(t, "docs", "resources/unsubscribe", readmeURI); n != 1 {
				t.Errorf("docs received %d resources/unsubscribe of %s, want 1", n, readmeURI)
			}
			if got := s.callText(t, "docs__touch", map[string]any{"uri": readmeURI}); got != "not subscribed: "+readmeURI {
				t.Errorf("docs__touch after unsubscribing: %q", got)
			}
		})
	}
}

// Two sessions subscribe to different resources of one child: each
// update reaches only the session subscribed to it. The second update
// ends the window in which the first could have reached the wrong one.
func TestFidelityUpdateReachesOnlyTheSubscriber(t *testing.T) {
	t.Parallel()
	l := fidelityLab(t, "", ts.Server{Alias: "docs"})
	l.WritePolicy(t, "reader", "allow = [\"*\"]\nallow_resources = [\"docs\"]\n")
	fm := startHTTP(t, l, "reader")
	one, two := fm.sess["reader"], fm.connect("reader")
	ts.MustRPC(t, one.c, "resources/subscribe", map[string]any{"uri": exposed("docs", readmeURI)})
	ts.MustRPC(t, two.c, "resources/subscribe", map[string]any{"uri": exposed("docs", pixelURI)})
	updated := string(mcp.MethodNotificationResourceUpdated)
	one.callText(t, "docs__touch", map[string]any{"uri": readmeURI})
	one.notes.Await(t, "readme updated at the first session", 0, ts.Method(updated))
	one.callText(t, "docs__touch", map[string]any{"uri": pixelURI})
	i := two.notes.Await(t, "pixel updated at the second session", 0, ts.Method(updated))
	for _, c := range []struct {
		name string
		s    *fSess
		n    int
		want string
	}{{"first", one, one.notes.Len(), exposed("docs", readmeURI)}, {"second", two, i + 1, exposed("docs", pixelURI)}} {
		var uris []any
		for _, n := range c.s.notes.All()[:c.n] {
			if n.Method == updated {
				uris = append(uris, n.Params.AdditionalFields["uri"])
			}
		}
		if len(uris) != 1 || uris[0] != c.want {
			t.Errorf("the %s session received updates of %v, want only %s", c.name, uris, c.want)
		}
	}
	// The first session's window ends with the ping's answer.
	if err := one.c.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := ts.Count(one.notes.All(), updated); n != 1 {
		t.Errorf("the first session received %d updates, want 1", n)
	}
}

// allow_resources grants by alias: listing, reading and subscribing.
// Without it nothing is listed and every read is refused exactly as an
// unknown URI is, and never reaches the child.
func TestFidelityResourcePolicy(t *testing.T) {
	t.Parallel()
	l := fidelityLab(t, "", ts.Server{Alias: "docs"}, ts.Server{Alias: "tickets"})
	// allowed: the aliases whose resources the identity is granted.
	cases := []policyCase{
		{"docs-only", "allow = [\"*\"]\nallow_resources = [\"docs\"]", []string{"docs"}},
		{"glob", `allow_resources = ["tick*"]`, []string{"tickets"}},
		{"everything", `allow_resources = ["*"]`, []string{"docs", "tickets"}},
		{"tools-only", `allow = ["*"]`, nil},
		{"readonly", `allow_read_only = ["*"]`, nil},
	}
	fm := startPolicies(t, l, cases)
	for _, c := range cases {
		t.Run(c.identity, func(t *testing.T) {
			s := fm.sess[c.identity]
			var wantRes, wantTmpl []string
			for _, alias := range c.allowed {
				wantRes = append(wantRes, exposed(alias, pixelURI), exposed(alias, readmeURI))
				wantTmpl = append(wantTmpl, exposed(alias, itemsTmpl), exposed(alias, notesTmpl))
			}
			s.checkListed(t, "resources/list", wantRes)
			s.checkListed(t, "resources/templates/list", wantTmpl)
			unknownURI := exposed("nosuchserver", readmeURI)
			_, unknown := ts.RPC(t, s.c, "resources/read", map[string]any{"uri": unknownURI})
			_, unknownSub := ts.RPC(t, s.c, "resources/subscribe", map[string]any{"uri": unknownURI})
			for _, alias := range []string{"docs", "tickets"} {
				// A URI no one else reads, so that the child's record tells
				// whether this identity's read reached it.
				child := "lab://notes/" + c.identity
				uri := exposed(alias, child)
				before := l.childGotURI(t, alias, "resources/read", child)
				res, err := ts.RPC(t, s.c, "resources/read", map[string]any{"uri": uri})
				after := l.childGotURI(t, alias, "resources/read", child)
				if slices.Contains(c.allowed, alias) {
					if err != nil || after != before+1 {
						t.Errorf("resources/read %s: %v; the child received %d reads", uri, err, after-before)
					}
					continue
				}
				if res != nil {
					t.Errorf("resources/read %s answered %s", uri, res)
				}
				sameRefusal(t, "resources/read "+uri, err, uri, unknown, unknownURI)
				if after != before {
					t.Errorf("a refused read of %s reached %s", uri, alias)
				}
				_, err = ts.RPC(t, s.c, "resources/subscribe", map[string]any{"uri": exposed(alias, readmeURI)})
				sameRefusal(t, "resources/subscribe", err, exposed(alias, readmeURI), unknownSub, unknownURI)
			}
		})
	}
	for _, alias := range []string{"docs", "tickets"} {
		if n := len(l.childGot(t, alias, "resources/subscribe")); n != 0 {
			t.Errorf("%s received %d refused subscriptions", alias, n)
		}
	}
}

// completion/complete reaches the child that owns the prompt or the
// template, under the child's own name or template.
func TestFidelityCompletion(t *testing.T) {
	t.Parallel()
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			t.Parallel()
			l := fidelityLab(t, "", ts.Server{Alias: "docs"}, ts.Server{Alias: "tickets"})
			s := l.reader(t, up, "allow = [\"*\"]\nallow_resources = [\"*\"]\n")
			cases := []struct {
				ref       map[string]any
				arg, val  string
				want      []string
				childRef  string
				alias     string
				otherSeen string
			}{
				{map[string]any{"type": "ref/prompt", "name": "tickets__brief"}, "style", "f", []string{"formal", "friendly"},
					`{"name":"brief","type":"ref/prompt"}`, "tickets", "docs"},
				{map[string]any{"type": "ref/resource", "uri": exposed("docs", notesTmpl)}, "name", "al", []string{"alpha", "alpine"},
					`{"type":"ref/resource","uri":"lab://notes/{name}"}`, "docs", "tickets"},
			}
			for _, c := range cases {
				before := len(l.childGot(t, c.otherSeen, "completion/complete"))
				raw := ts.MustRPC(t, s.c, "completion/complete", map[string]any{"ref": c.ref, "argument": map[string]any{"name": c.arg, "value": c.val}})
				var res struct{ Completion mcp.Completion }
				if err := json.Unmarshal(raw, &res); err != nil || !slices.Equal(res.Completion.Values, c.want) {
					t.Errorf("complete %v %s=%q: %s, want %v", c.ref, c.arg, c.val, raw, c.want)
				}
				got := l.childGot(t, c.alias, "completion/complete")
				if len(got) == 0 {
					t.Fatalf("%s received no completion/complete", c.alias)
				}
				var p struct{ Ref json.RawMessage }
				_ = json.Unmarshal(got[len(got)-1].Params, &p)
				if r := compact(t, sortedJSON(t, p.Ref)); r != c.childRef {
					t.Errorf("%s received ref %s, want %s", c.alias, r, c.childRef)
				}
				if n := len(l.childGot(t, c.otherSeen, "completion/complete")); n != before {
					t.Errorf("%s received a completion for %s's %v", c.otherSeen, c.alias, c.ref)
				}
			}
		})
	}
}

// sortedJSON re-encodes an object with its keys sorted.
func sortedJSON(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return b
}

// A result with fields no spec defines at every level, numbers beyond
// float64 and characters encoding/json escapes arrives byte for byte
// (after compaction) as the child sent it; tool definitions keep the
// child's annotations exactly, unknown keys and all, and gain none where
// the child sent none.
func TestFidelityVerbatim(t *testing.T) {
	t.Parallel()
	direct := ts.StartLabDirect(t, "LAB_FIDELITY=1", "LAB_SOURCE=docs")
	childResult := compact(t, ts.MustRPC(t, direct, "tools/call", map[string]any{"name": "verbatim"}))
	if !strings.Contains(childResult, "12345678901234567890") || !strings.Contains(childResult, "<&>") {
		t.Fatalf("the labserver's verbatim result is not what this test is about: %s", childResult)
	}
	childDefs := map[string]string{}
	for _, d := range ts.ListAll(t, direct, "tools/list", "tools") {
		var head struct{ Name string }
		_ = json.Unmarshal(d, &head)
		childDefs[head.Name] = compact(t, d)
	}
	if strings.Contains(childDefs["bare"], `"annotations":`) || !strings.Contains(childDefs["odd_annotations"], "x-lab-hint") {
		t.Fatalf("the labserver's raw definitions are not what this test is about: %v", childDefs)
	}
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			t.Parallel()
			l := fidelityLab(t, "", ts.Server{Alias: "docs"})
			s := l.reader(t, up, `allow = ["*"]`)
			if got := compact(t, s.call(t, "docs__verbatim", nil)); got != childResult {
				t.Errorf("docs__verbatim through mcpmux:\n%s\nthe child sent:\n%s", got, childResult)
			}
			listed := map[string]string{}
			for _, d := range ts.ListAll(t, s.c, "tools/list", "tools") {
				var head struct{ Name string }
				_ = json.Unmarshal(d, &head)
				listed[head.Name] = compact(t, d)
			}
			for _, name := range []string{"odd_annotations", "bare", "echo"} {
				want := strings.Replace(childDefs[name], `"name":"`+name+`"`, `"name":"docs__`+name+`"`, 1)
				if got := listed["docs__"+name]; got != want {
					t.Errorf("docs__%s listed as\n%s\nwant the child's definition renamed:\n%s", name, got, want)
				}
			}
		})
	}
}

// prefix = false on one of two children: its names and URIs are exposed
// bare, the other's prefixed; reads, gets and links route and stay bare;
// policy globs match the exposed names.
func TestFidelityUnprefixed(t *testing.T) {
	t.Parallel()
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			t.Parallel()
			l := fidelityLab(t, "", ts.Server{Alias: "main", Extra: "prefix = false"}, ts.Server{Alias: "docs"})
			s := l.reader(t, up, "allow = [\"s*\", \"brief\", \"link_resource\", \"docs__echo\", \"docs__brief\"]\nallow_resources = [\"*\"]\n")

			s.checkListed(t, "tools/list", []string{"search", "slow", "spawn_grandchild", "link_resource", "docs__echo"})
			s.checkListed(t, "prompts/list", []string{"brief", "docs__brief"})
			s.checkListed(t, "resources/list", []string{pixelURI, readmeURI, exposed("docs", pixelURI), exposed("docs", readmeURI)})
			s.checkListed(t, "resources/templates/list", []string{itemsTmpl, notesTmpl, exposed("docs", itemsTmpl), exposed("docs", notesTmpl)})

			if got := s.callText(t, "search", map[string]any{"query": "public"}); got != "main: public evidence" {
				t.Errorf("search: %q", got)
			}
			s.checkRead(t, readmeURI, "text", "main: readme")
			s.checkRead(t, "lab://notes/gamma", "text", "main: note gamma")
			s.checkRead(t, exposed("docs", readmeURI), "text", "docs: readme")
			if n := l.childGotURI(t, "main", "resources/read", "lab://notes/gamma"); n != 1 {
				t.Errorf("main received %d reads of lab://notes/gamma", n)
			}
			raw := ts.MustRPC(t, s.c, "prompts/get", map[string]any{"name": "brief", "arguments": map[string]any{"topic": "t"}})
			if !strings.Contains(string(raw), `"uri":"`+readmeURI+`"`) || !strings.Contains(string(raw), `"uri":"lab://notes/t"`) {
				t.Errorf("prompts/get brief of the unprefixed child: URIs not bare: %s", raw)
			}
			if got := l.childGot(t, "main", "prompts/get"); len(got) != 1 || !strings.Contains(string(got[0].Params), `"name":"brief"`) {
				t.Errorf("main received prompts/get %v", got)
			}
			if raw := s.call(t, "link_resource", nil); !strings.Contains(string(raw), `"uri":"`+readmeURI+`"`) {
				t.Errorf("link_resource of the unprefixed child: %s", raw)
			}
		})
	}
}

// Two unprefixed children that list the same names and URIs: the server
// listed first keeps each bare, the other's is exposed under its prefixed
// name or rewritten URI, the log says so, and both route.
func TestFidelityUnprefixedCollision(t *testing.T) {
	t.Parallel()
	l := fidelityLab(t, "", ts.Server{Alias: "first", Extra: "prefix = false"}, ts.Server{Alias: "second", Extra: "prefix = false"})
	l.WritePolicy(t, "reader", "allow = [\"search\", \"second__search\", \"brief\", \"second__brief\"]\nallow_resources = [\"*\"]\n")
	m := startStdio(t, l, "reader")
	s := m.sess["reader"]

	s.checkListed(t, "tools/list", []string{"search", "second__search"})
	s.checkListed(t, "prompts/list", []string{"brief", "second__brief"})
	s.checkListed(t, "resources/list", []string{pixelURI, readmeURI, exposed("second", pixelURI), exposed("second", readmeURI)})
	s.checkListed(t, "resources/templates/list", []string{itemsTmpl, notesTmpl, exposed("second", itemsTmpl), exposed("second", notesTmpl)})
	for _, c := range []struct{ name, want string }{{"search", "first: public evidence"}, {"second__search", "second: public evidence"}} {
		if got := s.callText(t, c.name, map[string]any{"query": "public"}); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	s.checkRead(t, readmeURI, "text", "first: readme")
	s.checkRead(t, exposed("second", readmeURI), "text", "second: readme")
	s.checkRead(t, "lab://notes/x", "text", "first: note x")
	s.checkRead(t, exposed("second", "lab://notes/x"), "text", "second: note x")
	for _, c := range []struct{ kind, exposed string }{
		{"tool", "second__search"}, {"prompt", "second__brief"},
		{"resource", exposed("second", readmeURI)}, {"resource template", exposed("second", notesTmpl)},
	} {
		m.log.WaitLine(t, "the log saying "+c.exposed+" lost its bare name",
			ts.Msg("exposed under its prefixed name: a server listed earlier exposes the bare one", "kind", c.kind, "exposed", c.exposed, "bare_kept_by", "first"))
	}
}

// One change in a child's list makes mcpmux tell each session exactly
// once, and only the sessions whose identity's view changed. The window
// opens with a resources/updated, which reaches each session after
// whatever mcpmux queued for it before (the children starting), and closes
// with a later, different change every session sees: mcpmux publishes
// catalogs one at a time, so whatever it sent for the first change reached
// a session before what it sent for the second.
func TestFidelityListChangedOnce(t *testing.T) {
	t.Parallel()
	kinds := []struct {
		name, trigger, method string
		// closer is a tool of tickets whose change every session sees,
		// announced by closerMethod.
		closer, closerMethod string
	}{
		{"tools", "docs__notify_changed", string(mcp.MethodNotificationToolsListChanged),
			"tickets__toggle_prompt", string(mcp.MethodNotificationPromptsListChanged)},
		{"prompts", "docs__toggle_prompt", string(mcp.MethodNotificationPromptsListChanged),
			"tickets__notify_changed", string(mcp.MethodNotificationToolsListChanged)},
		{"resources", "docs__toggle_resource", string(mcp.MethodNotificationResourcesListChanged),
			"tickets__notify_changed", string(mcp.MethodNotificationToolsListChanged)},
	}
	updated := string(mcp.MethodNotificationResourceUpdated)
	for _, up := range upstreams {
		for _, k := range kinds {
			t.Run(up.name+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				l := fidelityLab(t, "", ts.Server{Alias: "docs"}, ts.Server{Alias: "tickets"})
				// reader sees everything; watcher (HTTP only) sees tickets'
				// tools, prompts and resources, so no change of docs.
				l.WritePolicy(t, "reader", "allow = [\"*\"]\nallow_resources = [\"*\"]\n")
				l.WritePolicy(t, "watcher", "allow = [\"tickets__*\"]\nallow_resources = [\"tickets\"]\n")
				ids := []string{"reader"}
				if up.name == "http" {
					ids = append(ids, "watcher")
				}
				fm := up.start(t, l, ids...)
				want := map[string]int{"reader": 1, "watcher": 0}
				reader := fm.sess["reader"]

				open := map[string]int{}
				for _, s := range fm.sess {
					ts.MustRPC(t, s.c, "resources/subscribe", map[string]any{"uri": exposed("tickets", readmeURI)})
				}
				reader.callText(t, "tickets__touch", map[string]any{"uri": readmeURI})
				for id, s := range fm.sess {
					open[id] = s.notes.Await(t, "resources/updated opening the window at "+id, 0, ts.Method(updated)) + 1
				}

				reader.callText(t, k.trigger, nil)
				reader.notes.Await(t, k.method+" for "+k.trigger, open["reader"], ts.Method(k.method))
				reader.callText(t, k.closer, nil)
				for id, s := range fm.sess {
					end := s.notes.Await(t, k.closerMethod+" closing the window at "+id, open[id], ts.Method(k.closerMethod))
					if n := ts.Count(s.notes.All()[open[id]:end], k.method); n != want[id] {
						t.Errorf("%s was told %s %d times for one change, want %d (window %v)", id, k.method, n, want[id], methods(s.notes.All()[open[id]:end]))
					}
					// The closing change itself is told once too: count what
					// arrived before the answers to a list and a ping.
					ts.ListAll(t, s.c, "tools/list", "tools")
					if err := s.c.Ping(t.Context()); err != nil {
						t.Fatal(err)
					}
					if n := ts.Count(s.notes.All()[end:], k.closerMethod); n != 1 {
						t.Errorf("%s was told %s %d times for one change, want 1 (got %v)", id, k.closerMethod, n, methods(s.notes.All()[end:]))
					}
				}
			})
		}
	}
}

func methods(notes []mcp.JSONRPCNotification) []string {
	var out []string
	for _, n := range notes {
		out = append(out, n.Method)
	}
	return out
}

// The upstream initialize declares prompts, resources (with subscribe),
// completions and logging only when a child does.
func TestFidelityDeclaredCapabilities(t *testing.T) {
	t.Parallel()
	for _, up := range upstreams {
		for _, fidelity := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fidelity=%v", up.name, fidelity), func(t *testing.T) {
				t.Parallel()
				var l *fLab
				if fidelity {
					l = fidelityLab(t, "", ts.Server{Alias: "plain", Env: map[string]string{"LAB_FIDELITY": "0"}}, ts.Server{Alias: "docs"})
				} else {
					l = fidelityLab(t, "", ts.Server{Alias: "plain", Env: map[string]string{"LAB_FIDELITY": "0"}})
				}
				caps := l.reader(t, up, `allow = ["*"]`).c.GetServerCapabilities()
				got := map[string]bool{
					"prompts":     caps.Prompts != nil,
					"resources":   caps.Resources != nil,
					"subscribe":   caps.Resources != nil && caps.Resources.Subscribe,
					"completions": caps.Completions != nil,
					"logging":     caps.Logging != nil,
				}
				for what, has := range got {
					if has != fidelity {
						t.Errorf("initialize declares %s: %v, want %v (capabilities %+v)", what, has, fidelity, caps)
					}
				}
				if caps.Tools == nil {
					t.Error("initialize declares no tools")
				}
			})
		}
	}
}

// A child is subscribed to a resource once, however many sessions
// subscribe, and unsubscribed when its last subscriber unsubscribes or
// ends; an unsubscribe from a session that never subscribed reaches no
// child.
func TestFidelitySubscribedOncePerResource(t *testing.T) {
	t.Parallel()
	l := fidelityLab(t, "", ts.Server{Alias: "docs"})
	l.WritePolicy(t, "reader", "allow = [\"*\"]\nallow_resources = [\"docs\"]\n")
	fm := startHTTP(t, l, "reader")
	one, two, three := fm.sess["reader"], fm.connect("reader"), fm.connect("reader")
	uri := exposed("docs", readmeURI)
	sub, unsub := string(mcp.MethodResourcesSubscribe), string(mcp.MethodResourcesUnsubscribe)
	ts.MustRPC(t, one.c, sub, map[string]any{"uri": uri})
	ts.MustRPC(t, two.c, sub, map[string]any{"uri": uri})
	ts.MustRPC(t, three.c, unsub, map[string]any{"uri": uri})
	ts.MustRPC(t, one.c, unsub, map[string]any{"uri": uri})
	if n := l.childGotURI(t, "docs", sub, readmeURI); n != 1 {
		t.Errorf("the child was subscribed %d times, want once", n)
	}
	if n := l.childGotURI(t, "docs", unsub, readmeURI); n != 0 {
		t.Errorf("the child was unsubscribed %d times while a session is subscribed", n)
	}
	// The last subscriber ends its session. (mcp-go's client sends its
	// DELETE without the bearer token, so the test sends it.)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, fm.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ts.FidelityToken("reader"))
	req.Header.Set(server.HeaderKeySessionID, two.c.GetSessionId())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", resp.Status)
	}
	ts.WaitFor(t, "the child to be unsubscribed", func() bool { return l.childGotURI(t, "docs", unsub, readmeURI) == 1 })
}

// A child's JSON-RPC error to a read reaches the client as the child sent
// it (code, message, data), and a URI no child owns gets the protocol's
// "Resource not found" (-32002) naming it.
func TestFidelityErrorsRelayed(t *testing.T) {
	t.Parallel()
	const missing = "lab://no/such/thing"
	direct := ts.StartLabDirect(t, "LAB_FIDELITY=1", "LAB_SOURCE=docs")
	_, childSent := ts.RPC(t, direct, "resources/read", map[string]any{"uri": missing})
	if childSent == nil {
		t.Fatal("the child read a resource it does not have")
	}
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			t.Parallel()
			l := fidelityLab(t, "", ts.Server{Alias: "docs"})
			s := l.reader(t, up, "allow = [\"*\"]\nallow_resources = [\"docs\"]\n")
			_, got := ts.RPC(t, s.c, "resources/read", map[string]any{"uri": exposed("docs", missing)})
			if got == nil || got.Code != childSent.Code || got.Message != childSent.Message || !bytes.Equal(got.Data, childSent.Data) {
				t.Errorf("the child's error came through as %v, want %v", got, childSent)
			}
			unknown := exposed("nosuchserver", missing)
			_, got = ts.RPC(t, s.c, "resources/read", map[string]any{"uri": unknown})
			if got == nil || got.Code != mcp.RESOURCE_NOT_FOUND || got.Message != "Resource not found" ||
				string(got.Data) != `{"uri":"`+unknown+`"}` {
				t.Errorf("an unknown URI was refused with %v", got)
			}
		})
	}
}
