package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpmux/mcpmux/internal/dirwatch"
)

// Timing of Watch.
const (
	settleDelay     = 100 * time.Millisecond // quiet time before a reload
	maxDelay        = time.Second            // longest a reload waits for quiet
	rewatchInterval = time.Second            // how often to look for a removed directory
)

// Watch keeps the JWT keys current until ctx is done: when anything changes
// in the directory of the JWKS file (which sees editors that rename a new
// file over the old one and Kubernetes swapping its ..data symlink), the
// file is re-read once the directory has been quiet for about 100ms. A file
// that cannot be read or is not a valid JWKS leaves the current keys in
// force and is logged as an error.
//
// Watch returns nil at once when JWT is not configured. Otherwise it returns
// nil once ctx is done and everything it started has stopped, or an error if
// it could not start watching. Only one Watch may run at a time.
func (a *Authenticator) Watch(ctx context.Context) error {
	if a.jwt == nil {
		return nil
	}
	if !a.watching.CompareAndSwap(false, true) {
		return errors.New("auth: Watch is already running")
	}
	defer a.watching.Store(false)

	r := &jwksReloader{a: a, file: a.jwt.cfg.JWKSFile}
	err := dirwatch.Watch(ctx, filepath.Dir(r.file), dirwatch.Options{
		Settle:   settleDelay,
		MaxDelay: maxDelay,
		Rewatch:  rewatchInterval,
		Log:      a.log,
		ErrorMsg: "watching the JWKS directory",
		GoneMsg:  "JWKS directory is gone; keeping the current keys until it is back",
		BackMsg:  "JWKS directory is back",
		Watching: a.testHookWatching,
	}, r.reload)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}

// jwksReloader is the reload state of one Watch.
type jwksReloader struct {
	a       *Authenticator
	file    string
	lastBad []byte // content of the file last found invalid
}

// reload re-reads the JWKS file and, if it changed and is valid, puts its
// keys in force. A file that is still the invalid content last reported is
// not reported again. If the directory is gone, dirwatch notices and waits
// for it.
func (r *jwksReloader) reload() {
	changed, err := r.reloadJWKS()
	if err != nil {
		r.a.log.Error().Err(err).Str("file", r.file).Msg("JWKS file not usable; keeping the current keys")
	}
	if r.a.testHookReload != nil {
		r.a.testHookReload(changed, err)
	}
}

func (r *jwksReloader) reloadJWKS() (changed bool, err error) {
	j := r.a.jwt
	data, err := os.ReadFile(r.file)
	if err != nil {
		r.lastBad = nil
		return false, err
	}
	if bytes.Equal(data, j.keys.Load().raw) {
		r.lastBad = nil
		return false, nil
	}
	if r.lastBad != nil && bytes.Equal(data, r.lastBad) {
		return false, nil
	}
	ks, err := parseKeySet(data)
	if err != nil {
		r.lastBad = data
		return false, err
	}
	r.lastBad = nil
	ks.logSkipped(r.a.log, r.file)
	j.keys.Store(ks)
	r.a.log.Info().Str("file", r.file).Int("keys", len(ks.all)).Msg("JWKS reloaded")
	return true, nil
}
