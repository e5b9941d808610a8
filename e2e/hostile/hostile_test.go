package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The tests here run mcpmux over a child that misbehaves on purpose
// (internal/hostile): a catalog full of edge cases, stderr floods, a line
// that never ends, lines that are not JSON, answers to requests nobody made,
// JSON-RPC errors. mcpmux must stay up and keep serving through all of it.

// hostileAudit waits for the audit line of the first call to tool and
// returns it.
func hostileAudit(t *testing.T, m *ts.Mux, tool string) map[string]any {
	t.Helper()
	return m.Log.WaitLine(t, "audit line of "+tool, func(l map[string]any) bool {
		return l["log"] == "audit" && l["message"] == "call" && l["tool"] == tool
	})
}

// childSaw waits until the hostile child reported, on its stderr, a line
// with the given text.
func childSaw(t *testing.T, m *ts.Mux, text string) {
	t.Helper()
	m.Log.WaitLine(t, "child stderr "+text, ts.Msg("server stderr", "server", "h", "stderr", text))
}

func stillUp(t *testing.T, m *ts.Mux) {
	t.Helper()
	select {
	case <-m.Exited():
		t.Fatalf("mcpmux exited: %v\nlog:\n%s", m.ExitErr(), m.Log.Text())
	default:
	}
	if res := m.MustCall("h__echo", map[string]any{"alive": true}); res.IsError || ts.Text(res) != `{"alive":true}` {
		t.Fatalf("echo after the trouble: isError=%v text=%q\nlog:\n%s", res.IsError, ts.Text(res), m.Log.Text())
	}
}

const hostileEcho = `{"name":"echo","inputSchema":{"type":"object"}}`

