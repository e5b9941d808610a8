package toolsearch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// corpusFile is one server's listing in testdata/corpus/<server>.json.
type corpusFile struct {
	Package string            `json:"package"`
	Version string            `json:"version"`
	Listed  string            `json:"listed"`
	Command string            `json:"command"`
	Tools   []json.RawMessage `json:"tools"`
}

type corpusTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

type corpusQuery struct {
	Query   string   `json:"query"`
	Answers []string `json:"answers"`
}

var (
	serverKey   = regexp.MustCompile(`^[a-z0-9-]+$`)
	exactSemver = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	listedDate  = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
)

// loadCorpus reads every testdata/corpus/*.json and returns the tools by
// "<server>/<tool name>".
func loadCorpus(t *testing.T) map[string]corpusTool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]corpusTool{}
	servers := 0
	for _, f := range files {
		server := strings.TrimSuffix(filepath.Base(f), ".json")
		if !serverKey.MatchString(server) {
			t.Errorf("%s: server key %q is not [a-z0-9-]+", f, server)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c corpusFile
		if err := json.Unmarshal(b, &c); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if c.Package == "" || !exactSemver.MatchString(c.Version) || !listedDate.MatchString(c.Listed) || c.Command == "" {
			t.Errorf("%s: package %q, version %q, listed %q, command %q: want a package, an exact version, a date and a command",
				f, c.Package, c.Version, c.Listed, c.Command)
		}
		if len(c.Tools) == 0 {
			t.Errorf("%s: no tools", f)
		}
		servers++
		for i, raw := range c.Tools {
			var tool corpusTool
			if err := json.Unmarshal(raw, &tool); err != nil {
				t.Errorf("%s: tool %d: %v", f, i, err)
				continue
			}
			if tool.Name == "" {
				t.Errorf("%s: tool %d has no name", f, i)
				continue
			}
			// The schema is kept as the server sent it: it must be a JSON
			// object, but some real servers leave out "type" (gitlab's
			// schemas are a bare {"$schema": ...}), so only a type that is
			// there and is not "object" is wrong.
			var schema map[string]any
			if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema == nil {
				t.Errorf("%s: tool %q: inputSchema is not an object", f, tool.Name)
			} else if typ, ok := schema["type"]; ok && typ != "object" {
				t.Errorf("%s: tool %q: inputSchema type is %v, not object", f, tool.Name, typ)
			}
			key := server + "/" + tool.Name
			if _, dup := tools[key]; dup {
				t.Errorf("%s: tool %q listed twice", f, tool.Name)
			}
			tools[key] = tool
		}
	}
	if servers < 10 {
		t.Errorf("corpus has %d servers, want at least 10", servers)
	}
	if len(tools) < 300 {
		t.Errorf("corpus has %d tools, want at least 300", len(tools))
	}
	return tools
}

func TestCorpusIntegrity(t *testing.T) {
	tools := loadCorpus(t)

	b, err := os.ReadFile(filepath.Join("testdata", "queries.json"))
	if err != nil {
		t.Fatal(err)
	}
	var queries []corpusQuery
	if err := json.Unmarshal(b, &queries); err != nil {
		t.Fatalf("queries.json: %v", err)
	}
	if len(queries) < 100 {
		t.Errorf("%d queries, want at least 100", len(queries))
	}
	seen := map[string]bool{}
	answered := map[string]int{}
	for i, q := range queries {
		if strings.TrimSpace(q.Query) == "" {
			t.Errorf("query %d is empty", i)
		}
		if seen[q.Query] {
			t.Errorf("query %q is there twice", q.Query)
		}
		seen[q.Query] = true
		if len(q.Answers) == 0 {
			t.Errorf("query %q has no answers", q.Query)
		}
		dup := map[string]bool{}
		for _, a := range q.Answers {
			if _, ok := tools[a]; !ok {
				t.Errorf("query %q: answer %q is not a tool in the corpus", q.Query, a)
			}
			if dup[a] {
				t.Errorf("query %q: answer %q given twice", q.Query, a)
			}
			dup[a] = true
			answered[strings.SplitN(a, "/", 2)[0]]++
		}
	}
	servers := map[string]bool{}
	for key := range tools {
		servers[strings.SplitN(key, "/", 2)[0]] = true
	}
	for s := range servers {
		if answered[s] < 3 {
			t.Errorf("server %q answers %d queries, want at least 3", s, answered[s])
		}
	}
}
