package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
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
	// testHookUnknownKID, if set, is called by verify when a token's kid
	// names none of the keys, before it asks for a fetch.
	testHookUnknownKID func()
}

// fetchRound is one fetch that requests with an unknown kid wait for.
type fetchRound struct {
	done    chan struct{}
	started atomic.Bool // run has begun its fetch
	ok      bool        // the fetch succeeded; valid once done is closed
}

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
	r.client = keyClient(http.DefaultTransport.(*http.Transport).Clone(), cfg.JWKSTimeout)
	src := cfg.JWKSURL
	if cfg.Discovery {
		src = discoveryURL(cfg.Issuer)
	}
	keys.Store(&keySet{err: fmt.Errorf("%s: not fetched yet", r.label(src))})
	return r
}

// keyClient is the HTTP client of every request for keys (the JWKS,
// through jwkset, and the openid-configuration) over base: an answer
// within timeout, a body of at most MaxJWKSBody (reading past it is
// errTooLarge), redirects only to where keys may come from.
func keyClient(base http.RoundTripper, timeout time.Duration) *http.Client {
	return &http.Client{Transport: limitTransport{base}, CheckRedirect: checkRedirect, Timeout: timeout}
}

// errTooLarge is a read past MaxJWKSBody of a response for keys.
var errTooLarge = fmt.Errorf("response larger than %d KiB", MaxJWKSBody>>10)

// limitTransport gives every response a body that ends in errTooLarge
// after MaxJWKSBody bytes.
type limitTransport struct{ base http.RoundTripper }

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: MaxJWKSBody}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach base.
func (t limitTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type limitedBody struct {
	io.ReadCloser
	left int64 // bytes that may still be read
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	// One byte more than allowed tells a body of exactly the limit from a
	// longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - 1, errTooLarge
	}
	return n, err
}

