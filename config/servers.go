package config

import (
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"regexp"
	"strings"

	"github.com/mcpmux/mcpmux/config/tomlpos"
)

var (
	aliasRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	// userRE matches user and group names as useradd takes them, and ids.
	userRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*\$?$`)
)

var transports = []string{"streamable", "sse"}

var replaceModes = []string{ReplaceStartFirst, ReplaceStopFirst}

// servers decodes [servers.*] in file order.
func (d *decoder) servers(root *table, l Limits) []Server {
	if _, ok := root.m["servers"]; !ok {
		d.errorAt(1, "no servers configured: add at least one [servers.ALIAS] table")
		root.seen["servers"] = true
		return nil
	}
	t := root.table("servers")
	if t.m == nil {
		return nil // not a table; reported
	}
	if len(t.m) == 0 {
		root.errorf("servers", "no servers configured: add at least one [servers.ALIAS] table")
		return nil
	}
	var list []Server
	for _, alias := range t.keysInOrder() {
		st := t.table(alias)
		if st.m == nil {
			continue // not a table; reported
		}
		list = append(list, d.server(st, alias, l))
	}
	return list
}

func (d *decoder) server(t *table, alias string, l Limits) Server {
	s := Server{
		Alias:            alias,
		TrustAnnotations: true,
		Prefix:           true,
		StartupTimeout:   DefaultStartupTimeout,
		Required:         true,
		Replace:          ReplaceStartFirst,
		MaxInFlight:      l.MaxInFlight,
		MaxQueued:        l.MaxQueued,
	}
	switch {
	case !aliasRE.MatchString(alias) || len(alias) > MaxAliasLength:
		t.selfErrorf("invalid alias %q: use lower-case letters, digits and inner '-' (no '_'), at most %d characters",
			alias, MaxAliasLength)
	case alias == ReservedAlias:
		t.selfErrorf("alias %q is mcpmux's own (its find_tools and call_tool): give the server another", alias)
	}
	_, hasCommand := t.m["command"]
	_, hasURL := t.m["url"]
	switch {
	case hasCommand && hasURL:
		t.errorf("url", "cannot be set with command: a server is either started with command or reached at url")
	case !hasCommand && !hasURL:
		t.selfErrorf("command or url is required: command to start a server, url to reach a remote one")
	}
	// With both or neither, the kind of server is unknown: decode every
	// key rather than pile up messages about keys of the other kind.
	local := !hasURL || hasCommand
	remote := !hasCommand || hasURL

	if t.str("command", &s.Command) {
		switch {
		case s.Command == "":
			t.errorf("command", "must not be empty")
		case strings.Contains(s.Command, "/"):
			s.Command = d.abs(s.Command)
		}
	}
	if !local {
		t.onlyWith([]string{"args", "env", "inherit_env", "user", "group"}, "url", "command")
	} else {
		for _, k := range []struct {
			key string
			dst *string
		}{{"user", &s.User}, {"group", &s.Group}} {
			if t.str(k.key, k.dst) && !userRE.MatchString(*k.dst) {
				t.errorf(k.key, "invalid %s %q: give a name or a numeric id", k.key, *k.dst)
			}
		}
		t.strs("args", &s.Args)
		d.stringMap(t, "env", &s.Env, "variable", envNameRE.MatchString, nil)
		if t.strs("inherit_env", &s.InheritEnv) {
			for i, name := range s.InheritEnv {
				if !envNameRE.MatchString(name) {
					t.elemErrorf("inherit_env", i, "invalid variable name %q", name)
				}
			}
		}
	}

	if hasURL {
		s.Transport = DefaultTransport
		s.PingInterval = DefaultPingInterval
	}
	if t.str("url", &s.URL) {
		if msg := urlProblem(s.URL); msg != "" {
			t.errorf("url", "%s", msg)
		}
	}
	if !remote {
		t.onlyWith([]string{"headers", "transport", "ping_interval"}, "command", "url")
	} else {
		d.stringMap(t, "headers", &s.Headers, "header", validHeaderName, checkHeaders)
		t.oneOf("transport", &s.Transport, transports)
		t.duration("ping_interval", &s.PingInterval)
	}

	t.patterns("hide", &s.Hide)
	t.patterns("read_only", &s.ReadOnly)
	t.boolean("trust_annotations", &s.TrustAnnotations)
	t.boolean("prefix", &s.Prefix)
	if t.strs("roots", &s.Roots) {
		for i, r := range s.Roots {
			if msg := rootProblem(r); msg != "" {
				t.elemErrorf("roots", i, "%s", msg)
			}
		}
	}
	t.duration("startup_timeout", &s.StartupTimeout)
	t.boolean("required", &s.Required)
	t.positive("max_in_flight", &s.MaxInFlight)
	t.nonNegative("max_queued", &s.MaxQueued)
	t.oneOf("replace", &s.Replace, replaceModes)
	t.refuse(serverLater)
	t.finish()
	return s
}

// rootProblem says what is wrong with a root the child is told of, or "".
// The protocol has roots be file URIs.
func rootProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "file" || u.Path == "" || !strings.HasPrefix(u.Path, "/") {
		return fmt.Sprintf(`invalid root %q: give an absolute file URI, such as "file:///data"`, s)
	}
	return ""
}

// onlyWith reports each of keys present in a server that has have, saying
// the key needs want instead.
func (t *table) onlyWith(keys []string, have, want string) {
	for _, k := range keys {
		if _, ok := t.lookup(k); ok {
			t.errorf(k, "not allowed with %s: only for a server with %s", have, want)
		}
	}
}

// urlProblem says what is wrong with a remote server's URL, or "".
func urlProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	u, err := url.Parse(s)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Sprintf("invalid URL: %s", oneLine(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return `must be an absolute http or https URL, such as "https://example.com/mcp"`
		}
		return fmt.Sprintf(`must be an http or https URL, such as "https://example.com/mcp", not one with the scheme %q`, u.Scheme)
	}
	if u.Host == "" {
		return `must be an absolute http or https URL with a host, such as "https://example.com/mcp"`
	}
	return ""
}

// checkHeaders reports header values that cannot be sent, and names that
// differ only in case (HTTP header names are case-insensitive).
func checkHeaders(t *table, m map[string]string, names []string) {
	first := make(map[string]string)
	for _, name := range names {
		v, ok := m[name]
		if !ok {
			continue // not a valid string; reported
		}
		if !validHeaderValue(v) {
			// The value may be a secret: never echo it.
			t.errorf(name, "invalid header value: control characters (such as a newline) are not allowed")
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if prev, dup := first[canon]; dup {
			t.errorf(name, "the same header as %s: header names are case-insensitive", t.name(prev))
		} else {
			first[canon] = name
		}
	}
}

// stringMap decodes a table of strings keyed by names (env, headers),
// expanding ${VAR} in the values. valid checks each name; check, when not
// nil, sees the decoded map and its names in file order.
func (d *decoder) stringMap(t *table, key string, dst *map[string]string, what string,
	valid func(string) bool, check func(*table, map[string]string, []string)) {
	raw, ok := t.lookup(key)
	if !ok {
		return
	}
	m, ok := raw.(map[string]any)
	if !ok {
		t.typeError(key, "a table", raw)
		return
	}
	out := make(map[string]string, len(m))
	st := d.subTable(t, key, m)
	names := st.keysInOrder()
	for _, name := range names {
		st.seen[name] = true
		if !valid(name) {
			st.errorf(name, "invalid %s name", what)
		}
		s, ok := m[name].(string)
		if !ok {
			st.typeError(name, "a string", m[name])
			continue
		}
		v, errs := expand(s, d.getenv)
		for _, err := range errs {
			st.errorf(name, "%v", err)
		}
		out[name] = v
	}
	if check != nil {
		check(st, out, names)
	}
	*dst = out
}

// checkNameRoom reports aliases that would leave no room for a tool name
// within max_name_length: at least NameRoom characters, so that a name too
// long to fit can still be shortened to a start and a hash.
func (d *decoder) checkNameRoom(cfg *Config) {
	sep, maxLen := cfg.Mux.Separator, cfg.Mux.MaxNameLength
	if sep != "_" && sep != "__" || maxLen < MinMaxNameLength || maxLen > MaxMaxNameLength {
		return // already reported
	}
	for _, s := range cfg.Servers {
		if len(s.Alias)+len(sep)+NameRoom > maxLen {
			path := []string{"servers", s.Alias}
			d.errorAt(d.ix.Line(path), "[%s]: alias is too long for max_name_length %d: %q leaves no room for a tool name",
				tomlpos.Dotted(path), maxLen, s.Alias+sep)
		}
	}
}
