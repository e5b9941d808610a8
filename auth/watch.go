package auth

import (
	"context"
	"errors"
	"fmt"
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

// Watch keeps the JWT keys current until ctx is done.
//
// Keys from the identity provider (jwks_url, or discovery) are fetched at
// once, then every jwks_refresh, and when a token that names the
// configured issuer names a kid none of the keys has (at most once per
// UnknownKIDRefreshEvery; the token waits for that fetch, at most twice
// jwks_timeout). With discovery, the issuer's openid-configuration is
// read first, and again after any failed fetch; its issuer must be the
// configured one. Fetches are over https (plain http to loopback only,
// also after a redirect), within jwks_timeout, of at most MaxJWKSBody
// bytes. A failed fetch is retried with backoff (1s doubling to 1m, at
// most jwks_refresh); meanwhile the last keys stay in force until
// jwks_max_stale after the fetch that brought them, then no JWT is
// accepted until a fetch succeeds. Until the first fetch succeeds no JWT
// is accepted. An answer that is a JWKS without a usable key revokes the
// keys at once, as such a file does. Each change of state is logged once.
//
// With a jwks_file, when anything changes in the directory of the JWKS
// file (which sees editors that rename a new file over the old one and
// Kubernetes swapping its ..data symlink), the file is re-read once the
// directory has been quiet for about 100ms.
//
// It fails closed: a file that is deleted, empty, not a JWKS or without a
// usable key revokes every key, so that no JWT is accepted until a usable
// file is back; this is logged as an error once per bad state (a reload
// that finds the same missing file or the same bad content again is
// silent). A usable file replaces the keys in force with its own; those
// of its keys that are refused are logged, each with why. Save the file
// by renaming a new one over it: a reload that sees a file written in
// place half-way through revokes the keys until the write is complete.
//
// Watch returns nil at once when JWT is not configured. Otherwise it
// returns nil once ctx is done and everything it started has stopped, or
// an error if it could not start watching. Only one Watch may run at a
// time.
func (a *Authenticator) Watch(ctx context.Context) error {
	if a.jwt == nil {
		return nil
	}
	if !a.watching.CompareAndSwap(false, true) {
		return errors.New("auth: Watch is already running")
	}
	defer a.watching.Store(false)
	if r := a.jwt.remote; r != nil {
		r.run(ctx)
		return nil
	}

	r := &jwksReloader{a: a, file: a.jwt.cfg.JWKSFile}
	err := dirwatch.Watch(ctx, filepath.Dir(r.file), dirwatch.Options{
		Settle:   settleDelay,
		MaxDelay: maxDelay,
		Rewatch:  rewatchInterval,
		Log:      a.log,
		ErrorMsg: "watching the JWKS directory",
		GoneMsg:  "JWKS directory is gone; no JWT is accepted until it is back",
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
	a    *Authenticator
	file string
}

// reload re-reads the JWKS file and puts what it finds in force: its keys,
// or none if it is not usable. Finding the same content with the same
// outcome again changes nothing and logs nothing. If the directory is
// gone, the file is too, and dirwatch waits for the directory.
func (r *jwksReloader) reload() {
	j := r.a.jwt
	cur := j.keys.Load()
	next := loadKeySet(r.file)
	changed := !next.same(cur)
	if changed {
		j.keys.Store(next)
		if next.err != nil {
			r.a.log.Error().Err(next.err).Str("file", r.file).Msg("JWKS file not usable; no JWT is accepted until it is fixed")
		} else {
			next.logRefused(r.a.log, "file", r.file)
			r.a.log.Info().Str("file", r.file).Int("keys", len(next.all)).Int("refused", len(next.refused)).
				Bool("restored", cur.err != nil).Msg("JWKS reloaded")
		}
	}
	if r.a.testHookReload != nil {
		r.a.testHookReload(changed, next.err)
	}
}
