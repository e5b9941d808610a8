package mux

import (
	"strings"
	"testing"

	"github.com/mcpmux/mcpmux/mux/catalog"
)

// A definition whose members encoding/json reads but the pin digest and
// JavaScript clients do not (a known field in another case, at the top
// level or in a tool's annotations, or a member repeated under case
// folding) is left out, and the log says why; the exact spellings are kept.
func TestCaseFoldedMembersLeftOut(t *testing.T) {
	l := newMergeLab(t, "[servers.main]\ncommand = \"never-started\"\n")
	l.offer(t, "main", [catalog.NumKinds]string{
		catalog.KindTool: `[` +
			`{"name":"t","Description":"x","InputSchema":{"type":"object"}},` +
			`{"name":"u","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"ReadOnlyHint":false}},` +
			`{"name":"v","inputSchema":{"type":"object"},"annotations":{"readonlyhint":true}},` +
			`{"name":"w","description":"a","DESCRIPTION":"b","inputSchema":{"type":"object"}},` +
			`{"name":"fine","description":"x","inputSchema":{"type":"object","properties":{"Description":{"type":"string"}}},"annotations":{"readOnlyHint":true,"Other":1}}` +
			`]`,
		catalog.KindPrompt: `[{"name":"p","Description":"hi"},{"name":"q","description":"hi"}]`,
	})
	if got := strings.Join(l.names(catalog.KindTool), " "); got != "main__fine" {
		t.Errorf("tools exposed %q, want main__fine", got)
	}
	if got := strings.Join(l.names(catalog.KindPrompt), " "); got != "main__q" {
		t.Errorf("prompts exposed %q, want main__q", got)
	}
	log := l.log.String()
	for _, want := range []string{
		`has the member \"Description\" (\"description\" in another case)`,
		`annotations have the member \"ReadOnlyHint\" twice (ignoring case)`,
		`annotations have the member \"readonlyhint\" (\"readOnlyHint\" in another case)`,
		`has the member \"DESCRIPTION\" twice (ignoring case)`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s\n%s", want, log)
		}
	}
	if n := strings.Count(log, "left out: its"); n != 5 {
		t.Errorf("%d items logged as left out, want 5\n%s", n, log)
	}
}
