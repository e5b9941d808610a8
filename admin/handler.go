package admin

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"

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

// Readiness is the JSON body of /readyz.
type Readiness struct {
	// Ready is true when every required server is ready.
	Ready   bool           `json:"ready"`
	Servers []ServerStatus `json:"servers"`
	Policy  PolicyStatus   `json:"policy"`
}

// ServerStatus is one server in /readyz.
type ServerStatus struct {
	Name     string  `json:"name"`
	State    string  `json:"state"` // a mux.Phase, or "unknown"
	Required bool    `json:"required"`
	Attempt  int     `json:"attempt"`
	LastErr  *string `json:"last_error"` // null when none
	Tools    int     `json:"tools"`
}

// PolicyStatus is the policies' part of /readyz.
type PolicyStatus struct {
	Generation uint64  `json:"generation"`
	LastErr    *string `json:"last_error"` // null when the last reload was clean
}

// Required returns, for Handler, whether each server of cfg is required.
func Required(cfg *config.Config) map[string]bool {
	req := make(map[string]bool, len(cfg.Servers))
	for _, s := range cfg.Servers {
		req[s.Alias] = s.Required
	}
	return req
}

// Handler serves /healthz, /readyz and /metrics; any other path is 404, and
// a method other than GET or HEAD is 405.
//
//   - /healthz answers 200 "ok" as long as the process serves HTTP.
//   - /readyz answers 200 when every required server's phase is ready, and
//     503 otherwise, with a Readiness as its JSON body either way.
//     required maps an alias to whether it is required (Required(cfg));
//     a listed server missing from it counts as required, as the config's
//     default is, and a required alias that status does not list is not
//     ready.
//   - /metrics serves metrics' registry in the Prometheus formats, after
//     setting mcpmux_policy_generation from policy. With metrics nil it is
//     404.
//
// status is (*mux.Mux).Status; policy returns the generation of the
// policies in force and the problems of the last reload
// (Store.Current().Generation(), Store.LastError()); either may be nil.
func Handler(metrics *Metrics, status func() []mux.ChildStatus, required map[string]bool, policy func() (generation uint64, lastErr error)) http.Handler {
	h := http.NewServeMux()
	h.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("ok"))
	})
	h.HandleFunc("GET "+ReadyPath, func(w http.ResponseWriter, r *http.Request) {
		body := readiness(status, required, policy)
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
	if metrics != nil {
		prom := promhttp.HandlerFor(metrics.reg, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
		})
		h.HandleFunc("GET "+MetricsPath, func(w http.ResponseWriter, r *http.Request) {
			if policy != nil {
				gen, _ := policy()
				metrics.setGeneration(gen)
			}
			metrics.refreshIdentities()
			prom.ServeHTTP(w, r)
		})
	}
	return h
}

// readiness computes the body of /readyz.
func readiness(status func() []mux.ChildStatus, required map[string]bool, policy func() (uint64, error)) Readiness {
	body := Readiness{Ready: true, Servers: []ServerStatus{}}
	var children []mux.ChildStatus
	if status != nil {
		children = status()
	}
	seen := make(map[string]bool, len(children))
	for _, c := range children {
		seen[c.Alias] = true
		req, listed := required[c.Alias]
		if !listed {
			req = true
		}
		if req && c.Phase != mux.PhaseReady {
			body.Ready = false
		}
		body.Servers = append(body.Servers, ServerStatus{
			Name:     c.Alias,
			State:    string(c.Phase),
			Required: req,
			Attempt:  c.Attempt,
			LastErr:  errString(c.LastErr),
			Tools:    c.Tools,
		})
	}
	for _, alias := range slices.Sorted(maps.Keys(required)) {
		if required[alias] && !seen[alias] {
			body.Ready = false
			body.Servers = append(body.Servers, ServerStatus{Name: alias, State: stateUnknown, Required: true})
		}
	}
	if policy != nil {
		gen, err := policy()
		body.Policy = PolicyStatus{Generation: gen, LastErr: errString(err)}
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
