package searchmode

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/policy"
)

func TestParseQuery(t *testing.T) {
	for _, c := range []struct {
		args  string
		limit int
		err   string
	}{
		{`{"query":"read a file"}`, DefaultLimit, ""},
		{`{"query":"x","limit":20,"server":"fs"}`, 20, ""},
		{`{"query":"  "}`, 0, "query is required"},
		{`null`, 0, "query is required"},
		{`{"query":"x","limit":21}`, 0, "limit must be between 1 and 20, not 21"},
		{`{"query":"x","limit":-1}`, 0, "limit must be between 1 and 20, not -1"},
		{`{"query":3}`, 0, "invalid arguments"},
	} {
		q, err := ParseQuery(json.RawMessage(c.args))
		switch {
		case c.err == "" && (err != nil || q.Limit != c.limit):
			t.Errorf("ParseQuery(%s) = %+v, %v; want limit %d", c.args, q, err, c.limit)
		case c.err != "" && (!errors.Is(err, ErrArguments) || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseQuery(%s) error %v; want ErrArguments saying %q", c.args, err, c.err)
		}
	}
}

func TestParseTarget(t *testing.T) {
	own := NewTools("__")
	for _, c := range []struct{ args, name, err string }{
		{`{"name":"fs__read_file","arguments":{"path":"/x"}}`, "fs__read_file", ""},
		{`{"name":"fs__list"}`, "fs__list", ""},
		{`{}`, "", "name is required"},
		{`{"name":"mcpmux__find_tools"}`, "", "calls a tool of a server"},
		{`{"name":"fs__x","arguments":[1]}`, "", "arguments must be an object"},
	} {
		got, err := own.ParseTarget(json.RawMessage(c.args))
		switch {
		case c.err == "" && (err != nil || got.Name != c.name):
			t.Errorf("ParseTarget(%s) = %+v, %v; want %s", c.args, got, err, c.name)
		case c.err != "" && (!errors.Is(err, ErrArguments) || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseTarget(%s) error %v; want ErrArguments saying %q", c.args, err, c.err)
		}
	}
}

// The list is valid JSON, the two tools first, then the always ones in
// catalog order; the separator names the tools.
func TestList(t *testing.T) {
	p, err := policy.Parse("policies/a.toml", []byte("allow = [\"*\"]\nalways = [\"fs_read*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	listed := []*catalog.Entry{
		{Name: "fs_read_file", Def: json.RawMessage(`{"name":"fs_read_file","inputSchema":{"type":"object"}}`)},
		{Name: "fs_write_file", Def: json.RawMessage(`{"name":"fs_write_file","inputSchema":{"type":"object"}}`)},
	}
	own := NewTools("_")
	var tools []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(own.List(listed, p), &tools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, " ") != "mcpmux_find_tools mcpmux_call_tool fs_read_file" {
		t.Errorf("List = %v", names)
	}
}

// call_tool says it may run as a task only when a tool the caller may
// call does.
func TestListTaskSupport(t *testing.T) {
	p, err := policy.Parse("policies/a.toml", []byte(`allow = ["*"]`))
	if err != nil {
		t.Fatal(err)
	}
	own := NewTools("__")
	plain := &catalog.Entry{Name: "fs__read", Def: json.RawMessage(`{"name":"fs__read","inputSchema":{"type":"object"}}`)}
	task := &catalog.Entry{Name: "jobs__run", Task: "required", Def: json.RawMessage(`{"name":"jobs__run","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`)}
	for _, c := range []struct {
		listed []*catalog.Entry
		want   string
	}{
		{[]*catalog.Entry{plain}, ""},
		{[]*catalog.Entry{plain, task}, `{"taskSupport":"optional"}`},
		{nil, ""},
	} {
		var tools []struct {
			Name      string          `json:"name"`
			Execution json.RawMessage `json:"execution"`
		}
		if err := json.Unmarshal(own.List(c.listed, p), &tools); err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools {
			want := ""
			if tool.Name == own.Call {
				want = c.want
			}
			if string(tool.Execution) != want {
				t.Errorf("with %d listed, %s's execution is %s; want %q", len(c.listed), tool.Name, tool.Execution, want)
			}
		}
	}
}