// checkRedirect follows a redirect only where keys may come from, and
// never from https down to plain http, and has it carry nothing of the
// request before but Accept. The redirect may lead to another host: the
// configured one vouches for it, as discovery's jwks_uri does, and what
// mcpmux was configured with (credentials in the URL's userinfo or query)
// goes to the configured host only.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if why := config.KeyURLProblem(req.URL); why != "" {
		return fmt.Errorf("redirected to %s, which %s", req.URL.Redacted(), why)
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("redirected from https to plain http %s", req.URL.Redacted())
	}
	// Go's client copies the first request's headers but Authorization and
	// cookies to any host, and adds a Referer naming the URL before, query
	// and all.
	accept := req.Header.Values("Accept")
	req.Header = http.Header{}
	if len(accept) > 0 {
		req.Header["Accept"] = accept
	}
	return nil
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
// and waits for it. It returns at once when the rate limit refuses one
// (and none was already asked for) or Watch is not running, and when ctx
// ends or twice jwks_timeout passed (a fetch may wait for the one before
// it); the caller looks at the keys in force to learn whether they
// changed. It reports whether a fetch that began after it was called
// succeeded, so that a kid that fetch did not bring is known to be absent.
func (r *remoteKeys) refresh(ctx context.Context) (fetched bool) {
	if !r.running.Load() {
		return false
	}
	rd := r.demand.Load()
	// A round whose fetch has begun may have had the provider's answer
	// before this token came: it proves nothing absent.
	after := rd == nil || !rd.started.Load()
	if rd == nil {
		if !r.limiter.Allow() {
			return false
		}
		rd = &fetchRound{done: make(chan struct{})}
		if !r.demand.CompareAndSwap(nil, rd) {
			if rd = r.demand.Load(); rd == nil {
				return false
			}
			after = !rd.started.Load()
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
		return after && rd.ok
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
		if rd != nil {
			rd.started.Store(true)
		}
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
			rd.ok = err == nil
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
// The kids remembered as absent stay so while the keys stay the same.
func (r *remoteKeys) fetched(ks *keySet, u string, failing bool) {
	cur := r.keys.Load()
	if cur.absent != nil && ks.same(cur) {
		ks.absent = cur.absent
	}
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
		next.err = cur.staleErr(r.cfg.JWKSMaxStale, err)
	}
	r.keys.Store(next)
	if !failing {
		r.log.Error().Err(err).Msg("JWKS fetch failed; no JWT is accepted until a fetch succeeds")
	}
}

// expire takes the keys ks (those in force) out of force once
// jwks_max_stale has passed since they were fetched.
func (r *remoteKeys) expire(ks *keySet) {
	err := ks.staleErr(r.cfg.JWKSMaxStale, ks.fetchErr)
	r.keys.Store(&keySet{err: err, fetched: ks.fetched})
	r.log.Error().Err(err).Time("fetched", ks.fetched).Dur("max_stale", r.cfg.JWKSMaxStale).
		Msg("JWKS keys expired: the identity provider has not answered for jwks_max_stale; no JWT is accepted until a fetch succeeds")
	if r.testHookFetch != nil {
		r.testHookFetch(errStale)
	}
}

// staleErr says that the keys fetched at ks.fetched are older than
// maxStale (jwks_max_stale), and why they were not replaced: why, the
// last fetch's error, or with none, that no fetch was made since.
func (ks *keySet) staleErr(maxStale time.Duration, why error) error {
	if why == nil {
		why = fmt.Errorf("no fetch from %s since", ks.source)
	}
	return fmt.Errorf("keys fetched at %s expired after jwks_max_stale %s: %w",
		ks.fetched.Format(time.RFC3339), maxStale, why)
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
	if why := config.KeyURLProblem(p); why != "" {
		return "", fmt.Errorf("%s: jwks_uri %q %s", r.label(u), doc.JWKSURI, why)
	}
	return doc.JWKSURI, nil
}

// fetch has jwkset get and parse the JWKS at u, once: without a
// RefreshInterval its storage starts no goroutine, and run schedules the
// fetches. An answer that is not a JWKS, or one with a key jwkset cannot
// parse, is an error (the keys in force stay); a JWKS without a usable
// key is a key set with err set, which revokes the keys as such a file
// does.
func (r *remoteKeys) fetch(ctx context.Context, u string) (*keySet, error) {
	store, err := jwkset.NewStorageFromHTTP(u, jwkset.HTTPClientStorageOptions{
		Client:             r.client,
		Ctx:                ctx,
		HTTPTimeout:        r.cfg.JWKSTimeout,
		HTTPExpectedStatus: http.StatusOK,
		RefreshInterval:    0,
		// A key type jwkset does not support (Ed448, one yet to come) is
		// left out, not a reason to refuse the provider's other keys.
		RequireSupportedKeys: false,
	})
	if err != nil {
		// jwkset's outer words speak of a "first" request, which to mcpmux
		// every fetch is; what it wraps says what went wrong.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return nil, fmt.Errorf("%s: %w", r.label(u), r.requestErr(ctx, err))
	}
	keys, err := store.KeyReadAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.label(u), err)
	}
	raw, err := store.JSON(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.label(u), err)
	}
	ks := keySetOf(keys, raw)
	if ks.err != nil {
		ks.err = fmt.Errorf("%s: %w", r.label(u), ks.err)
		return ks, nil
	}
	ks.fetched = time.Now()
	ks.expires = ks.fetched.Add(r.cfg.JWKSMaxStale)
	ks.source = r.label(u)
	ks.absent = &absentKIDs{}
	return ks, nil
}

// get fetches u and returns its body if the status is 200.
func (r *remoteKeys) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, r.requestErr(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the response: %w", r.requestErr(ctx, err))
	}
	return body, nil
}

// requestErr is err, from a request for keys made under ctx, in the words
// an operator needs: the timeout and the size limit by their keys, and
// without net/http's repeating the URL the caller names.
func (r *remoteKeys) requestErr(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("no answer within jwks_timeout %s", r.cfg.JWKSTimeout)
	case errors.Is(err, errTooLarge):
		return errTooLarge
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
