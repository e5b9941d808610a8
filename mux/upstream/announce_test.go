package upstream

import "testing"

// mcp-go's own list_changed announcements never leave mcpmux; mcpmux's
// pass without their mark, on both edges.
func TestAnnouncements(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		handled        bool
	}{
		{"mcp-go's, to every session", `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n", "", true},
		{"mcp-go's, with params", `{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{}}`, "", true},
		{"mcpmux's", `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"io.mcpmux/own":true}}` + "\n",
			`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}` + "\n", true},
		{"mcpmux's, to a 2026-07-28 listener",
			`{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1},"io.mcpmux/own":true}}`,
			`{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`, true},
		{"another notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"/list_changed\""}}`,
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"/list_changed\""}}`, false},
		{"a request", `{"jsonrpc":"2.0","id":1,"method":"notifications/tools/list_changed"}`,
			`{"jsonrpc":"2.0","id":1,"method":"notifications/tools/list_changed"}`, false},
		{"not JSON", `{"method":"notifications/tools/list_changed"`, `{"method":"notifications/tools/list_changed"`, false},
	} {
		got, handled := Announcement([]byte(c.in))
		if string(got) != c.want || handled != c.handled {
			t.Errorf("%s: Announcement(%s) = %q %t, want %q %t", c.name, c.in, got, handled, c.want, c.handled)
		}
		if c.handled {
			if got, _ := Announcement([]byte(c.in)); string(got) != c.want {
				t.Errorf("%s: the stdio edge writes %q, want %q", c.name, got, c.want)
			}
			event := "event: message\ndata: " + c.in + "\n\n"
			want := ""
			if c.want != "" {
				want = "event: message\ndata: " + c.want + "\n\n"
			}
			if got, _ := FramedAnnouncement([]byte(event)); string(got) != want {
				t.Errorf("%s: the HTTP edge writes %q, want %q", c.name, got, want)
			}
		}
	}
}
