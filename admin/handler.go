package admin

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/publish"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux"
)

// Paths that Handler serves.
const (
	HealthPath  = "/healthz"
	ReadyPath   = "/readyz"
	MetricsPath = "/metrics"
)

// stateUnknown is the state /readyz reports for a required server that
// status does not list.
const stateUnknown = "unknown"

// Readiness is the JSON body of /readyz. It says what state each part is
// in, in mcpmux's own words: never a child's or remote server's error text,
// which may carry a remote body.
type Readiness struct {
	// Ready is true when every required server is ready and, with JWT
	// configured, a usable key set is loaded, and mcpmux is not draining.
	Ready bool `json:"ready"`
	// Draining is true once mcpmux is stopping.
	Draining bool           `json:"draining,omitempty"`
	Servers  []ServerStatus `json:"servers"`
	Policy   PolicyStatus   `json:"policy"`
	// Config is there when Sources.Config is.
	Config *ConfigStatus `json:"config,omitempty"`
	// Auth is there when Sources.Keys is.
	Auth *AuthStatus `json:"auth,omitempty"`
	// Pins is there when Sources.Pins is. Held tools and prompts do not
	// make mcpmux unready: it serves everything else.
	Pins *PinsStatus `json:"pins,omitempty"`
}

// PinsStatus is tool and prompt pinning's part of /readyz, as the last
// catalog build found it.
type PinsStatus struct {
	Mode     string  `json:"mode"`       // off, warn or enforce
	Pinned   int     `json:"pinned"`     // live definitions equal to their pins
	New      int     `json:"new"`        // never pinned before (pinned on sight, or held)
	Changed  int     `json:"changed"`    // differ from their pins
	Held     int     `json:"held"`       // left out until approved
	Gone     int     `json:"gone"`       // pinned, no longer listed by a ready server
	InMemory int     `json:"in_memory"`  // pins the pin file could not take
	LastErr  *string `json:"last_error"` // what is wrong with the pin file; null when nothing
}

// ServerStatus is one server in /readyz.
type ServerStatus struct {
	Name     string `json:"name"`
	State    string `json:"state"` // a child.Phase, or "unknown"
	Required bool   `json:"required"`
	Attempt  int    `json:"attempt"`
	// Reason classifies the last error in a few words ("exited", "start
	// failed", "not ready within 10s", "connection refused", "http 5xx",
	// ...: see Reason); null when none.
	Reason *string `json:"reason"`
	Tools  int     `json:"tools"`
}

// PolicyStatus is the policies' part of /readyz.
type PolicyStatus struct {
	Generation uint64  `json:"generation"`
	LastErr    *string `json:"last_error"` // null when the last reload was clean
}

// ConfigStatus is the config file's part of /readyz: the generation in
// force (1 for the file mcpmux started with, one more for every reload
// that changed something) and the problems of the last reload.
type ConfigStatus struct {
	Generation uint64  `json:"generation"`
	LastErr    *string `json:"last_error"` // null when the last reload was clean
}

// AuthStatus is the JWT keys' part of /readyz.
type AuthStatus struct {
	// KeysOK is false while JWT is configured and no usable key set is
	// loaded: every JWT is refused then.
	KeysOK bool   `json:"jwt_keys_ok"`
	Detail string `json:"detail,omitempty"`
}

// Sources are what Handler reports from; any may be nil.
type Sources struct {
	Metrics *Metrics
	// Status is (*mux.Mux).Status.
	Status func() []mux.ChildStatus
	// Required maps an alias to whether it is required (Required(cfg)); a
	// listed server missing from it counts as required, as the config's
	// default is, and a required alias that Status does not list is not
	// ready.
	Required map[string]bool
	// Policy returns the generation of the policies in force and the
	// problems of the last reload (Store.Current().Generation(),
	// Store.LastError()).
	Policy func() (generation uint64, lastErr error)
	// Config returns the config generation in force and the problems of
	// its last reload.
	Config func() (generation uint64, lastErr error)
	// Keys is (*auth.Authenticator).KeysStatus.
	Keys func() (ok bool, detail string)
	// Pins is (*mux.Mux).PinStatus.
	Pins func() publish.PinCounts
	// Draining reports whether mcpmux is stopping (SIGTERM): it is then
	// not ready, so that a load balancer or the kubelet sends it nothing
	// new while its calls in flight finish.
	Draining func() bool
}

