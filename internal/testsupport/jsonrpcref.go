package testsupport

// Reference readers of JSON-RPC, written with encoding/json the way mcp-go
// reads a message: what tests hold mcpmux's own one-scan readers to, and
// how a test client tells which answer is whose.

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// RefAnswerID is the id of msg, an answer (a result or an error before any
// method), in jsonwire.IDKey's canonical form; false for anything else. It
// reads msg with encoding/json's tokenizer.
func RefAnswerID(msg []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	var id any
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch key {
		case "method":
			return "", false
		case "result", "error":
			if id == nil {
				return "", false
			}
			return jsonwire.IDKey(id)
		case "id":
			if dec.Decode(&id) != nil {
				return "", false
			}
			continue
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return "", false
		}
	}
	return "", false
}

// RefRequestID is the id of line, a request, in jsonwire.IDKey's canonical
// form, decoded the way mcp-go's HandleMessage decodes a message (every
// field into an any); false for a message mcp-go does not take for a
// request.
func RefRequestID(line []byte) (string, bool) {
	var msg struct {
		JSONRPC string        `json:"jsonrpc"`
		Method  mcp.MCPMethod `json:"method"`
		ID      any           `json:"id,omitempty"`
		Result  any           `json:"result,omitempty"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.ID == nil {
		return "", false
	}
	if msg.JSONRPC == mcp.JSONRPC_VERSION && (msg.Result != nil || msg.Method == mcp.MethodSubscriptionsListen) {
		return "", false
	}
	return jsonwire.IDKey(msg.ID)
}

// RefCancelled is the request id a notifications/cancelled names, as
// encoding/json reads it; false for any other message.
func RefCancelled(line []byte) (json.RawMessage, bool) {
	var msg struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.Method != string(mcp.MethodNotificationCancelled) ||
		len(msg.Params.RequestID) == 0 || len(msg.ID) > 0 && string(msg.ID) != "null" {
		return nil, false
	}
	return msg.Params.RequestID, true
}

// EdgeRef is what the stdio edge does with a client's line, read with
// encoding/json (as mcp-go reads it).
type EdgeRef struct {
	Refused bool // answered at the edge under a null id, never handed on
	Request bool // a request whose id the edge checks
	Carried bool // its id (a request's, or an answer's) is not one mcp-go writes back as written
	Key     string
}

// RefEdge reads line as the edge must, with a front end (front) or
// without; ok is false for an id the reference cannot compare exactly (a
// number with a huge exponent). The front end refuses, under a null id, a
// message whose members decoders would read differently (package frame).
func RefEdge(line []byte, front bool) (r EdgeRef, ok bool) {
	if f := frame.Read(line); front && f.Refused != nil && f.Kind != frame.Notification {
		return EdgeRef{Refused: true}, true
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
		return r, true
	}
	notNull := func(v json.RawMessage) bool { return len(v) > 0 && string(v) != "null" }
	if m.Method == nil && (notNull(m.Result) || notNull(m.Error)) {
		// The client's answer: its number or string id carried all the
		// same, where mcp-go answers it.
		c := m.ID[0]
		r.Carried = (c == '"' || c == '-' || c >= '0' && c <= '9') && !jsonwire.PlainInteger(m.ID) && !jsonwire.PlainIDJSON(m.ID)
		return r, true
	}
	switch m.ID[0] {
	case 'n':
		var method string
		if m.Method == nil || json.Unmarshal(m.Method, &method) == nil && strings.HasPrefix(method, "notifications/") {
			return r, true
		}
		return EdgeRef{Refused: true}, true
	case '{', '[', 't', 'f':
		return EdgeRef{Refused: true}, true
	}
	key, ok := RefKey(m.ID)
	return EdgeRef{Request: true, Carried: !jsonwire.PlainInteger(m.ID) && !jsonwire.PlainIDJSON(m.ID), Key: key}, ok
}

// RefKey is a string or number id's value in one exact form (big.Rat for a
// number); ok is false for one it will not work out.
func RefKey(id json.RawMessage) (string, bool) {
	if id[0] == '"' {
		var s string
		return "s:" + s, json.Unmarshal(id, &s) == nil
	}
	if i := bytes.IndexAny(id, "eE"); i >= 0 {
		if e, err := strconv.Atoi(string(id[i+1:])); err != nil || e > 1000 || e < -1000 {
			return "", false
		}
	}
	var r big.Rat
	if _, ok := r.SetString(string(id)); !ok {
		return "", false
	}
	return "n:" + r.RatString(), true
}
