package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults of the [limits] table. Each is far above what normal load needs
// (200 concurrent calls on one session, 1,000 calls/s from one identity),
// and each bounds what one hostile caller or child can make mcpmux hold.
const (
	DefaultMaxMessageBytes        = 16 << 20
	DefaultMaxBodyBytes           = 4 << 20
	DefaultMaxHeaderBytes         = 64 << 10
	DefaultReadHeaderTimeout      = 10 * time.Second
	DefaultReadTimeout            = 30 * time.Second
	DefaultWriteTimeout           = 30 * time.Second
	DefaultIdleTimeout            = 2 * time.Minute
	DefaultMaxSessions            = 10000
	DefaultMaxSessionsPerIdentity = 1000
	DefaultMaxCatalogPages        = 100
	DefaultMaxCatalogBytes        = 32 << 20
	DefaultMaxSchemaBytes         = 1 << 20
	DefaultMaxSchemaDepth         = 64
	DefaultMaxInFlight            = 64
	DefaultMaxQueued              = 1024
)

// Limits is the [limits] table: bounds on everything a caller or a child
// sends, and on the work and memory either can make mcpmux spend.
type Limits struct {
	// MaxMessageBytes bounds one JSON-RPC message in either direction:
	// from a stdio client, a stdio child's line, a remote child's response
	// or event.
	MaxMessageBytes int64
	// MaxBodyBytes bounds one HTTP request body on the upstream.
	MaxBodyBytes int64
	// MaxHeaderBytes bounds an HTTP request's header (http.Server's
	// MaxHeaderBytes).
	MaxHeaderBytes int
	// ReadHeaderTimeout and ReadTimeout bound reading one request's header
	// and body; WriteTimeout bounds one write to a client (a stream stays
	// open as long as its writes go through); IdleTimeout bounds a
	// keep-alive connection between requests.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// MaxSessions bounds the HTTP sessions open at once, in all and per
	// identity.
	MaxSessions            int
	MaxSessionsPerIdentity int
	// MaxCatalogPages and MaxCatalogBytes bound one read of a child's
	// catalog: its tools/list pages, and their size summed.
	MaxCatalogPages int
	MaxCatalogBytes int64
	// MaxSchemaBytes and MaxSchemaDepth bound a child tool's input schema;
	// a tool whose schema is larger or deeper is left out.
	MaxSchemaBytes int64
	MaxSchemaDepth int
	// MaxInFlight and MaxQueued are the defaults of every server's own.
	MaxInFlight int
	MaxQueued   int
	// RateLimit is how many calls per second each identity may make (a
	// token bucket holding RateBurst); 0 means no limit.
	RateLimit float64
	RateBurst int
}

func defaultLimits() Limits {
	return Limits{
		MaxMessageBytes:        DefaultMaxMessageBytes,
		MaxBodyBytes:           DefaultMaxBodyBytes,
		MaxHeaderBytes:         DefaultMaxHeaderBytes,
		ReadHeaderTimeout:      DefaultReadHeaderTimeout,
		ReadTimeout:            DefaultReadTimeout,
		WriteTimeout:           DefaultWriteTimeout,
		IdleTimeout:            DefaultIdleTimeout,
		MaxSessions:            DefaultMaxSessions,
		MaxSessionsPerIdentity: DefaultMaxSessionsPerIdentity,
		MaxCatalogPages:        DefaultMaxCatalogPages,
		MaxCatalogBytes:        DefaultMaxCatalogBytes,
		MaxSchemaBytes:         DefaultMaxSchemaBytes,
		MaxSchemaDepth:         DefaultMaxSchemaDepth,
		MaxInFlight:            DefaultMaxInFlight,
		MaxQueued:              DefaultMaxQueued,
	}
}

// Smallest values the size limits take: below these, ordinary MCP traffic
// (an initialize, a short tools/list page) would not fit.
const (
	MinMessageBytes = 4 << 10
	MinHeaderBytes  = 4 << 10
)

