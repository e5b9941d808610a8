package replicas

import (
	"errors"
	"net/http"

	"github.com/rs/zerolog"
)

// serveAnswered serves r with next and, should next panic before it
// wrote the answer's header, answers 500 rather than let net/http close
// the connection with no answer, which the forwarder's transport would
// take for an idle connection closed and send the request again on (see
// peerClient.exchange). A panic once the header is written goes on, what was
// written flushed first: the answer is begun on the wire and then cut,
// as it would be without forwarding, and a begun answer is never sent
// again.
func serveAnswered(w http.ResponseWriter, r *http.Request, next http.Handler, log zerolog.Logger) {
	aw := &answerWriter{ResponseWriter: w}
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if aw.wrote {
			// What was written may still be in the connection's
			// buffer: on the wire, it is an answer begun, which the
			// transport never sends again; then the panic cuts it.
			_ = http.NewResponseController(w).Flush()
			panic(p)
		}
		if !errors.Is(asError(p), http.ErrAbortHandler) {
			log.Error().Interface("panic", p).Msg("a forwarded request's handler panicked before answering")
		}
		http.Error(w, "Internal Server Error: the replica that owns this session or round failed while answering; the request may or may not have taken effect", http.StatusInternalServerError)
	}()
	next.ServeHTTP(aw, r)
}

func asError(p any) error {
	err, _ := p.(error)
	return err
}

// answerWriter records whether the answer's header was written. Unwrap
// gives http.ResponseController the connection's own writer (flushes,
// deadlines).
type answerWriter struct {
	http.ResponseWriter
	wrote bool
}

func (a *answerWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		a.wrote = true
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWriter) Write(b []byte) (int, error) {
	a.wrote = true
	return a.ResponseWriter.Write(b)
}

// Flush writes the header if it was not: it is written from then on.
func (a *answerWriter) Flush() {
	a.wrote = true
	_ = http.NewResponseController(a.ResponseWriter).Flush()
}

func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }
