package catalog

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// decodesAsTool finds exactly the definitions json.Unmarshal into mcp-go's
// mcp.Tool refuses, which a client built on mcp-go could not read. The
// seeds are the members mcp-go's schema type decodes, in every shape and
// case that it refuses or takes; the fuzzer looks for any other.
func FuzzDecodesAsTool(f *testing.F) {
	for _, def := range toolShapeSeeds {
		f.Add([]byte(def))
	}
	f.Fuzz(func(t *testing.T, def []byte) {
		if !toolObject(def) {
			return
		}
		var tool mcp.Tool
		want := json.Unmarshal(def, &tool)
		got := decodesAsTool(def)
		if (got == nil) != (want == nil) {
			t.Fatalf("decodesAsTool(%s) = %v; json.Unmarshal into mcp.Tool: %v", def, got, want)
		}
	})
}

// decodesAsTool is what a build finds of the definition def, as listed.
func decodesAsTool(def []byte) error {
	var t toolShape
	return schemasDecode(json.Unmarshal(def, &t), t.InputSchema, t.OutputSchema)
}

// A catalog build keeps only tools whose definition, as listed upstream,
// an mcp-go client can read: it decodes each definition once, and checks
// the schemas it may have repaired on their own.
func FuzzBuildKeepsWhatMcpGoReads(f *testing.F) {
	for _, def := range toolShapeSeeds {
		f.Add([]byte(def))
	}
	b := builders(f, "[servers.docs]\ncommand = \"docs\"\n")[0]
	f.Fuzz(func(t *testing.T, def []byte) {
		if !toolObject(def) {
			return
		}
		b.Forget()
		var raw [NumKinds][]json.RawMessage
		raw[KindTool] = []json.RawMessage{def}
		for _, e := range b.Build(raw, mcp.ServerCapabilities{}).Entries[KindTool] {
			var tool mcp.Tool
			if err := json.Unmarshal(e.Def, &tool); err != nil {
				t.Fatalf("kept %s as %s, which mcp.Tool refuses: %v", def, e.Def, err)
			}
		}
	})
}

// toolObject reports whether def is what a catalog build decodes: a JSON
// object encoding/json can read.
func toolObject(def []byte) bool {
	if !json.Valid(def) {
		return false // checkTool sees definitions that decoded
	}
	var v any
	if json.Unmarshal(def, &v) != nil {
		return false // nested beyond encoding/json's depth: refused before
	}
	_, ok := v.(map[string]any)
	return ok
}

// toolShapeSeeds are the members mcp-go's schema type decodes, in every
// shape and case that it refuses or takes.
var toolShapeSeeds = []string{
	`{"name":"t","inputSchema":{"type":"object"}}`,
	`{"name":"t","inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}`,
	`{"name":"t","inputSchema":null}`,
	`{"name":"t"}`,
	`{"name":"t","inputSchema":[]}`,
	`{"name":"t","inputSchema":"object"}`,
	`{"name":"t","inputSchema":{"type":5}}`,
	`{"name":"t","inputSchema":{"TYPE":5}}`,
	`{"name":"t","inputSchema":{"type":null}}`,
	`{"name":"t","inputSchema":{"type":"object","required":"q"}}`,
	`{"name":"t","inputSchema":{"type":"object","required":[1]}}`,
	`{"name":"t","inputSchema":{"type":"object","Required":[1]}}`,
	`{"name":"t","inputSchema":{"type":"object","required":["q",null]}}`,
	`{"name":"t","inputSchema":{"type":"object","required":[ "q" , "r" ]}}`,
	`{"name":"t","inputSchema":{"type":"object","required":[]}}`,
	`{"name":"t","inputSchema":{"type":"object","required":null}}`,
	`{"name":"t","inputSchema":{"type":"object","properties":"x"}}`,
	`{"name":"t","inputSchema":{"type":"object","ProPerties":"x"}}`,
	`{"name":"t","inputSchema":{"type":"object","properties":null}}`,
	`{"name":"t","inputSchema":{"type":"object","properties":{"q":{"maximum":1e400}}}}`,
	`{"name":"t","inputSchema":{"type":"object","properties":{"q":{"maximum":1e-400}}}}`,
	`{"name":"t","inputSchema":{"type":"object","properties":{"q":{"maximum":1e300}}}}`,
	`{"name":"t","inputSchema":{"type":"object","$defs":[]}}`,
	`{"name":"t","inputSchema":{"type":"object","$DEFS":{"a":{"maximum":1e999}}}}`,
	`{"name":"t","inputSchema":{"type":"object","definitions":3}}`,
	`{"name":"t","inputSchema":{"type":"object","definitions":{"a":{}},"properties":{"b":{"$ref":"#/definitions/a"}}}}`,
	`{"name":"t","inputSchema":{"type":"object","additionalProperties":false}}`,
	`{"name":"t","inputSchema":{"type":"object","additionalProperties":{"maximum":-1e999}}}`,
	`{"name":"t","inputSchema":{"type":"object","\u0074ype":7}}`,
	`{"name":"t","inputSchema":{"type":"object","ſtrange":7,"K":1}}`,
	`{"name":"t","inputSchema":{"type":"object","type":"object","type":1}}`,
	`{"name":"t","inputSchema":{"type":"object"},"outputSchema":{"type":"object","required":[true]}}`,
	`{"name":"t","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"r":{"type":"number"}}}}`,
	`{"name":"t","inputSchema":{"type":"object"},"outputSchema":null}`,
	`{"name":"t","inputSchema":{"type":"object"},"description":5}`,
	`{"name":"t","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":"yes"}}`,
	`{"name":"t","inputSchema":{"type":"object"},"icons":[{"src":1}]}`,
	`{"name":"t","inputSchema":{"type":"object"},"_meta":[]}`,
	`{"name":"t","inputSchema":{"type":"object"},"execution":{"taskSupport":1}}`,
	`{"name":1,"inputSchema":{"type":"object"}}`,
}
