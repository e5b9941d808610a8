package jsonwire

import "testing"

// NumberKey gives equal numbers one key, however written, and unequal
// ones different keys, even where a float64 holds them as one.
func TestNumberKey(t *testing.T) {
	same := [][]string{
		{"7", "7.0", "70e-1", "0.7e1", "7E0", "7.000e+0"},
		{"100", "1E2", "1e+2", "100.00", "1000e-1"},
		{"0", "-0", "0.0", "0e10", "-0.0e-5"},
		{"-5", "-5.0", "-50e-1"},
		{"1.5", "15e-1", "0.15E1", "1.50"},
		{"1e400", "10e399", "1.0e400"},
		{"123456789012345678901234567890", "1.2345678901234567890123456789e29"},
	}
	seen := map[string]string{}
	for _, group := range same {
		want := NumberKey([]byte(group[0]))
		for _, n := range group {
			if got := NumberKey([]byte(n)); got != want {
				t.Errorf("NumberKey(%s) = %s, NumberKey(%s) = %s", n, got, group[0], want)
			}
		}
		if other, ok := seen[want]; ok {
			t.Errorf("%s and %s share the key %s", group[0], other, want)
		}
		seen[want] = group[0]
	}
	for _, pair := range [][2]string{
		{"123456789012345678901234567890", "123456789012345678901234567891"},
		{"9007199254740992", "9007199254740993"},
		{"1e400", "1e401"},
		{"5", "-5"},
	} {
		if NumberKey([]byte(pair[0])) == NumberKey([]byte(pair[1])) {
			t.Errorf("%s and %s share a key", pair[0], pair[1])
		}
	}
	if got := NumberKey([]byte("7")); got != "7" {
		t.Errorf("NumberKey(7) = %s: a small integer's key is what AnswerIDKey gives it", got)
	}
}
