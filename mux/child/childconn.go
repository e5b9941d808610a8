package child

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/internal/groupwrite"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// childConn is the transport to a stdio child: what mcp-go's client (the
// handshake) and the session need of transport.BidirectionalInterface, on
// the child's stdout (its lineReader) and stdin. It takes each line from
// the child as mcp-go's stdio transport (NewIO) does, and delivers the same
// to the same handlers (childconn_test.go holds the two side by side); an
// answer in the plain shape mcpmux's requests get (see plainAnswer) is
// routed to its request by its id without being decoded, its result handed
// on as the bytes the child wrote. No lock is shared by the calls but the
// one that keeps writes to the pipe whole (out), under which messages
// written at once go out together.
type childConn struct {
	lines io.Reader
	stdin io.WriteCloser
	out   *groupwrite.Writer // stdin, each message whole
	log   zerolog.Logger
	wg    *sync.WaitGroup // the session's: the reader and the child's requests

	waiting sync.Map // wireKey of a request's id -> *connWait

	done      chan struct{} // closed when stdout ends or Close is called
	closeOnce sync.Once
	startOnce sync.Once
	ctx       context.Context // for the child's requests: Start's, ended by Close
	stop      context.CancelFunc

	notifyMu  sync.RWMutex
	onNotify  func(mcp.JSONRPCNotification)
	requestMu sync.RWMutex
	onRequest transport.RequestHandler
}

// connWait is one request waiting for its answer.
type connWait struct {
	id mcp.RequestId
	ch chan *transport.JSONRPCResponse // buffered: the reader never blocks on it
}

var _ transport.BidirectionalInterface = (*childConn)(nil)

// newChildConn returns the transport on a child's stdout (lines) and stdin;
// its goroutines are counted in wg from Start on.
func newChildConn(lines io.Reader, stdin io.WriteCloser, wg *sync.WaitGroup, log zerolog.Logger) *childConn {
	return &childConn{lines: lines, stdin: stdin, out: groupwrite.New(stdin), wg: wg, log: log, done: make(chan struct{})}
}

// Start starts reading the child's stdout; the child's requests are
// handled in contexts derived from ctx, ended by Close.
func (c *childConn) Start(ctx context.Context) error {
	c.startOnce.Do(func() {
		c.ctx, c.stop = context.WithCancel(ctx)
		c.wg.Go(c.read)
	})
	return nil
}

// Close ends the transport: requests waiting fail with
// transport.ErrTransportClosed, and stdin is closed. The reader ends with
// the child's stdout.
func (c *childConn) Close() error {
	c.closeDone()
	if c.stop != nil {
		c.stop()
	}
	if err := c.stdin.Close(); err != nil {
		return fmt.Errorf("failed to close stdin: %w", err)
	}
	return nil
}

func (c *childConn) closeDone() { c.closeOnce.Do(func() { close(c.done) }) }

// GetSessionId is "": a stdio child has no session id.
func (c *childConn) GetSessionId() string { return "" }

// SetNotificationHandler sets what is called, on the reader, with each
// notification from the child.
func (c *childConn) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.onNotify = h
}

// SetRequestHandler sets what answers the child's requests, each on a
// goroutine of its own.
func (c *childConn) SetRequestHandler(h transport.RequestHandler) {
	c.requestMu.Lock()
	defer c.requestMu.Unlock()
	c.onRequest = h
}

// wireKey is the key a request waits under: the id's JSON for a plain
// string id (which the reader finds without decoding), mcp-go's String
// otherwise, as its transport matches ids (by type and value). The two
// never collide: only the first starts with a quote.
func wireKey(id mcp.RequestId) string {
	if s, ok := id.Value().(string); ok && jsonwire.PlainIDString(s) {
		return `"` + s + `"`
	}
	return id.String()
}

