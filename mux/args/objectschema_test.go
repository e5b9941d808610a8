package args

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// objectSchemaByMaps is ObjectSchema as it was written before it read the
// schema in place: decoded into maps, as a JSON decoder reads it. The
// fuzzer holds ObjectSchema to it.
func objectSchemaByMaps(raw json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	typ, hasType := top["type"]
	if hasType && !bytes.Equal(bytes.TrimSpace(typ), []byte(`"object"`)) {
		return nil, fmt.Errorf("type is %s, not \"object\"", typ)
	}
	if props, ok := top["properties"]; ok {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(props, &m); err != nil || m == nil {
			return nil, fmt.Errorf("properties is not an object")
		}
		for name, p := range m {
			if t := bytes.TrimSpace(p); len(t) == 0 || t[0] != '{' {
				return nil, fmt.Errorf("property %q is %s, not a schema object", name, t)
			}
		}
	}
	if !hasType {
		rest := bytes.TrimSpace(raw[bytes.IndexByte(raw, '{')+1:])
		sep := ","
		if len(rest) > 0 && rest[0] == '}' {
			sep = ""
		}
		raw = append([]byte(`{"type":"object"`+sep), rest...)
	}
	return raw, nil
}

// ObjectSchema takes and refuses what decoding the schema into maps does,
// and gives the same bytes: a name given twice counts as its last, names
// are matched after unescaping, a name's bytes that are not UTF-8 read as
// U+FFFD.
func FuzzObjectSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}}}`,
		`{}`, ` { "properties":{"a":{}}}`, `{"type":"string"}`, `true`, `null`, `[]`,
		`{"type":"object","properties":{"a":true}}`, `{"type":null}`, `{"Type":"object"}`,
		`{"type":"object","properties":[]}`, `{"type":"object","properties":null}`,
		`{"type":"object","type":"string"}`, `{"type":"string","type":"object"}`,
		`{"properties":{"a":1,"a":{}}}`, `{"properties":{"a":{},"a":1}}`,
		`{"properties":{"a":1},"properties":{"a":{}}}`, `{"\u0074ype":"array"}`,
		`{"properties":{"\u0061":1,"a":{}}}`, "{\"properties\":{\"a\xff\":1,\"a\xfe\":{}}}",
		"{\"properties\":{\"a\xff\":{},\"a\xfe\":1}}", `{"type" : "object" , "properties" : { "a" : {} } }`,
		`{"type":"object"`, `{"type":"object"}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantErr := objectSchemaByMaps(bytes.Clone(raw))
		got, err := ObjectSchema(bytes.Clone(raw))
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("ObjectSchema(%q) error %v; decoded into maps: %v", raw, err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("ObjectSchema(%q) = %q; decoded into maps: %q", raw, got, want)
		}
	})
}
