package args

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
		// Keys equal under Unicode simple case folding are one field to a
		// decoder that matches names without regard to case (Go's
		// encoding/json into a struct).
		{"case at the top", `{"path":"/data/public/x","PATH":"/etc/passwd"}`, `arguments: keys "path" and "PATH" differ only in case at (root)`},
		{"case nested", `{"filter":{"Query":"a","qUERY":"b"}}`, `arguments: keys "Query" and "qUERY" differ only in case at /filter`},
		{"case in an array", `{"items":[{"n":1},{"n":2,"N":3}]}`, `arguments: keys "n" and "N" differ only in case at /items/1`},
		{"case after an escape", `{"Path":1,"p\u0041th":2}`, `arguments: keys "Path" and "pAth" differ only in case at (root)`},
		{"kelvin sign folds to k", `{"kind":1,"\u212aIND":2}`, "arguments: keys \"kind\" and \"\u212aIND\" differ only in case at (root)"},
		{"long s folds to s", `{"\u017fize":1,"SIZE":2}`, "arguments: keys \"\u017fize\" and \"SIZE\" differ only in case at (root)"},
		{"title case folds", `{"\u01c4":1,"\u01c5":2}`, "arguments: keys \"\u01c4\" and \"\u01c5\" differ only in case at (root)"},
		{"greek sigma forms fold", `{"\u03c3":1,"\u03c2":2}`, "arguments: keys \"\u03c3\" and \"\u03c2\" differ only in case at (root)"},
		{"full folding is not simple folding", `{"stra\u00dfe":1,"STRASSE":2}`, ""},
		{"case in two objects is fine", `{"a":{"k":1},"b":{"K":2}}`, ""},
		{"a key and its parent's are fine", `{"k":{"K":1}}`, ""},
		{"lengths differ", `{"ab":1,"AB ":2,"A":3}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := Decode([]byte(c.args))
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
				if !errors.Is(err, ErrInvalid) {
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

// An object of many keys is checked as a few are: a key that differs from
// an earlier one only in case is refused wherever it comes.
func TestDecodeArgumentsCaseManyKeys(t *testing.T) {
	for _, n := range []int{2, 31, 32, 33, 1000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf(`"k%d":%d`, i, i)
		}
		obj := "{" + strings.Join(keys, ",")
		if _, _, err := Decode([]byte(obj + "}")); err != nil {
			t.Fatalf("%d distinct keys: %v", n, err)
		}
		for _, i := range []int{0, n / 2, n - 1} {
			err := decodeArguments2(obj + fmt.Sprintf(`,"K%d":true}`, i))
			want := fmt.Sprintf(`arguments: keys "k%d" and "K%d" differ only in case at /o`, i, i)
			if err == nil || err.Error() != want {
				t.Errorf("%d keys, K%d repeated: %v, want %s", n, i, err, want)
			}
		}
	}
}

// decodeArguments2 decodes obj as the value of "o" after another member,
// so that the object is not the first the decoder sees.
func decodeArguments2(obj string) error {
	_, _, err := Decode([]byte(`{"first":{"K0":1,"k1":2},"o":` + obj + `}`))
	return err
}

// FuzzArguments holds Decode to a plain reading of the same JSON:
// what it accepts json.Unmarshal decodes the same, with no object holding
// two keys equal under Unicode simple case folding; what it refuses is
// refused as invalid arguments, and a case-folded repeat within the depth
// limit is always refused.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"path":"x","PATH":"y"}`, `{"a":{"k":1,"\u212a":2}}`, `{"a":[{"s":1},{"\u017f":1}]}`,
		`{"\u03a3":1,"\u03c2":2}`, `{"x":1,"x":2}`, `{"stra\u00dfe":1,"STRASSE":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 1<<16 {
			return
		}
		got, _, err := Decode(raw)
		fold := foldRepeat(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q refused with %v, not as invalid arguments", raw, err)
			}
			return
		}
		if fold {
			t.Fatalf("%q accepted, but an object repeats a key up to case", raw)
		}
		var want map[string]any
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("%q accepted, but json.Unmarshal refuses it: %v", raw, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q decoded %#v, json.Unmarshal gives %#v", raw, got, want)
		}
	})
}

// foldRepeat reports whether valid JSON raw, nested at most
// maxArgumentDepth deep, has an object with two keys strings.EqualFold
// holds equal, comparing every pair; false for anything else.
func foldRepeat(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var walk func(depth int) (bool, error)
	walk = func(depth int) (bool, error) {
		tok, err := dec.Token()
		if err != nil {
			return false, err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return false, nil
		}
		if depth >= maxArgumentDepth {
			return false, errors.New("too deep")
		}
		found := false
		var keys []string
		for dec.More() {
			if d == '{' {
				k, err := dec.Token()
				if err != nil {
					return false, err
				}
				for _, o := range keys {
					found = found || strings.EqualFold(o, k.(string))
				}
				keys = append(keys, k.(string))
			}
			f, err := walk(depth + 1)
			if err != nil {
				return false, err
			}
			found = found || f
		}
		_, err = dec.Token()
		return found, err
	}
	found, err := walk(0)
	return err == nil && found
}

func TestDecodeArgumentsLevels(t *testing.T) {
	_, levels, err := Decode([]byte(`{"a":[1,2,{"b":3}],"c":"x"}`))
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
		if _, _, err := Decode(benchArgs); err != nil {
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
