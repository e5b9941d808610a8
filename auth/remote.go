package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/mcpmux/mcpmux/config"
)

// Limits and timing of keys fetched from the identity provider.
const (
	// MaxJWKSBody bounds a JWKS or openid-configuration response.
	MaxJWKSBody = 1 << 20
	// UnknownKIDRefreshEvery is the least time between two fetches asked
	// for by tokens naming an unknown kid: a flood of made-up kids costs
	// the provider one request per interval.
	UnknownKIDRefreshEvery = 10 * time.Second
	// retryMin and retryMax bound the backoff between failed fetches (and
	// never exceed jwks_refresh).
	retryMin = time.Second
	retryMax = time.Minute
	// maxRedirects a fetch follows.
	maxRedirects = 5
)

// errUnknownKID is keyFunc's error for a token whose kid names no key.
var errUnknownKID = errors.New("no key with the token's kid")

// remoteKeys fetches the JWKS from the identity provider (jwks_url, or
// the jwks_uri of the issuer's openid-configuration) and puts it in force
// in keys. Its one goroutine is run, owned by Watch.
type remoteKeys struct {
	cfg    config.JWT
	keys   *atomic.Pointer[keySet]
	log    zerolog.Logger
	client *http.Client

	// limiter allows fetches asked for by unknown kids; demand is the
	// round such a fetch completes (nil when none is asked for), and wake
	// tells run that one is.
	limiter *rate.Limiter
	demand  atomic.Pointer[fetchRound]
	wake    chan struct{}
	running atomic.Bool

	retryMin, retryMax time.Duration // tests shorten them
	// testHookFetch, if set, is called by run after each fetch attempt
	// (err nil when the provider answered with a JWKS), and with
	// errStale when the keys in force expire.
	testHookFetch func(err error)
}

// fetchRound is one fetch that requests with an unknown kid wait for.
type fetchRound struct{ done chan struct{} }

// errStale is testHookFetch's report that the keys expired.
var errStale = errors.New("keys expired")

func newRemoteKeys(cfg config.JWT, keys *atomic.Pointer[keySet], log zerolog.Logger) *remoteKeys {
	r := &remoteKeys{
		cfg:      cfg,
		keys:     keys,
		log:      log,
		limiter:  rate.NewLimiter(rate.Every(UnknownKIDRefreshEvery), 1),
		wake:     make(chan struct{}, 1),
		retryMin: retryMin,
		retryMax: retryMax,
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	r.client = &http.Client{Transport: tr, CheckRedirect: checkRedirect}
	src := cfg.JWKSURL
	if cfg.Discovery {
		src = discoveryURL(cfg.Issuer)
	}
	keys.Store(&keySet{err: fmt.Errorf("%s: not fetched yet", r.label(src))})
	return r
}

// checkRedirect follows a redirect only where keys may come from, and
// never from https down to plain http.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if why := urlProblem(req.URL); why != "" {
		return fmt.Errorf("redirected to %s, which %s", req.URL.Redacted(), why)
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("redirected from https to plain http %s", req.URL.Redacted())
	}
	return nil
}