// One tools/list full of edge cases: each bad tool is left out with a log
// line saying why, names are made safe and short the same way every run, and
// the good tools work.
func TestHostileCatalog(t *testing.T) {
	t.Parallel()
	var fetched atomic.Int64
	refs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer refs.Close()

	long := strings.Repeat("abcdefghij", 30) // 300 characters
	obj := `"inputSchema":{"type":"object"}`
	tools := `[
		{"name":"echo","description":"first",` + obj + `},
		{"name":"echo","description":"second","inputSchema":{"type":"object","properties":{"x":{"type":"integer"}}}},
		{"name":"schema_true","inputSchema":true},
		{"name":"schema_string","inputSchema":{"type":"string"}},
		{"name":"remote_ref","inputSchema":{"type":"object","properties":{"a":{"$ref":"` + refs.URL + `/a.json"}}}},
		{"name":"remote_ref_root","inputSchema":{"$ref":"` + refs.URL + `/root.json"}},
		{"name":"remote_ref_rel","inputSchema":{"$id":"` + refs.URL + `/base.json","type":"object","properties":{"a":{"$ref":"other.json"}}}},
		{"name":"id_a","inputSchema":{"$id":"urn:x","type":"object","properties":{"v":{"type":"string"}},"required":["v"]}},
		{"name":"id_b","inputSchema":{"$id":"urn:x","type":"object","properties":{"v":{"type":"integer"}},"required":["v"]}},
		{"name":"task_required",` + obj + `,"execution":{"taskSupport":"required"}},
		{"name":"task_optional",` + obj + `,"execution":{"taskSupport":"optional"}},
		{"name":"` + long + `",` + obj + `},
		{"name":"dot.name",` + obj + `},
		{"name":"slash/name",` + obj + `},
		{"name":"space name",` + obj + `},
		{"name":"dot_name",` + obj + `},
		{"name":"header_object","inputSchema":{"type":"object","properties":{"q":{"type":"object","x-mcp-header":"Q"}}}},
		{"name":"header_untyped","inputSchema":{"type":"object","properties":{"q":{"x-mcp-header":"Q"}}}},
		{"name":"header_token","inputSchema":{"type":"object","properties":{"q":{"type":"string","x-mcp-header":"bad header"}}}},
		{"name":"header_empty","inputSchema":{"type":"object","properties":{"q":{"type":"string","x-mcp-header":""}}}},
		{"name":"header_dup","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"object","properties":{"c":{"type":"string","x-mcp-header":"region"}}}}}},
		{"name":"header_ok","inputSchema":{"type":"object","properties":{"q":{"type":"string","x-mcp-header":"Query"}}}},
		{"name":42,` + obj + `}
	]`
	lab := ts.HostileLab(t, "", tools, nil)
	m := ts.StartMux(t, lab)
	names := m.ToolNames()

	// Left out, each with its reason.
	leftOut := map[string]string{
		"echo#1":          "the server lists this name twice; the first definition is kept",
		"schema_true":     "its inputSchema is not an object schema",
		"schema_string":   "its inputSchema is not an object schema",
		"remote_ref":      "its inputSchema does not compile",
		"remote_ref_root": "its inputSchema does not compile",
		"remote_ref_rel":  "its inputSchema does not compile",
		"task_required":   "it can only run as a task, and the server does not declare tasks for tools/call",
		"header_object":   "invalid x-mcp-header annotations",
		"header_untyped":  "invalid x-mcp-header annotations",
		"header_token":    "invalid x-mcp-header annotations",
		"header_empty":    "invalid x-mcp-header annotations",
		"header_dup":      "invalid x-mcp-header annotations",
		"#22":             "not a valid tool definition",
	}
	for tool, why := range leftOut {
		m.Log.WaitLine(t, tool+" left out", ts.Msg("tool left out: "+why, "server", "h", "child_tool", tool))
		if !strings.Contains(tool, "#") && ts.Contains(names, "h__"+tool) {
			t.Errorf("%s is listed: %v", tool, names)
		}
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the remote $ref server was asked %d times; want never", n)
	}

	// Listed: the rest, in the child's order, with safe and short names.
	if len(names) != 10 {
		t.Fatalf("listed %d tools, want 10: %q", len(names), names)
	}
	longName := names[4]
	want := []string{"h__echo", "h__id_a", "h__id_b", "h__task_optional", longName,
		names[5], "h__slash_name", "h__space_name", "h__dot_name", "h__header_ok"}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("tools = %q, want %q", names, want)
		}
	}
	if len(longName) > 48 || !strings.HasPrefix(longName, "h__abcdefghij") {
		t.Errorf("300-character name exposed as %q (%d characters), want ≤ 48 starting with its own start", longName, len(longName))
	}
	// dot_name keeps its own name though dot.name, which would take it
	// once rewritten, is listed first.
	if !strings.HasPrefix(names[5], "h__dot_name_") || len(names[5]) > 48 {
		t.Errorf("dot.name, which collides with dot_name, is exposed as %q", names[5])
	}
	m.Log.WaitLine(t, "collision logged", ts.Msg("exposed name collided with another tool of this server; a hash was appended",
		"child_tool", "dot.name", "tool", names[5]))

	// Definitions as listed: the first echo; schemas and execution kept as
	// the child wrote them.
	for _, raw := range m.RawTools() {
		var def map[string]json.RawMessage
		if err := json.Unmarshal(raw, &def); err != nil {
			t.Fatal(err)
		}
		var name string
		_ = json.Unmarshal(def["name"], &name)
		switch name {
		case "h__task_optional":
			if string(def["execution"]) != `{"taskSupport":"optional"}` {
				t.Errorf("h__task_optional lost its execution: %s", raw)
			}
		case "h__echo":
			if string(def["description"]) != `"first"` {
				t.Errorf("h__echo is not the first definition: %s", raw)
			}
		case "h__header_ok":
			if !bytes.Contains(def["inputSchema"], []byte(`"x-mcp-header":"Query"`)) {
				t.Errorf("h__header_ok lost its annotation: %s", raw)
			}
		}
	}

	// The same names on another run.
	if again := ts.StartMux(t, lab).ToolNames(); strings.Join(again, ",") != strings.Join(names, ",") {
		t.Errorf("second run lists %q, first %q", again, names)
	}

	// The good tools work and reach the child under their own names.
	for exposed, orig := range map[string]string{
		"h__echo": "echo", "h__task_optional": "task_optional", longName: long,
		"h__dot_name": "dot.name", "h__slash_name": "slash/name", "h__space_name": "space name",
		names[8]: "dot_name", "h__header_ok": "header_ok",
	} {
		res := m.MustCall(exposed, map[string]any{"q": exposed})
		if res.IsError || ts.Text(res) != fmt.Sprintf(`{"q":%q}`, exposed) {
			t.Errorf("%s: isError=%v text=%q", exposed, res.IsError, ts.Text(res))
		}
		childSaw(t, m, "hostile call "+orig)
	}
	// Tools sharing an $id each keep their own schema.
	for _, c := range []struct {
		tool    string
		v       any
		isError bool
	}{
		{"h__id_a", "s", false}, {"h__id_a", 1, true},
		{"h__id_b", 1, false}, {"h__id_b", "s", true},
	} {
		res := m.MustCall(c.tool, map[string]any{"v": c.v})
		if res.IsError != c.isError || c.isError && !strings.Contains(ts.Text(res), "/v") {
			t.Errorf("%s v=%v: isError=%v text=%q", c.tool, c.v, res.IsError, ts.Text(res))
		}
	}
	// What was left out cannot be called.
	for _, name := range []string{"h__schema_true", "h__remote_ref", "h__task_required", "h__header_dup"} {
		_, err := m.Call(name, nil)
		ts.WantUnknownTool(t, err, name)
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the remote $ref server was asked %d times; want never", n)
	}
}

