package config

import (
	"slices"
	"testing"
)

func TestEnviron(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin",
		"HOME=/home/u",
		"USER=u",
		"LANG=C.UTF-8",
		"LC_ALL=C",
		"LC_CTYPE=en_US.UTF-8",
		"TMPDIR=/tmp/u",
		"TZ=UTC",
		"SECRET=hunter2",
		"AWS_PROFILE=dev",
		"AWS_SECRET_ACCESS_KEY=k",
		"LCX=no",
		"SSH_AUTH_SOCK=/tmp/ssh",
		"malformed",
		"=C:=C:\\",
		"TZ=Europe/Paris", // a later duplicate wins
	}
	tests := []struct {
		name   string
		server Server
		want   []string
	}{
		{
			name: "basic only",
			want: []string{
				"HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=en_US.UTF-8",
				"PATH=/usr/bin", "TMPDIR=/tmp/u", "TZ=Europe/Paris", "USER=u",
			},
		},
		{
			name:   "inherit",
			server: Server{InheritEnv: []string{"AWS_PROFILE", "UNSET_IN_PARENT"}},
			want: []string{
				"AWS_PROFILE=dev",
				"HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=en_US.UTF-8",
				"PATH=/usr/bin", "TMPDIR=/tmp/u", "TZ=Europe/Paris", "USER=u",
			},
		},
		{
			name: "env overrides",
			server: Server{
				InheritEnv: []string{"SECRET"},
				Env:        map[string]string{"SECRET": "other", "PATH": "/opt/bin", "LAB_SOURCE": "docs", "A": ""},
			},
			want: []string{
				"A=",
				"HOME=/home/u", "LAB_SOURCE=docs", "LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=en_US.UTF-8",
				"PATH=/opt/bin", "SECRET=other", "TMPDIR=/tmp/u", "TZ=Europe/Paris", "USER=u",
			},
		},
		{
			name:   "sorted by name",
			server: Server{Env: map[string]string{"A-B": "1", "A": "2"}},
			want: []string{
				"A=2", "A-B=1",
				"HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=en_US.UTF-8",
				"PATH=/usr/bin", "TMPDIR=/tmp/u", "TZ=Europe/Paris", "USER=u",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.server.Environ(parent)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Environ =\n%q\nwant\n%q", got, tt.want)
			}
			for range 5 { // map order must not leak into the result
				if again := tt.server.Environ(parent); !slices.Equal(again, got) {
					t.Fatalf("Environ is not deterministic: %q, then %q", got, again)
				}
			}
		})
	}
	if got := (Server{}).Environ(nil); len(got) != 0 {
		t.Errorf("Environ(nil) = %q, want nothing", got)
	}
}