// SendRequest writes the request and waits for its answer, ctx's end, or
// the transport's.
func (c *childConn) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	select {
	case <-c.done:
		return nil, transport.ErrTransportClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}
	msg, err := requestLine(req)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal request: %w", err)
	}
	key := wireKey(req.ID)
	w := &connWait{id: req.ID, ch: make(chan *transport.JSONRPCResponse, 1)}
	c.waiting.Store(key, w)
	defer c.waiting.CompareAndDelete(key, w)
	if err := c.write(msg); err != nil {
		return nil, fmt.Errorf("failed to write request: %w", err)
	}
	select {
	case resp := <-w.ch:
		return resp, nil
	case <-c.done:
		select {
		case resp := <-w.ch:
			return resp, nil
		default:
		}
		return nil, transport.ErrTransportClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// SendNotification writes the notification.
func (c *childConn) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	select {
	case <-c.done:
		return transport.ErrTransportClosed
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	msg, err := encodeLine(n)
	if err != nil {
		return fmt.Errorf("failed to marshal notification: %w", err)
	}
	if err := c.write(msg); err != nil {
		return fmt.Errorf("failed to write notification: %w", err)
	}
	return nil
}

// encodeLine is v as json.Marshal writes it (HTML escaped and all), and a
// newline.
func encodeLine(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// requestLine is encodeLine(req); a request of mcpmux's own id whose params
// callParams.plainJSON writes, and which json.Marshal would leave as they
// are, is written without reflection.
func requestLine(req transport.JSONRPCRequest) ([]byte, error) {
	p, ok := req.Params.(callParams)
	id, plain := req.ID.Value().(string)
	if !ok || !plain || !plainName(id) || !plainName(req.Method) || req.JSONRPC != mcp.JSONRPC_VERSION {
		return encodeLine(req)
	}
	body, ok := p.plainJSON()
	if !ok || !marshalsAsIs(body) || !jsonwire.Valid(body) {
		return encodeLine(req)
	}
	b := make([]byte, 0, len(body)+len(id)+len(req.Method)+48)
	b = append(b, `{"jsonrpc":"2.0","id":"`...)
	b = append(b, id...)
	b = append(b, `","method":"`...)
	b = append(b, req.Method...)
	b = append(b, `","params":`...)
	b = append(b, body...)
	return append(b, "}\n"...), nil
}

// marshalsAsIs reports whether encoding/json, which compacts what a
// MarshalJSON method returns and escapes <, >, & and U+2028 and U+2029 in
// it, would leave the JSON b unchanged: no space outside its strings, none
// of those characters (nor any other starting with the byte 0xE2) in them.
func marshalsAsIs(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++ // the escaped byte, whatever it is
		case c == '"':
			in = !in
		case c == '<' || c == '>' || c == '&' || c == 0xE2:
			return false
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return !in
}

func (c *childConn) write(msg []byte) error {
	_, err := c.out.Write(msg)
	return err
}

// read takes the child's lines until its stdout ends, then ends the
// transport. A line that does not end before stdout does is dropped.
func (c *childConn) read() {
	defer c.closeDone()
	br := bufio.NewReaderSize(c.lines, 64<<10)
	var long []byte
	for {
		select {
		case <-c.done:
			return
		default:
		}
		if cap(long) > maxKeptLine {
			long = nil // keep no more than maxKeptLine of a long line's buffer
		}
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			if err != io.EOF && !errors.Is(err, context.Canceled) && !errors.Is(err, fs.ErrClosed) {
				c.log.Error().Err(err).Msg("reading the server's stdout failed")
			}
			return
		}
		c.take(bytes.TrimRight(line, "\r\n"))
	}
}

// take delivers one line (without its end) from the child. The line is
// read into again once take returns.
func (c *childConn) take(line []byte) {
	// A line naming a method (a notification or request, most of what a
	// child sends unasked) is not scanned twice.
	if bytes.Contains(line, []byte(`"method"`)) {
		c.decode(line)
		return
	}
	if id, result, ok := plainAnswer(line); ok && plainIDJSON(id) {
		if v, ok := c.waiting.LoadAndDelete(string(id)); ok {
			w := v.(*connWait)
			w.ch <- &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: w.id, Result: bytes.Clone(result)}
		}
		return
	}
	c.decode(line)
}

