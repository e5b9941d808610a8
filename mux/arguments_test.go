package mux

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeArguments(t *testing.T) {
	deep := func(n int) string { return `{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "}" }
	cases := []struct {
		name, args string
		err        string // the whole message; "" when accepted
	}{
		{"object", `{"query":"x","n":1.5,"ok":true,"none":null,"list":[1,"a",{}],"o":{"k":"v"}}`, ""},
		{"escaped keys are compared decoded", `{"a":1,"\u0061":2}`, `arguments: duplicate key "a" at (root)`},
		{"duplicate at the top", `{"query":"public","query":"private"}`, `arguments: duplicate key "query" at (root)`},
		{"duplicate nested", `{"filter":{"query":"a","query":"b"}}`, `arguments: duplicate key "query" at /filter`},
		{"duplicate in an array", `{"items":[{"n":1},{"n":2,"n":3}]}`, `arguments: duplicate key "n" at /items/1`},
		{"path segments are escaped", `{"a/b":{"~":{"x":1,"x":2}}}`, `arguments: duplicate key "x" at /a~1b/~0`},
		{"same key in two objects is fine", `{"a":{"k":1},"b":{"k":2}}`, ""},
		{"deepest allowed", deep(maxArgumentDepth), ""},
		{"too deep", deep(maxArgumentDepth + 1), "invalid arguments: arguments: objects and arrays nested more than 128 deep"},
		{"not an object", `[1]`, "invalid arguments: arguments must be a JSON object"},
		{"a string", `"x"`, "invalid arguments: arguments must be a JSON object"},
		{"two values", `{} {}`, "invalid arguments: arguments: more than one JSON value"},
		{"broken", `{"a":}`, "invalid arguments: arguments are not valid JSON: invalid character '}' looking for beginning of value"},
		{"truncated", `{"a":[1`, "invalid arguments: arguments are not valid JSON: EOF"},
		{"number out of range", `{"a":1e400}`, ""}, // checked below against json.Unmarshal
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := decodeArguments([]byte(c.args))
			if c.name == "number out of range" {
				if err == nil {
					t.Fatal("1e400 accepted")
				}
				return
			}
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("got %v\nwant %s", err, c.err)
				}
				if !errors.Is(err, errInvalidArguments) {
					t.Fatalf("%v is not an invalid-arguments error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(c.args), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %#v, json.Unmarshal gives %#v", got, want)
			}
		})
	}
}

func TestDecodeArgumentsLevels(t *testing.T) {
	_, levels, err := decodeArguments([]byte(`{"a":[1,2,{"b":3}],"c":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 3, 1}; !reflect.DeepEqual(levels, want) {
		t.Fatalf("levels %v, want %v", levels, want)
	}
}

// Benchmarks of the decoding every call does, against json.Unmarshal's.
var benchArgs = []byte(`{"query":"repo:mcpmux is:open","filter":{"labels":["bug","p1"],"since":"2026-01-01"},"page":{"size":50,"cursor":null},"fields":["title","body","author"]}`)

func BenchmarkDecodeArguments(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decodeArguments(benchArgs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalArguments(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]any
		if err := json.Unmarshal(benchArgs, &m); err != nil {
			b.Fatal(err)
		}
	}
}