// urlProblem says why u cannot be where keys come from, or "": https, or
// plain http to this machine only (as config decodes jwks_url).
func urlProblem(u *url.URL) string {
	switch {
	case u.Host == "" || u.Opaque != "":
		return "is not an absolute URL"
	case u.Scheme == "https":
		return ""
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return ""
	case u.Scheme == "http":
		return "is plain HTTP to another machine: keys must come over https"
	}
	return "is not an https URL"
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

func discoveryURL(issuer string) string {
	return strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
}

// label names where keys come from in errors and logs.
func (r *remoteKeys) label(u string) string {
	switch {
	case !r.cfg.Discovery:
		return "jwks_url " + u
	case u == discoveryURL(r.cfg.Issuer):
		return "discovery " + u
	}
	return "jwks_uri " + u + " (from discovery)"
}

// refresh asks run for a fetch on behalf of a token with an unknown kid,
// and waits for it. It reports whether a fetch completed: false when the
// rate limit refused one (and none was already asked for), when Watch is
// not running, or when ctx ended or twice jwks_timeout passed first (a
// fetch may wait for the one before it).
func (r *remoteKeys) refresh(ctx context.Context) bool {
	if !r.running.Load() {
		return false
	}
	rd := r.demand.Load()
	if rd == nil {
		if !r.limiter.Allow() {
			return false
		}
		rd = &fetchRound{done: make(chan struct{})}
		if !r.demand.CompareAndSwap(nil, rd) {
			if rd = r.demand.Load(); rd == nil {
				return false
			}
		}
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	t := time.NewTimer(2 * r.cfg.JWKSTimeout)
	defer t.Stop()
	select {
	case <-rd.done:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// run fetches the keys at once, then every jwks_refresh, when a token
// names an unknown kid (see refresh), and after a failure with backoff,
// until ctx is done. It logs one line per change of state: keys fetched
// or changed, a fetch failing while the last keys are kept, the keys
// expiring, no keys at all.
func (r *remoteKeys) run(ctx context.Context) {
	r.running.Store(true)
	defer func() {
		r.running.Store(false)
		if rd := r.demand.Swap(nil); rd != nil {
			close(rd.done)
		}
	}()
	var (
		jwksURL = r.cfg.JWKSURL // "" with discovery until found
		failing bool            // the last fetch failed
		retry   time.Duration   // backoff after failures
		expiry  = time.NewTimer(0)
	)
	expiry.Stop()
	defer expiry.Stop()
	for {
		for len(r.wake) > 0 {
			<-r.wake
		}
		rd := r.demand.Load()
		var err error
		if jwksURL == "" {
			jwksURL, err = r.discover(ctx)
		}
		var ks *keySet
		if err == nil {
			ks, err = r.fetch(ctx, jwksURL)
		}
		if ctx.Err() != nil {
			return
		}
		next := r.cfg.JWKSRefresh
		if err != nil {
			if r.cfg.Discovery {
				jwksURL = "" // the issuer may have moved its keys
			}
			r.failed(err, failing)
			failing = true
			retry = min(max(2*retry, r.retryMin), r.retryMax, r.cfg.JWKSRefresh)
			next = retry
		} else {
			r.fetched(ks, jwksURL, failing)
			failing, retry = false, 0
			if ks.err == nil {
				expiry.Reset(time.Until(ks.expires))
			}
		}
		if rd != nil {
			r.demand.CompareAndSwap(rd, nil)
			close(rd.done)
		}
		if r.testHookFetch != nil {
			r.testHookFetch(err)
		}
		if !r.wait(ctx, next, expiry) {
			return
		}
	}
}

// wait returns true after d, or once a token asks for a fetch, false once
// ctx is done. The keys in force expire meanwhile when expiry fires.
func (r *remoteKeys) wait(ctx context.Context, d time.Duration, expiry *time.Timer) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-r.wake:
			if r.demand.Load() != nil {
				return true
			}
		case <-expiry.C:
			if cur := r.keys.Load(); cur.err == nil && !time.Now().Before(cur.expires) {
				r.expire(cur)
			}
		}
	}
}

// fetched puts what the provider answered in force and logs what changed.
func (r *remoteKeys) fetched(ks *keySet, u string, failing bool) {
	cur := r.keys.Load()
	r.keys.Store(ks)
	if ks.err != nil {
		if !ks.same(cur) {
			r.log.Error().Err(ks.err).Str("url", u).Msg("JWKS from the identity provider not usable; no JWT is accepted until it is fixed")
		}
		return
	}
	restored := cur.err != nil
	if !restored && !failing && ks.same(cur) {
		return
	}
	ks.logRefused(r.log, "url", u)
	r.log.Info().Str("url", u).Int("keys", len(ks.all)).Int("refused", len(ks.refused)).
		Bool("restored", restored).Time("valid_until", ks.expires).Msg("JWKS fetched")
}

// failed records a fetch that failed: the keys in force stay in force
// until they expire; keys that expired, or none, give way to err.
func (r *remoteKeys) failed(err error, failing bool) {
	cur := r.keys.Load()
	if cur.err == nil {
		kept := *cur
		kept.fetchErr = err
		if !time.Now().Before(cur.expires) {
			r.expire(&kept)
			return
		}
		r.keys.Store(&kept)
		if !failing {
			r.log.Warn().Err(err).Time("valid_until", cur.expires).
				Msg("JWKS fetch failed; the last keys stay in force until valid_until unless a fetch succeeds")
		}
		return
	}
	next := &keySet{err: err, fetched: cur.fetched}
	if !cur.fetched.IsZero() {
		next.err = r.staleErr(cur.fetched, err)
	}
	r.keys.Store(next)
	if !failing {
		r.log.Error().Err(err).Msg("JWKS fetch failed; no JWT is accepted until a fetch succeeds")
	}
}

// expire takes the keys ks (those in force) out of force once
// jwks_max_stale has passed since they were fetched.
func (r *remoteKeys) expire(ks *keySet) {
	why := ks.fetchErr
	if why == nil {
		why = errors.New("no fetch since")
	}
	r.keys.Store(&keySet{err: r.staleErr(ks.fetched, why), fetched: ks.fetched})
	r.log.Error().Err(why).Time("fetched", ks.fetched).Dur("max_stale", r.cfg.JWKSMaxStale).
		Msg("JWKS keys expired: the identity provider has not answered for jwks_max_stale; no JWT is accepted until a fetch succeeds")
	if r.testHookFetch != nil {
		r.testHookFetch(errStale)
	}
}

func (r *remoteKeys) staleErr(fetched time.Time, why error) error {
	return fmt.Errorf("keys fetched at %s expired after jwks_max_stale %s: %w",
		fetched.Format(time.RFC3339), r.cfg.JWKSMaxStale, why)
}

// discover reads the issuer's openid-configuration and returns its
// jwks_uri, checking that it names the configured issuer.
func (r *remoteKeys) discover(ctx context.Context) (string, error) {
	u := discoveryURL(r.cfg.Issuer)
	body, err := r.get(ctx, u)
	if err != nil {
		return "", fmt.Errorf("%s: %w", r.label(u), err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("%s: not an openid-configuration: %w", r.label(u), err)
	}
	if doc.Issuer != r.cfg.Issuer {
		return "", fmt.Errorf("%s: its issuer is %q, not the configured %q", r.label(u), doc.Issuer, r.cfg.Issuer)
	}
	p, err := url.Parse(doc.JWKSURI)
	if err != nil || doc.JWKSURI == "" {
		return "", fmt.Errorf("%s: jwks_uri %q is not a URL", r.label(u), doc.JWKSURI)
	}
	if why := urlProblem(p); why != "" {
		return "", fmt.Errorf("%s: jwks_uri %q %s", r.label(u), doc.JWKSURI, why)
	}
	return doc.JWKSURI, nil
}

// fetch gets and parses the JWKS at u. An answer that is not a JWKS is an
// error; a JWKS without a usable key is a key set with err set, which
// revokes the keys as such a file does.
func (r *remoteKeys) fetch(ctx context.Context, u string) (*keySet, error) {
	body, err := r.get(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.label(u), err)
	}
	ks := parseKeySet(body)
	if ks.err != nil {
		if !ks.isJWKS {
			return nil, fmt.Errorf("%s: %w", r.label(u), ks.err)
		}
		ks.err = fmt.Errorf("%s: %w", r.label(u), ks.err)
		return ks, nil
	}
	ks.fetched = time.Now()
	ks.expires = ks.fetched.Add(r.cfg.JWKSMaxStale)
	ks.source = r.label(u)
	return ks, nil
}

// get fetches u within jwks_timeout and returns its body, at most
// MaxJWKSBody bytes, if the status is 200.
func (r *remoteKeys) get(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.JWKSTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	resp, err := r.client.Do(req)
	if err != nil {
		// url.Error repeats the URL the caller names.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			err = fmt.Errorf("no answer within jwks_timeout %s", r.cfg.JWKSTimeout)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	if len(body) > MaxJWKSBody {
		return nil, fmt.Errorf("response larger than %d KiB", MaxJWKSBody>>10)
	}
	return body, nil
}
