package naming

// The resource URI scheme. A prefixed child's resource URI u is exposed as
// mcpmux://<alias>/u, u kept exactly as the child wrote it, so routing back
// is a prefix strip and never depends on what u looks like. Aliases are
// valid URI hosts (lower-case letters, digits, inner '-'), so exposed URIs
// are valid URIs, distinct across children, and a template gains only a
// literal prefix, so it stays an RFC 6570 template whose every expansion is
// the exposed form of the child's expansion.

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/mcpmux/mcpmux/config"
	"github.com/yosida95/uritemplate/v3"
)

// uriScheme begins every exposed resource URI and template.
const uriScheme = "mcpmux://"

// ExposeURI is the URI a prefixed child's resource uri is offered under.
func ExposeURI(alias, uri string) string {
	return uriScheme + alias + "/" + uri
}

// ExposeTemplate is the URI template a prefixed child's template tmpl is
// offered under. The prefix is an RFC 6570 literal, so the result is a
// valid template whenever tmpl is, and expanding it with any values gives
// ExposeURI(alias, the expansion of tmpl with the same values).
func ExposeTemplate(alias, tmpl string) string {
	return ExposeURI(alias, tmpl)
}

// SplitURI is the inverse of ExposeURI (and of ExposeTemplate): it reports
// the alias and the child's URI exactly, and ok false for anything not of
// the form mcpmux://<alias>/<rest> with a valid alias. The scheme is
// matched without regard to case, as RFC 3986 asks; the alias is not,
// because no alias has upper-case letters.
func SplitURI(exposed string) (alias, uri string, ok bool) {
	if len(exposed) < len(uriScheme) || !strings.EqualFold(exposed[:len(uriScheme)], uriScheme) {
		return "", "", false
	}
	rest := exposed[len(uriScheme):]
	i := strings.IndexByte(rest, '/')
	if i < 0 || !validAlias(rest[:i]) {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// validAlias applies config's alias rule: 1 to config.MaxAliasLength
// lower-case letters and digits in runs joined by single '-'.
func validAlias(a string) bool {
	if a == "" || len(a) > config.MaxAliasLength || a[0] == '-' || a[len(a)-1] == '-' {
		return false
	}
	for i := 0; i < len(a); i++ {
		switch c := a[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && a[i-1] != '-':
		default:
			return false
		}
	}
	return true
}

// URITemplate is a compiled RFC 6570 template. Match takes no lock, so one
// compiled template may serve every call at once.
type URITemplate struct {
	raw string
	re  *regexp.Regexp
}

// CompileTemplate parses s as an RFC 6570 template (level 4).
func CompileTemplate(s string) (*URITemplate, error) {
	t, err := uritemplate.New(s)
	if err != nil {
		return nil, fmt.Errorf("uri template %q: %w", s, err)
	}
	re, err := templateRegexp(t)
	if err != nil {
		return nil, fmt.Errorf("uri template %q: %w", s, err)
	}
	return &URITemplate{raw: s, re: re}, nil
}

// templateRegexp is t's matching expression, the one mcp-go's server
// routes resources/read by, so a bare URI reaches the child whose own
// server would have accepted it. uritemplate compiles it with MustCompile,
// which panics on what Go's regexp refuses (over 1000 variables in one
// expression); that template is refused instead.
func templateRegexp(t *uritemplate.Template) (re *regexp.Regexp, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("too complex to match: %v", r)
		}
	}()
	return t.Regexp(), nil
}

// Match reports whether uri is an expansion of the template.
func (t *URITemplate) Match(uri string) bool {
	return t.re.MatchString(uri)
}

// String is the template as written.
func (t *URITemplate) String() string { return t.raw }
