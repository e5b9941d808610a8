package edge

import (
	"encoding/json"
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// FuzzAnswerID: on every message mcp-go could write (valid JSON), answerID
// finds the id the tokenizer finds, in the same canonical form.
func FuzzAnswerID(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"id":"a\u0041","error":{"code":1}}`, `{"result":1,"id":2}`,
		`{"id":1.0e2,"result":null}`, `{"id":-0,"result":1}`, `{"id":null,"result":1}`, `{"method":"x","id":1}`,
		`{"id":123456789012345678,"result":1}`, `{"id":"<&>","result":1}`, "{\"id\":[1],\"result\":1}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if !json.Valid(msg) {
			return
		}
		id, ok := answerID(msg)
		refID, refOK := testsupport.RefAnswerID(msg)
		if id != refID || ok != refOK {
			t.Fatalf("answerID(%s) = %s, %v; the tokenizer reads %s, %v", msg, id, ok, refID, refOK)
		}
	})
}