// Schemas that JSON Schema allows but the MCP tool shape does not: an
// inputSchema without "type":"object", an outputSchema that is not an object
// schema, a property whose schema is a boolean, a "type" that is null or
// spelt "Type" (JSON keys are case-sensitive). A strict client validates
// the whole tools/list result against that shape (the official TypeScript
// SDK does: one such tool and listTools throws), so one child's sloppy tool
// would cost the client every tool of every child. Each must be left out, or
// listed in a shape strict clients accept; the others stay listed.
func TestHostileListingFitsStrictClients(t *testing.T) {
	t.Parallel()
	tools := `[` + hostileEcho + `,
		{"name":"no_type","inputSchema":{}},
		{"name":"no_type_props","inputSchema":{"properties":{"a":{"type":"string"}}}},
		{"name":"output_string","inputSchema":{"type":"object"},"outputSchema":{"type":"string"}},
		{"name":"output_no_type","inputSchema":{"type":"object"},"outputSchema":{"properties":{"a":{"type":"string"}}}},
		{"name":"bool_property","inputSchema":{"type":"object","properties":{"a":true}}},
		{"name":"input_type_null","inputSchema":{"type":null,"properties":{"a":{"type":"string"}}}},
		{"name":"output_type_null","inputSchema":{"type":"object"},"outputSchema":{"type":null}},
		{"name":"input_type_capital","inputSchema":{"Type":"object","properties":{"a":{"type":"string"}}}},
		{"name":"output_type_capital","inputSchema":{"type":"object"},"outputSchema":{"TYPE":"object"}}]`
	lab := ts.HostileLab(t, "", tools, nil)
	m := ts.StartMux(t, lab)
	raws := m.RawTools()
	var names []string
	for _, raw := range raws {
		var def struct {
			Name         string `json:"name"`
			InputSchema  any    `json:"inputSchema"`
			OutputSchema any    `json:"outputSchema"`
		}
		if err := json.Unmarshal(raw, &def); err != nil {
			t.Fatal(err)
		}
		names = append(names, def.Name)
		if why := strictShape(def.InputSchema, false); why != "" {
			t.Errorf("%s is listed with an inputSchema strict clients refuse (%s): %s", def.Name, why, raw)
		}
		if why := strictShape(def.OutputSchema, true); why != "" {
			t.Errorf("%s is listed with an outputSchema strict clients refuse (%s): %s", def.Name, why, raw)
		}
	}
	if !ts.Contains(names, "h__echo") {
		t.Errorf("h__echo is not listed: %q", names)
	}
	stillUp(t, m)
}

// strictShape says why a schema does not have the shape the MCP tool
// definition (and the TypeScript SDK's check of it) requires: an object
// with "type":"object" whose "properties" are all objects. "" if it does.
func strictShape(schema any, optional bool) string {
	if schema == nil && optional {
		return ""
	}
	obj, ok := schema.(map[string]any)
	if !ok {
		return "not an object"
	}
	if obj["type"] != "object" {
		return fmt.Sprintf("type is %v", obj["type"])
	}
	if props, ok := obj["properties"]; ok {
		pm, ok := props.(map[string]any)
		if !ok {
			return "properties is not an object"
		}
		for k, v := range pm {
			if _, ok := v.(map[string]any); !ok {
				return fmt.Sprintf("property %s is %v, not a schema object", k, v)
			}
		}
	}
	return ""
}

