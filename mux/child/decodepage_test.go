package child

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// decodePageByMaps is decodePage as it was written before it read the
// page in place: decoded into a map, as a JSON decoder reads it. The
// fuzzer holds decodePage to it.
func decodePageByMaps(result []byte, member string) (listPage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(result, &top); err != nil {
		return listPage{}, err
	}
	var p listPage
	if c, ok := top["nextCursor"]; ok && !bytes.Equal(c, []byte("null")) {
		if err := json.Unmarshal(c, &p.NextCursor); err != nil {
			return listPage{}, fmt.Errorf("nextCursor: %w", err)
		}
	}
	if items, ok := top[member]; ok && !bytes.Equal(items, []byte("null")) {
		if err := json.Unmarshal(items, &p.Items); err != nil {
			return listPage{}, fmt.Errorf("%s: %w", member, err)
		}
	}
	return p, nil
}

// decodePage takes and refuses the pages decoding into a map does, and
// finds the same cursor and the same items (byte for byte).
func FuzzDecodePage(f *testing.F) {
	for _, s := range []string{
		`{"tools":[{"name":"a"},{"name":"b"}],"nextCursor":"c2"}`, `{"tools":[]}`, `{}`, `null`, ` null `,
		`"SECRET"`, `[]`, `{"tools":{}}`, `{"tools":null,"nextCursor":null}`, `{"tools":[1,"x",null, {} ,[]]}`,
		`{"tools":[{"name":"a"}],"tools":[{"name":"b"}]}`, `{"nextCursor":"a","nextCursor":"b"}`,
		`{"nextCursor":5}`, `{"nextCursor":"\u0063"}`, `{"\u0074ools":[{}]}`, `{"Tools":[{}]}`,
		`{"tools":[{"name":"a"}]`, `{"tools":[{"name":"a"}]}x`, ` { "tools" : [ { } , { } ] } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, result []byte) {
		want, wantErr := decodePageByMaps(result, "tools")
		got, err := decodePage(result, "tools")
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("decodePage(%q) error %v; decoded into a map: %v", result, err, wantErr)
		}
		if err != nil {
			return
		}
		same := got.NextCursor == want.NextCursor && slices.EqualFunc(got.Items, want.Items, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })
		if !same {
			t.Fatalf("decodePage(%q) = %q %q; decoded into a map: %q %q", result, got.NextCursor, got.Items, want.NextCursor, want.Items)
		}
	})
}
