package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// toolShape is a tool definition as mcp-go's mcp.Tool reads it, but for
// its schemas, which are kept as they are: mcp.Tool decodes each into
// maps of any (and reads the order of its properties), the most costly
// part of reading a catalog, to find what checkSchemaDecodes finds
// without building anything.
type toolShape struct {
	mcp.Tool
	// Shadow mcp.Tool's own (a shallower field wins).
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

// wire is what mcpmux reads of the tool.
func (t *toolShape) wire() wireEntry {
	return wireEntry{Name: t.Name, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema,
		Execution: t.Execution, readOnlyHint: t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint}
}

// schemasDecode returns the error json.Unmarshal into an mcp.Tool gives for
// a valid JSON definition whose decoding as a toolShape gave shapeErr and
// whose schemas are in and out, or nil when it gives none: a client built
// on mcp-go could not read a tools/list holding a definition it refuses.
// The error's words may differ from encoding/json's; whether there is one
// does not.
func schemasDecode(shapeErr error, in, out json.RawMessage) error {
	if shapeErr != nil {
		return shapeErr
	}
	if err := checkSchemaDecodes(in); err != nil {
		return fmt.Errorf("inputSchema: %w", err)
	}
	if err := checkSchemaDecodes(out); err != nil {
		return fmt.Errorf("outputSchema: %w", err)
	}
	return nil
}

// errSchemaShape is the error of a schema member of a type mcp-go's
// schema type cannot hold.
var errSchemaShape = errors.New("cannot be read as mcp-go reads a tool's schema")

// checkSchemaDecodes says whether the valid JSON raw (absent, null or an
// object) decodes into mcp-go's tool schema type: every member whose
// name matches one of its fields as encoding/json matches names (ignoring
// case, every occurrence) must have that field's type, and every number
// in a member decoded as any must fit a float64.
func checkSchemaDecodes(raw json.RawMessage) error {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	o, ok := jsonwire.Members(raw)
	if !ok {
		return fmt.Errorf("not an object: %w", errSchemaShape)
	}
	for _, m := range o.Members {
		v := raw[m.Start:m.End]
		var fits bool
		switch {
		case strings.EqualFold(m.Key, "type"):
			fits = isNull(v) || v[0] == '"'
		case strings.EqualFold(m.Key, "required"):
			fits = isNull(v) || stringArray(v)
		case strings.EqualFold(m.Key, "properties"), strings.EqualFold(m.Key, "$defs"), strings.EqualFold(m.Key, "definitions"):
			fits = isNull(v) || v[0] == '{' && jsonwire.NumbersFit(v)
		case strings.EqualFold(m.Key, "additionalProperties"):
			fits = jsonwire.NumbersFit(v)
		default:
			continue
		}
		if !fits {
			return fmt.Errorf("member %q: %w", m.Key, errSchemaShape)
		}
	}
	return nil
}

func isNull(v []byte) bool { return string(v) == "null" }

// stringArray reports whether the valid JSON value v is an array of
// strings (and nulls, which leave a string empty).
func stringArray(v []byte) bool {
	if v[0] != '[' {
		return false
	}
	i := jsonwire.SkipSpace(v, 1)
	if v[i] == ']' {
		return true
	}
	for {
		end := jsonwire.SkipValue(v, i)
		if end < 0 || v[i] != '"' && !isNull(v[i:end]) {
			return false
		}
		i = jsonwire.SkipSpace(v, end)
		if v[i] == ']' {
			return true
		}
		i = jsonwire.SkipSpace(v, i+1) // past the comma
	}
}