// Many calls at once on one schema with patternProperties and pattern (which
// the schema library rewrites while validating): every answer is the right
// one, and mcpmux stays up.
func TestHostileConcurrentPatternSchema(t *testing.T) {
	t.Parallel()
	tools := `[` + hostileEcho + `,{"name":"pat","inputSchema":{"type":"object",
		"properties":{"id":{"type":"string","pattern":"^id-[0-9]+$"}},
		"patternProperties":{"^k_[a-z]+$":{"type":"string","pattern":"^[0-9]{3}$"}},
		"additionalProperties":false,"required":["id"]}}]`
	lab := ts.HostileLab(t, "", tools, nil)
	m := ts.StartMux(t, lab)

	const calls = 300
	var wg sync.WaitGroup
	var valid, invalid atomic.Int64
	for i := range calls {
		var args map[string]any
		var wantPath string // "" for valid arguments
		switch i % 4 {
		case 0:
			args = map[string]any{"id": fmt.Sprintf("id-%d", i), "k_abc": "123", "k_z": fmt.Sprintf("%03d", i%1000)}
		case 1:
			args = map[string]any{"id": fmt.Sprintf("bad-%d", i)}
			wantPath = "/id"
		case 2:
			args = map[string]any{"id": fmt.Sprintf("id-%d", i), "k_abc": fmt.Sprintf("12x%d", i)}
			wantPath = "/k_abc"
		case 3:
			args = map[string]any{"id": fmt.Sprintf("id-%d", i), "K_ABC": "123"}
			wantPath = "K_ABC"
		}
		if wantPath == "" {
			valid.Add(1)
		} else {
			invalid.Add(1)
		}
		wg.Go(func() {
			res, err := m.Call("h__pat", args)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			text := ts.Text(res)
			if wantPath != "" {
				if !res.IsError || !strings.Contains(text, wantPath) {
					t.Errorf("call %d %v: isError=%v text=%q, want a refusal naming %s", i, args, res.IsError, text, wantPath)
				}
				return
			}
			var got map[string]any
			if res.IsError || json.Unmarshal([]byte(text), &got) != nil || fmt.Sprint(got) != fmt.Sprint(args) {
				t.Errorf("call %d %v: isError=%v text=%q, want its own arguments back", i, args, res.IsError, text)
			}
		})
	}
	wg.Wait()
	ts.WaitFor(t, "every audit line", func() bool {
		return len(m.Log.Lines(ts.Msg("call", "tool", "h__pat"))) == calls
	})
	if n := len(m.Log.Lines(ts.Msg("call", "tool", "h__pat", "decision", "allowed", "outcome", "ok"))); int64(n) != valid.Load() {
		t.Errorf("%d calls allowed and ok, want %d", n, valid.Load())
	}
	if n := len(m.Log.Lines(ts.Msg("call", "tool", "h__pat", "decision", "invalid"))); int64(n) != invalid.Load() {
		t.Errorf("%d calls refused as invalid, want %d", n, invalid.Load())
	}
	stillUp(t, m)
}

// A child that floods its stderr (one 200 KiB line, then 1000 short ones)
// while answering: the answer comes, the long line is logged cut, every
// short line is logged, and the child goes on serving.
func TestHostileStderrFlood(t *testing.T) {
	t.Parallel()
	lab := ts.HostileLab(t, `call_timeout = "10s"`, `[`+hostileEcho+`,{"name":"bigerr","inputSchema":{"type":"object"}}]`, nil)
	m := ts.StartMux(t, lab)
	res := m.MustCall("h__bigerr", nil)
	if res.IsError || ts.Text(res) != "ok" {
		t.Fatalf("bigerr: isError=%v text=%q", res.IsError, ts.Text(res))
	}
	if out := hostileAudit(t, m, "h__bigerr")["outcome"]; out != "ok" {
		t.Errorf("bigerr outcome %v, want ok", out)
	}
	m.Log.WaitLine(t, "the last short line", ts.Msg("server stderr", "server", "h", "stderr", "hostile short line 999"))
	long := m.Log.Lines(func(l map[string]any) bool {
		s, _ := l["stderr"].(string)
		return l["message"] == "server stderr" && strings.HasPrefix(s, "EEEE")
	})
	if len(long) != 1 {
		t.Fatalf("the 200 KiB line was logged as %d lines, want 1", len(long))
	}
	if s := long[0]["stderr"].(string); long[0]["truncated"] != true || len(s) > 16*1024 || strings.Trim(s, "E") != "" {
		t.Errorf("long line logged with truncated=%v and %d bytes", long[0]["truncated"], len(s))
	}
	if n := len(m.Log.Lines(func(l map[string]any) bool {
		s, _ := l["stderr"].(string)
		return l["message"] == "server stderr" && strings.HasPrefix(s, "hostile short line ")
	})); n != 1000 {
		t.Errorf("%d short lines logged, want 1000", n)
	}
	stillUp(t, m)
}

