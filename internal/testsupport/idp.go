package testsupport

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Paths an IdP serves.
const (
	IdPJWKSPath      = "/jwks"
	IdPDiscoveryPath = "/.well-known/openid-configuration"
)

// IdP is an identity provider for tests: an HTTPS server (httptest's TLS
// server, its certificate for 127.0.0.1) that serves a JWKS at
// IdPJWKSPath and an openid-configuration at IdPDiscoveryPath naming its
// own URL as issuer and its JWKS as jwks_uri. It counts the requests to
// each path, and can go down (its listener closed: connections refused)
// and come back on the same address.
type IdP struct {
	t         testing.TB
	addr      string
	transport *http.Transport   // trusts its certificate
	cert      *x509.Certificate // the same after Up

	mu        sync.Mutex
	srv       *httptest.Server // nil while down
	jwks      []byte
	discovery []byte                      // nil: the default document
	handlers  map[string]http.HandlerFunc // overrides per path
	requests  map[string]int
}

// StartIdP starts an IdP serving jwks; it is closed when the test ends.
func StartIdP(t testing.TB, jwks []byte) *IdP {
	t.Helper()
	p := &IdP{t: t, jwks: jwks, handlers: map[string]http.HandlerFunc{}, requests: map[string]int{}}
	srv := httptest.NewTLSServer(http.HandlerFunc(p.serve))
	p.srv, p.addr = srv, srv.Listener.Addr().String()
	p.transport, p.cert = srv.Client().Transport.(*http.Transport), srv.Certificate()
	t.Cleanup(p.Down)
	return p
}

// URL is the IdP's base URL, also its issuer: https://127.0.0.1:PORT.
func (p *IdP) URL() string { return "https://" + p.addr }

// JWKSURL is the URL of its JWKS.
func (p *IdP) JWKSURL() string { return p.URL() + IdPJWKSPath }

// SetJWKS replaces the JWKS served.
func (p *IdP) SetJWKS(jwks []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jwks = jwks
}

// SetDiscovery serves doc as the openid-configuration.
func (p *IdP) SetDiscovery(doc map[string]any) {
	b, err := json.Marshal(doc)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.discovery = b
}

// Handle answers requests to path with h instead (nil: as by default).
func (p *IdP) Handle(path string, h http.HandlerFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h == nil {
		delete(p.handlers, path)
	} else {
		p.handlers[path] = h
	}
}

// Requests returns how many requests for path the IdP received.
func (p *IdP) Requests(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[path]
}

func (p *IdP) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests[r.URL.Path]++
	h, jwks, doc := p.handlers[r.URL.Path], p.jwks, p.discovery
	p.mu.Unlock()
	switch {
	case h != nil:
		h(w, r)
	case r.URL.Path == IdPJWKSPath:
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(jwks)
	case r.URL.Path == IdPDiscoveryPath:
		if doc == nil {
			doc, _ = json.Marshal(map[string]any{"issuer": p.URL(), "jwks_uri": p.JWKSURL()})
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	default:
		http.NotFound(w, r)
	}
}

// Down stops the IdP: its listener is closed and its connections too.
func (p *IdP) Down() {
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Up starts the IdP again on its address, with the same certificate.
func (p *IdP) Up() {
	p.t.Helper()
	var ln net.Listener
	WaitFor(p.t, "the IdP's address free again", func() bool {
		var err error
		ln, err = net.Listen("tcp", p.addr)
		return err == nil
	})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.StartTLS()
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
}

// Transport returns a new HTTP transport that trusts the IdP's
// certificate.
func (p *IdP) Transport() *http.Transport { return p.transport.Clone() }

// CertFile writes the IdP's certificate as PEM to a new file and returns
// its path: SSL_CERT_FILE for a process that is to trust the IdP.
func (p *IdP) CertFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idp-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
