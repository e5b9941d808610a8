package frame

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// Error is a JSON-RPC error mcpmux answers a request with.
type Error struct {
	Code    int
	Message string
	// Data is the error's data as JSON; nil for none.
	Data json.RawMessage
	// Cause is what the error stands for, for errors.Is; it is not sent.
	Cause error
}

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.Cause }

// Errorf is an Error of code with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

var (
	answerHead = []byte(`{"jsonrpc":"2.0","id":`)
	resultHead = []byte(`,"result":`)
	errorHead  = []byte(`,"error":`)
)

// Result is the answer under id, as the client wrote it, with result, a
// JSON object, as it is; one line.
func Result(id, result []byte) []byte {
	out := make([]byte, 0, len(answerHead)+len(id)+len(resultHead)+len(result)+2)
	out = append(out, answerHead...)
	out = append(out, id...)
	out = append(out, resultHead...)
	out = append(out, result...)
	return append(out, '}', '\n')
}

// ErrorAnswer is the error answer under id (nil: null) carrying e; one
// line.
func ErrorAnswer(id []byte, e *Error) []byte {
	if id == nil {
		id = []byte("null")
	}
	details := mcp.JSONRPCErrorDetails{Code: e.Code, Message: e.Message}
	if e.Data != nil {
		details.Data = e.Data
	}
	b, err := json.Marshal(details)
	if err != nil { // data that does not encode: the code and message alone
		b, _ = json.Marshal(mcp.JSONRPCErrorDetails{Code: e.Code, Message: e.Message})
	}
	out := make([]byte, 0, len(answerHead)+len(id)+len(errorHead)+len(b)+2)
	out = append(out, answerHead...)
	out = append(out, id...)
	out = append(out, errorHead...)
	out = append(out, b...)
	return append(out, '}', '\n')
}

// NotificationLine is a notification of method with params (a JSON object, or
// nil for none); one line.
func NotificationLine(method string, params []byte) []byte {
	m, _ := json.Marshal(method)
	out := make([]byte, 0, 40+len(m)+len(params))
	out = append(out, `{"jsonrpc":"2.0","method":`...)
	out = append(out, m...)
	if params != nil {
		out = append(out, `,"params":`...)
		out = append(out, params...)
	}
	return append(out, '}', '\n')
}

// Decoration is what a result of a 2026-07-28 request carries that the
// result of an earlier one does not: its type, the server's identity, and
// for the results of a list or a read the caching hints.
type Decoration struct {
	// Server is the serverInfo of every result.
	Server mcp.Implementation
}

// cacheable is the methods whose results carry caching hints.
var cacheable = map[string]bool{
	string(mcp.MethodToolsList): true, string(mcp.MethodPromptsList): true, string(mcp.MethodResourcesList): true,
	string(mcp.MethodResourcesTemplatesList): true, string(mcp.MethodResourcesRead): true,
	string(mcp.MethodServerDiscover): true,
}

// DecorateOwn gives res, a result of mcpmux's own answering a 2026-07-28
// request of method, what the protocol requires of it and it lacks, as
// Decorate does for a result as bytes; encoding/json then writes _meta
// first, as mcp-go writes its own results.
func (d Decoration) DecorateOwn(res mcp.ResultMetadata, method string) {
	if res.GetResultType() == "" {
		res.SetResultType(mcp.ResultTypeComplete)
	}
	if meta := res.EnsureResultMeta(); meta.ServerInfo() == nil {
		meta.SetServerInfo(d.Server)
	}
	if c, ok := res.(mcp.CacheHintSetter); ok && cacheable[method] {
		if t, ok := res.(interface{ TTL() (int64, bool) }); !ok || !hasTTL(t) {
			c.SetCacheHints(0, mcp.CacheScopePrivate)
		}
	}
}

func hasTTL(t interface{ TTL() (int64, bool) }) bool {
	_, ok := t.TTL()
	return ok
}

