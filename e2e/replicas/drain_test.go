package replicas

import (
	"encoding/json"
	"net/http"
	"syscall"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// From SIGTERM until its calls in flight are done, /readyz on admin_listen
// answers 503 with "draining": the kubelet and the load balancer send the
// replica nothing new, and the calls finish.
func TestReadinessFalseWhileDraining(t *testing.T) {
	t.Parallel()
	lab := ts.HTTPLab(t, "", "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\ndrain_timeout = \"20s\"", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{Listeners: 2})
	conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log})
	readyz := func() (int, bool) {
		resp, err := http.Get(h.Base(1) + "/readyz")
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var body struct{ Draining bool }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Draining
	}
	ts.WaitFor(t, "ready", func() bool { code, _ := readyz(); return code == http.StatusOK })
	done := make(chan error, 1)
	go func() {
		res, err := conn.Call("docs__slow", map[string]any{"ms": 3000, "tag": "drain"})
		if err == nil && res.IsError {
			err = errCall(ts.Text(res))
		}
		done <- err
	}()
	lab.WaitStarted(t, "drain")
	h.Signal(syscall.SIGTERM)
	ts.WaitFor(t, "/readyz to say draining", func() bool {
		code, draining := readyz()
		return code == http.StatusServiceUnavailable && draining
	})
	select {
	case err := <-done:
		t.Fatalf("the call ended (%v) before /readyz said draining: not a drain", err)
	default:
	}
	if err := <-done; err != nil {
		t.Errorf("the call in flight: %v", err)
	}
	if err := h.WaitExit(); err != nil {
		t.Errorf("exit: %v", err)
	}
}

type errCall string

func (e errCall) Error() string { return string(e) }
