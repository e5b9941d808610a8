package mux

import "testing"

func TestAllowedOrigin(t *testing.T) {
	cases := []struct {
		origin, host string
		want         bool
	}{
		{"http://127.0.0.1:7300", "127.0.0.1:7300", true},
		{"http://localhost:3000", "127.0.0.1:7300", true},
		{"http://[::1]:8080", "127.0.0.1:7300", true},
		{"https://mcpmux.example.com", "mcpmux.example.com", true},
		{"https://evil.example.com", "127.0.0.1:7300", false},
		{"https://evil.example.com", "mcpmux.example.com", false},
		{"null", "127.0.0.1:7300", false},
		{"http://127.0.0.1.evil.example.com", "127.0.0.1:7300", false},
	}
	for _, c := range cases {
		if got := allowedOrigin(c.origin, c.host); got != c.want {
			t.Errorf("allowedOrigin(%q, %q) = %v, want %v", c.origin, c.host, got, c.want)
		}
	}
}
