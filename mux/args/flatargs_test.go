package args

import (
	"reflect"
	"testing"
)

// Arguments Decode takes by its flat path decode as by its general one:
// the same values, the same levels, the same refusal.
func TestDecodeFlatAgrees(t *testing.T) {
	cases := []string{
		`{}`, ` { } `, `{"text":"hello"}`, `{"query":"q","limit":3,"exact":true,"none":null,"off":false}`,
		`{"n":-1.5e3}`, `{"n":1e400}`, `{"n":123456789012345678901234567890}`, `{"s":"é ü 𝄞"}`, `{"s":"a\nb"}`,
		`{"s":"\u00e9"}`, `{"k\u0065y":1}`, `{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"k":1,"K":2}`,
		`{"o":{"x":1}}`, `{"a":[1,2]}`, `{"a":1} {"b":2}`, `[1]`, `"x"`, `{"a":1,}`, "{\"s\":\"\xff\"}", "{\"\xff\":1}",
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17}`,
	}
	for _, c := range cases {
		wantArgs, wantLevels, wantErr := decodeGeneral([]byte(c))
		gotArgs, gotLevels, gotErr := Decode([]byte(c))
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Errorf("%s: error %v, want %v", c, gotErr, wantErr)
			continue
		}
		if !reflect.DeepEqual(gotArgs, wantArgs) || !reflect.DeepEqual(gotLevels, wantLevels) {
			t.Errorf("%s: %#v %v, want %#v %v", c, gotArgs, gotLevels, wantArgs, wantLevels)
		}
	}
	if _, _, ok := decodeFlat([]byte(`{"query":"q","limit":3,"exact":true}`)); !ok {
		t.Error("flat arguments were not taken by the flat path")
	}
}
