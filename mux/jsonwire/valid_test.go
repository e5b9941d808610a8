package jsonwire

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzJSONValid holds Valid to json.Valid.
func FuzzJSONValid(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"mcpmux-1","result":{"content":[{"type":"text","text":"a\"b\\c\u00e9\n"}],"isError":false}}`,
		` [1, -0.5e+3, 0, 1E9, true, false, null, "", {}, []] `, `01`, `1.`, `-`, `1e`, `"\u12g4"`, `"a` + "\x01" + `"`,
		`{"a" 1}`, `{"a":1,}`, `[1,]`, `"\x"`, "\"\xff\xfe\"", `{"a":{"b":[{"c":"d"}]}}`, `nul`, `truex`, "",
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", short(b), got, want)
		}
	})
}

// BenchmarkJSONValid validates a 256 KiB result of plain text, and one
// with an escape every 13 bytes.
func BenchmarkJSONValid(b *testing.B) {
	for _, text := range []struct{ name, text string }{
		{"plain", strings.Repeat("x", 256<<10)},
		{"escaped", strings.Repeat(`abcdefgh\"ij\n`, 256<<10/13)},
	} {
		msg := []byte(`{"jsonrpc":"2.0","id":"mcpmux-1","result":{"content":[{"type":"text","text":"` + text.text + `"}]}}`)
		for _, v := range []struct {
			name  string
			valid func([]byte) bool
		}{{"json.Valid", json.Valid}, {"jsonValid", Valid}} {
			b.Run(text.name+"/"+v.name, func(b *testing.B) {
				b.SetBytes(int64(len(msg)))
				for b.Loop() {
					if !v.valid(msg) {
						b.Fatal("invalid")
					}
				}
			})
		}
	}
}

// short is b, or its start, for a message.
func short(b []byte) []byte {
	if len(b) > 200 {
		return append(b[:200:200], "..."...)
	}
	return b
}
