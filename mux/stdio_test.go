package mux

import "testing"

func TestMessageKinds(t *testing.T) {
	cases := []struct {
		msg             string
		request, answer bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, true, false},
		{`{"jsonrpc":"2.0","method":"tools/call","id":"a"}`, true, false},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false, false},
		{`{"jsonrpc":"2.0","id":null,"method":"x"}`, false, false},
		{`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen"}`, false, false},
		{`{"jsonrpc":"2.0","id":8,"method":""}`, true, false}, // answered with an error, so counted
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, false, true},
		{`{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"m"}}`, false, true},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, false, false},
		{`{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}`, true, false},
		{`{"result":{},"jsonrpc":"2.0","id":4}`, false, false}, // id after result: not mcp-go's shape
		{`not json`, false, false},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false, false},
	}
	for _, c := range cases {
		if got := isRequest([]byte(c.msg)); got != c.request {
			t.Errorf("isRequest(%s) = %v", c.msg, got)
		}
		if got := isAnswer([]byte(c.msg + "\n")); got != c.answer {
			t.Errorf("isAnswer(%s) = %v", c.msg, got)
		}
	}
}