func (d *decoder) limits(t *table, l *Limits) {
	*l = defaultLimits()
	t.sizeAtLeast("max_message_bytes", &l.MaxMessageBytes, MinMessageBytes)
	t.sizeAtLeast("max_body_bytes", &l.MaxBodyBytes, MinMessageBytes)
	header := int64(l.MaxHeaderBytes)
	if t.sizeAtLeast("max_header_bytes", &header, MinHeaderBytes) {
		if header > math.MaxInt32 {
			t.errorf("max_header_bytes", "must be at most 2GiB")
		} else {
			l.MaxHeaderBytes = int(header)
		}
	}
	t.duration("read_header_timeout", &l.ReadHeaderTimeout)
	t.duration("read_timeout", &l.ReadTimeout)
	t.duration("write_timeout", &l.WriteTimeout)
	t.duration("idle_timeout", &l.IdleTimeout)
	t.positive("max_sessions", &l.MaxSessions)
	t.positive("max_sessions_per_identity", &l.MaxSessionsPerIdentity)
	t.positive("max_catalog_pages", &l.MaxCatalogPages)
	t.sizeAtLeast("max_catalog_bytes", &l.MaxCatalogBytes, MinMessageBytes)
	t.sizeAtLeast("max_schema_bytes", &l.MaxSchemaBytes, 1)
	t.positive("max_schema_depth", &l.MaxSchemaDepth)
	t.positive("max_in_flight", &l.MaxInFlight)
	t.nonNegative("max_queued", &l.MaxQueued)
	if t.number("rate_limit", &l.RateLimit) && (l.RateLimit < 0 || math.IsNaN(l.RateLimit) || math.IsInf(l.RateLimit, 0)) {
		t.errorf("rate_limit", "must be a number of calls per second >= 0 (0 means no limit), not %v", l.RateLimit)
		l.RateLimit = 0
	}
	if t.nonNegative("rate_burst", &l.RateBurst) && l.RateBurst > 0 && l.RateLimit == 0 {
		t.errorf("rate_burst", "has no effect without rate_limit")
	}
	if l.RateBurst == 0 && l.RateLimit > 0 {
		l.RateBurst = int(max(1, math.Ceil(l.RateLimit)))
	}
	t.finish()
	if l.MaxSessionsPerIdentity > l.MaxSessions {
		t.errorf("max_sessions_per_identity", "must not exceed max_sessions (%d)", l.MaxSessions)
	}
}

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*(B|KiB|MiB|GiB)?$`)

var sizeUnits = map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}

// ParseSize parses a size as the config writes it: a whole number of
// bytes, optionally followed by B, KiB, MiB or GiB ("16MiB").
func ParseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf(`invalid size %q: use a whole number of bytes or a number and a unit, such as "64KiB" or "16MiB"`, s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	unit := sizeUnits[m[2]]
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("size %q is out of range", s)
	}
	return n * unit, nil
}

// FormatSize writes n as ParseSize reads it, in the largest unit that
// divides it.
func FormatSize(n int64) string {
	for _, u := range []string{"GiB", "MiB", "KiB"} {
		if n != 0 && n%sizeUnits[u] == 0 {
			return strconv.FormatInt(n/sizeUnits[u], 10) + u
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// sizeAtLeast decodes a size, an integer number of bytes or a string such
// as "16MiB", that must be at least least.
func (t *table) sizeAtLeast(key string, dst *int64, least int64) bool {
	v, ok := t.lookup(key)
	if !ok {
		return false
	}
	var n int64
	switch s := v.(type) {
	case int64:
		n = s
	case string:
		var err error
		if n, err = ParseSize(s); err != nil {
			t.errorf(key, "%v", err)
			return false
		}
	default:
		t.errorf(key, `must be a size, a number of bytes or a string such as "16MiB", not %s`, typeName(v))
		return false
	}
	if n < least {
		t.errorf(key, "must be at least %s, not %s", FormatSize(least), FormatSize(n))
		return false
	}
	*dst = n
	return true
}