// Required returns, for Handler, whether each server of cfg is required.
// Without it, Handler takes what Status says of each server.
func Required(cfg *config.Config) map[string]bool {
	req := make(map[string]bool, len(cfg.Servers))
	for _, s := range cfg.Servers {
		req[s.Alias] = s.Required
	}
	return req
}

// Handler serves /healthz, /readyz and /metrics from src; any other path
// is 404, and a method other than GET or HEAD is 405.
//
//   - /healthz answers 200 "ok" as long as the process serves HTTP.
//   - /readyz answers 200 when every required server's phase is ready and
//     the JWT keys (if any) are usable, and 503 otherwise, with a Readiness
//     as its JSON body either way.
//   - /metrics serves src.Metrics' registry in the Prometheus formats, after
//     setting mcpmux_policy_generation from src.Policy. Without Metrics it
//     is 404.
func Handler(src Sources) http.Handler {
	h := http.NewServeMux()
	h.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("ok"))
	})
	h.HandleFunc("GET "+ReadyPath, func(w http.ResponseWriter, r *http.Request) {
		body := readiness(src)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		code := http.StatusOK
		if !body.Ready {
			code = http.StatusServiceUnavailable
		}
		w.WriteHeader(code)
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(body)
	})
	if metrics := src.Metrics; metrics != nil {
		prom := promhttp.HandlerFor(metrics.reg, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
		})
		h.HandleFunc("GET "+MetricsPath, func(w http.ResponseWriter, r *http.Request) {
			if src.Policy != nil {
				gen, _ := src.Policy()
				metrics.setGeneration(gen)
			}
			metrics.refreshIdentities()
			prom.ServeHTTP(w, r)
		})
	}
	return h
}

// readiness computes the body of /readyz.
func readiness(src Sources) Readiness {
	body := Readiness{Ready: true, Servers: []ServerStatus{}}
	required := src.Required
	var children []mux.ChildStatus
	if src.Status != nil {
		children = src.Status()
	}
	seen := make(map[string]bool, len(children))
	for _, c := range children {
		seen[c.Alias] = true
		req, listed := required[c.Alias]
		if !listed {
			req = required != nil || c.Required
		}
		if req && c.Phase != child.PhaseReady {
			body.Ready = false
		}
		body.Servers = append(body.Servers, ServerStatus{
			Name:     c.Alias,
			State:    string(c.Phase),
			Required: req,
			Attempt:  c.Attempt,
			Reason:   reasonOf(c.LastErr),
			Tools:    c.Tools,
		})
	}
	for _, alias := range slices.Sorted(maps.Keys(required)) {
		if required[alias] && !seen[alias] {
			body.Ready = false
			body.Servers = append(body.Servers, ServerStatus{Name: alias, State: stateUnknown, Required: true})
		}
	}
	if src.Policy != nil {
		gen, err := src.Policy()
		body.Policy = PolicyStatus{Generation: gen, LastErr: errString(err)}
	}
	if src.Config != nil {
		gen, err := src.Config()
		body.Config = &ConfigStatus{Generation: gen, LastErr: errString(err)}
	}
	if src.Keys != nil {
		ok, detail := src.Keys()
		body.Auth = &AuthStatus{KeysOK: ok, Detail: detail}
		if !ok {
			body.Ready = false
		}
	}
	if src.Draining != nil && src.Draining() {
		body.Ready, body.Draining = false, true
	}
	if src.Pins != nil {
		c := src.Pins()
		body.Pins = &PinsStatus{Mode: c.Mode, Pinned: c.Pinned, New: c.New, Changed: c.Changed, Held: c.Held,
			Gone: c.Gone, InMemory: c.InMemory, LastErr: errString(c.FileErr)}
	}
	return body
}

func errString(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

func reasonOf(err error) *string {
	if err == nil {
		return nil
	}
	r := Reason(err)
	return &r
}