// A line that is not JSON is skipped; an answer under an id nobody asked for
// is ignored, and the real call then times out (and is cancelled) rather
// than hanging or taking mcpmux down.
func TestHostileGarbageAndWrongID(t *testing.T) {
	t.Parallel()
	tools := `[` + hostileEcho + `,{"name":"garbage","inputSchema":{"type":"object"}},{"name":"wrongid","inputSchema":{"type":"object"}}]`
	lab := ts.HostileLab(t, `call_timeout = "1s"`, tools, nil)
	m := ts.StartMux(t, lab)

	res := m.MustCall("h__garbage", nil)
	if res.IsError || ts.Text(res) != "ok" {
		t.Fatalf("garbage: isError=%v text=%q", res.IsError, ts.Text(res))
	}
	if out := hostileAudit(t, m, "h__garbage")["outcome"]; out != "ok" {
		t.Errorf("garbage outcome %v, want ok", out)
	}

	res = m.MustCall("h__wrongid", nil)
	if !res.IsError || !strings.Contains(ts.Text(res), "timed out after 1s") {
		t.Fatalf("wrongid: isError=%v text=%q", res.IsError, ts.Text(res))
	}
	if out := hostileAudit(t, m, "h__wrongid")["outcome"]; out != "timeout" {
		t.Errorf("wrongid outcome %v, want timeout", out)
	}
	m.Log.WaitLine(t, "the child told to cancel", func(l map[string]any) bool {
		s, _ := l["stderr"].(string)
		return l["message"] == "server stderr" && strings.HasPrefix(s, "hostile cancelled ")
	})
	stillUp(t, m)
	// Neither misdeed cost the child its session.
	if lines := m.Log.Lines(ts.Msg("server went away; restarting")); len(lines) != 0 {
		t.Errorf("the child was restarted: %v", lines)
	}
}

// A JSON-RPC error from the child becomes an isError result quoting it.
func TestHostileRPCError(t *testing.T) {
	t.Parallel()
	lab := ts.HostileLab(t, "", `[`+hostileEcho+`,{"name":"rpcerror","inputSchema":{"type":"object"}}]`, nil)
	m := ts.StartMux(t, lab)
	res := m.MustCall("h__rpcerror", nil)
	if !res.IsError || !strings.Contains(ts.Text(res), "child says no") {
		t.Fatalf("rpcerror: isError=%v text=%q", res.IsError, ts.Text(res))
	}
	if out := hostileAudit(t, m, "h__rpcerror")["outcome"]; out != "tool_error" {
		t.Errorf("rpcerror outcome %v, want tool_error", out)
	}
	stillUp(t, m)
}

// Arguments reach the child byte for byte: integers above 2^53 and long
// decimals keep every digit, also when the schema checks their type.
func TestHostileArgumentPrecision(t *testing.T) {
	t.Parallel()
	tools := `[` + hostileEcho + `,{"name":"typed","inputSchema":{"type":"object","properties":{"n":{"type":"integer"},"f":{"type":"number"}}}}]`
	lab := ts.HostileLab(t, "", tools, nil)
	m := ts.StartMux(t, lab)
	for _, tool := range []string{"h__echo", "h__typed"} {
		res := m.MustCall(tool, json.RawMessage(`{"n": 9007199254740993, "big": 123456789012345678901234567890, "f": 0.1000000000000000055511151231257827}`))
		text := ts.Text(res)
		if res.IsError {
			t.Fatalf("%s: %s", tool, text)
		}
		for _, lit := range []string{"9007199254740993", "123456789012345678901234567890", "0.1000000000000000055511151231257827"} {
			if !strings.Contains(text, lit) {
				t.Errorf("%s: the child got %s, without %s", tool, text, lit)
			}
		}
	}
}

// A child that exits in the middle of a call (not read-only): the caller is
// told it may or may not have taken effect, and the child is restarted.
func TestHostileExitMidCall(t *testing.T) {
	t.Parallel()
	lab := ts.HostileLab(t, `call_timeout = "10s"`, `[`+hostileEcho+`,{"name":"exit","inputSchema":{"type":"object"}}]`, nil)
	m := ts.StartMux(t, lab)
	res := m.MustCall("h__exit", nil)
	if !res.IsError || !strings.Contains(ts.Text(res), "may or may not have taken effect") || !strings.Contains(ts.Text(res), "exit status 3") {
		t.Errorf("exit: isError=%v text=%q", res.IsError, ts.Text(res))
	}
	if out := hostileAudit(t, m, "h__exit")["outcome"]; out != "interrupted" {
		t.Errorf("exit outcome %v, want interrupted", out)
	}
	m.Log.WaitLine(t, "restart", ts.Msg("server went away; restarting", "server", "h"))
	stillUp(t, m)
}