// Decorate returns result, the JSON object answering a 2026-07-28 request
// of method, with what the protocol requires of it and it lacks:
// resultType ("complete"), and for a list or a read ttlMs (0) and
// cacheScope ("private"), after its own members; the server's identity
// as the last member of its _meta (a _meta that is not an object gets
// none), or of a _meta added last. Every byte of result stays as it was.
// A result that is not an object comes back as it is.
func (d Decoration) Decorate(result []byte, method string) []byte {
	obj, ok := jsonwire.Members(result)
	if !ok {
		return result
	}
	var top [][]byte
	if obj.Last("resultType") == nil {
		top = append(top, []byte(`"resultType":"complete"`))
	}
	if cacheable[method] && obj.Last("ttlMs") == nil {
		top = append(top, []byte(`"ttlMs":0`))
	}
	if cacheable[method] && obj.Last("cacheScope") == nil {
		top = append(top, []byte(`"cacheScope":"private"`))
	}
	info, _ := json.Marshal(d.Server)
	server := append([]byte(`"`+mcp.MetaKeyServerInfo+`":`), info...)
	if meta := obj.Last("_meta"); meta != nil {
		if m, ok := jsonwire.Members(result[meta.Start:meta.End]); ok && m.Last(mcp.MetaKeyServerInfo) != nil {
			server = nil // the result's own stands
		}
	}
	return withMembers(result, obj, top, server)
}

// WithMetaMember returns result, a JSON object, with member (a
// "key":value span) as the last member of its _meta, or of a _meta added
// last; a _meta that is not an object gets none. Every byte of result
// stays as it was. A result that is not an object comes back as it is.
func WithMetaMember(result, member []byte) []byte {
	obj, ok := jsonwire.Members(result)
	if !ok {
		return result
	}
	return withMembers(result, obj, nil, member)
}

// withMembers is result (whose members are obj) with the members top
// after its own and meta (nil: none) in its _meta, as Decorate places
// them.
func withMembers(result []byte, obj jsonwire.Object, top [][]byte, meta []byte) []byte {
	out := make([]byte, 0, len(result)+len(meta)+64)
	rest := result[:obj.Close]
	if m := obj.Last("_meta"); m != nil {
		metaObj, isObject := jsonwire.Members(result[m.Start:m.End])
		if isObject && meta != nil {
			at := m.Start + metaObj.Close
			out = append(out, result[:at]...)
			out = appendMembers(out, len(metaObj.Members) > 0, [][]byte{meta})
			rest = result[at:obj.Close]
		}
		meta = nil
	}
	out = append(out, rest...)
	out = appendMembers(out, len(obj.Members) > 0, top)
	if meta != nil {
		out = appendMembers(out, len(obj.Members) > 0 || len(top) > 0, [][]byte{append(append([]byte(`"_meta":{`), meta...), '}')})
	}
	return append(out, result[obj.Close:]...)
}

// appendMembers appends the "key":value spans ms, after a comma when the
// object already has members.
func appendMembers(out []byte, comma bool, ms [][]byte) []byte {
	for _, m := range ms {
		if comma {
			out = append(out, ',')
		}
		out = append(out, m...)
		comma = true
	}
	return out
}

// HTTPStatus is the HTTP status the answer to a 2026-07-28 request has
// when it is the JSON-RPC error code: intermediaries act on failures
// without reading the body.
func HTTPStatus(code int) int {
	switch code {
	case mcp.METHOD_NOT_FOUND:
		return http.StatusNotFound
	case mcp.HEADER_MISMATCH, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, mcp.UNSUPPORTED_PROTOCOL_VERSION,
		mcp.INVALID_REQUEST, mcp.INVALID_PARAMS, mcp.PARSE_ERROR:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// Event is msg, one JSON-RPC message, as a server-sent event.
func Event(msg []byte) []byte {
	msg = bytes.TrimRight(msg, "\r\n")
	out := make([]byte, 0, len(msg)+len("event: message\ndata: \n\n"))
	out = append(out, "event: message\ndata: "...)
	out = append(out, msg...)
	return append(out, "\n\n"...)
}

// RawData is the data of a JSON-RPC error (any value: a decoded one, or
// json.RawMessage) as JSON; nil for none or for one that cannot be encoded.
func RawData(d any) json.RawMessage {
	if d == nil {
		return nil
	}
	if raw, ok := d.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil
	}
	return b
}
