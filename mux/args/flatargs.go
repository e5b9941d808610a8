package args

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// maxFlatKeys bounds the members decodeFlat compares pairwise.
const maxFlatKeys = 16

// decodeFlat is Decode of the common case, arguments that are one object
// of at most maxFlatKeys members whose values are strings without escapes,
// numbers, booleans and null, and whose keys no two are equal under case
// folding; ok is false for anything else, which Decode's general path
// decodes, or refuses with the error it gives. The values are those
// json.Unmarshal gives.
func decodeFlat(raw []byte) (args map[string]any, levels []int, ok bool) {
	if !jsonwire.Valid(raw) {
		return nil, nil, false
	}
	o, isObject := jsonwire.Members(raw)
	if !isObject || len(o.Members) > maxFlatKeys {
		return nil, nil, false
	}
	args = make(map[string]any, len(o.Members))
	for i, m := range o.Members {
		if !utf8.ValidString(m.Key) {
			return nil, nil, false // encoding/json replaces what is not UTF-8
		}
		for _, prev := range o.Members[:i] {
			if strings.EqualFold(prev.Key, m.Key) {
				return nil, nil, false
			}
		}
		v := raw[m.Start:m.End]
		switch v[0] {
		case '"':
			s := v[1 : len(v)-1]
			if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
				return nil, nil, false
			}
			args[m.Key] = string(s)
		case 't':
			args[m.Key] = true
		case 'f':
			args[m.Key] = false
		case 'n':
			args[m.Key] = nil
		case '{', '[':
			return nil, nil, false
		default:
			n, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return nil, nil, false
			}
			args[m.Key] = n
		}
	}
	levels = []int{1}
	if len(o.Members) > 0 {
		levels = append(levels, len(o.Members))
	}
	return args, levels, true
}
