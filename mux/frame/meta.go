package frame

import (
	"encoding/json"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// Protocol is what a request declares of its protocol in its _meta. A
// 2026-07-28 request declares its version, its client's capabilities and
// optionally its client and log level on every request; an earlier one
// declared them in initialize, and declares nothing here (Modern false).
type Protocol struct {
	Modern  bool
	Version string
	Client  *mcp.Implementation
	Caps    *mcp.ClientCapabilities
	// LogLevel is the level of log messages the request asks for; "" for
	// none (a 2026-07-28 request gets no log messages then).
	LogLevel mcp.LoggingLevel
}

// Meta is a request's _meta as mcpmux reads it.
type Meta struct {
	// Raw is the _meta as written (an object); nil for none.
	Raw []byte
	// Token is the progress token as written (a string or a number); nil
	// when the client asked for no progress.
	Token []byte
	// Protocol is what the request declares of its protocol.
	Protocol Protocol
}

// protocolPrefix opens the _meta keys the protocol reserves; they belong
// to one hop and are never passed on to a child.
const protocolPrefix = "io.modelcontextprotocol/"

// ReadMeta reads raw, a request's _meta (nil for none). Its error is the
// JSON-RPC error to answer a 2026-07-28 request with whose _meta is
// malformed: capabilities missing or of the wrong shape (-32602), or a
// version this server does not know (its own code, naming the versions
// it knows).
func ReadMeta(raw []byte) (Meta, *Error) {
	m := Meta{Raw: raw}
	if raw == nil {
		return m, nil
	}
	obj, ok := jsonwire.Members(raw)
	if !ok {
		return m, Errorf(mcp.INVALID_PARAMS, "invalid params: _meta must be a JSON object")
	}
	modern := false
	for i := range obj.Members {
		mb := &obj.Members[i]
		switch {
		case mb.Key == "progressToken":
			if v := raw[mb.Start:mb.End]; string(v) != "null" {
				m.Token = v
			}
		case mb.Key == mcp.MetaKeyProtocolVersion:
			v, ok := stringValue(raw[mb.Start:mb.End])
			m.Protocol.Version = v
			modern = ok && mcp.IsModernProtocol(v)
		}
	}
	if !modern {
		return m, nil
	}
	// The rest is read with mcp-go's own types and accessors, as its server
	// reads it: what a 2026-07-28 request declares is what mcp-go's
	// handlers would see.
	var meta mcp.Meta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return m, Errorf(mcp.INVALID_PARAMS, "invalid params: _meta: %v", err)
	}
	p := &m.Protocol
	p.Modern, p.Client, p.LogLevel = true, meta.ClientInfo(), meta.LogLevel()
	if p.Caps = meta.ClientCapabilities(); p.Caps == nil {
		return m, Errorf(mcp.INVALID_PARAMS, "missing or invalid _meta field %s", mcp.MetaKeyClientCapabilities)
	}
	if !mcp.IsValidProtocolVersion(p.Version) {
		e := mcp.UnsupportedProtocolVersionError{Version: p.Version, Supported: mcp.ValidProtocolVersions}.JSONRPCError()
		data, _ := json.Marshal(e.Error.Data)
		return m, &Error{Code: e.Error.Code, Message: e.Error.Message, Data: data}
	}
	return m, nil
}

// ForChild is the _meta of the request sent to a child for this one: the
// client's members but the protocol's, as written, and, when the client
// asked for progress, token (the child's request id, as JSON) as the
// progress token. It is nil when nothing is left.
func (m Meta) ForChild(token []byte) []byte {
	obj, ok := jsonwire.Members(m.Raw)
	if !ok {
		return nil
	}
	var out []byte
	add := func(member []byte) {
		if out == nil {
			out = append(make([]byte, 0, len(m.Raw)+len(token)+16), '{')
		} else {
			out = append(out, ',')
		}
		out = append(out, member...)
	}
	for i := range obj.Members {
		mb := &obj.Members[i]
		if mb.Key == "progressToken" || strings.HasPrefix(mb.Key, protocolPrefix) {
			continue
		}
		add(m.Raw[mb.KeyStart:mb.End])
	}
	if m.Token != nil && token != nil {
		add(append([]byte(`"progressToken":`), token...))
	}
	if out == nil {
		return nil
	}
	return append(out, '}')
}