// decode delivers a line as mcp-go's stdio transport does: decoded into
// its id and method, then as what they say it is.
func (c *childConn) decode(line []byte) {
	var base struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      *mcp.RequestId `json:"id,omitempty"`
		Method  string         `json:"method,omitempty"`
	}
	if json.Unmarshal(line, &base) != nil {
		return
	}
	if base.Method != "" && base.ID == nil {
		var n mcp.JSONRPCNotification
		if json.Unmarshal(line, &n) != nil {
			return
		}
		c.notifyMu.RLock()
		if c.onNotify != nil {
			c.onNotify(n)
		}
		c.notifyMu.RUnlock()
		return
	}
	if base.Method != "" {
		var req transport.JSONRPCRequest
		if json.Unmarshal(line, &req) == nil {
			c.request(req)
			return
		}
	}
	var resp transport.JSONRPCResponse
	if json.Unmarshal(line, &resp) != nil {
		return
	}
	if v, ok := c.waiting.LoadAndDelete(wireKey(resp.ID)); ok {
		v.(*connWait).ch <- &resp
	}
}

// plainIDJSON reports an id, as JSON, that is a string wireKey keeps as it
// is.
func plainIDJSON(id []byte) bool {
	return len(id) >= 2 && id[0] == '"' && id[len(id)-1] == '"' && jsonwire.PlainIDString(string(id[1:len(id)-1]))
}

// request answers a request from the child on a goroutine of its own, or
// at once when no handler is set.
func (c *childConn) request(req transport.JSONRPCRequest) {
	c.requestMu.RLock()
	h := c.onRequest
	c.requestMu.RUnlock()
	if h == nil {
		c.respond(transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "No request handler configured", nil))
		return
	}
	c.wg.Go(func() {
		ctx := c.ctx
		if err := ctx.Err(); err != nil {
			c.respond(transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil))
			return
		}
		resp, err := h(ctx, req)
		switch {
		case err != nil:
			c.respond(transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil))
		case resp != nil:
			c.respond(resp)
		}
	})
}

// respond writes an answer to a request of the child's; a failure is
// logged, as there is no one else to tell.
func (c *childConn) respond(resp *transport.JSONRPCResponse) {
	msg, err := encodeLine(resp)
	if err != nil {
		c.log.Error().Err(err).Msg("encoding an answer to the server's request failed")
		return
	}
	if err := c.write(msg); err != nil {
		c.log.Error().Err(err).Msg("writing an answer to the server's request failed")
	}
}

// maxKeptLine bounds the buffer a child's long lines leave behind.
const maxKeptLine = 1 << 20

// transportFields are the members mcp-go's stdio transport decodes from a
// line from the child (its probe for an id and method, and
// transport.JSONRPCResponse); encoding/json matches them ignoring case.
var transportFields = [...]string{"jsonrpc", "id", "method", "result", "error"}

// plainAnswer reports whether line is one mcp-go's stdio transport takes
// for a response under a string id, with a result that is a JSON object and
// no error, whatever else it holds, and returns the id (JSON) and the
// result. It accepts only the plain shape: valid JSON, each of the
// transport's fields at most once and spelled as mcp-go writes it,
// "jsonrpc":"2.0", and an id without escapes.
func plainAnswer(line []byte) (id, result []byte, ok bool) {
	if !jsonwire.Valid(line) {
		return nil, nil, false
	}
	top, ok := jsonwire.Members(line)
	if !ok {
		return nil, nil, false
	}
	var jsonrpc []byte
	for _, m := range top.Members {
		v := line[m.Start:m.End]
		switch m.Key {
		case "jsonrpc":
			if jsonrpc != nil {
				return nil, nil, false
			}
			jsonrpc = v
		case "id":
			if id != nil || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
				return nil, nil, false
			}
			id = v
		case "result":
			if result != nil || v[0] != '{' {
				return nil, nil, false
			}
			result = v
		default:
			for _, f := range transportFields {
				if strings.EqualFold(m.Key, f) {
					return nil, nil, false
				}
			}
		}
	}
	if string(jsonrpc) != `"2.0"` || id == nil || result == nil {
		return nil, nil, false
	}
	return id, result, true
}
