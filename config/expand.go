package config

import (
	"errors"
	"fmt"
	"strings"
)

// expand replaces each ${NAME} in s with the value of NAME from getenv, and
// each "$$" with a literal "$". Any other '$' is an error, so that "$HOME"
// is never silently taken literally. It returns every problem in s: unset
// variables (each named) and malformed references.
func expand(s string, getenv func(string) (string, bool)) (string, []error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	var errs []error
	strayDollar := false
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String(), errs
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "$$"):
			b.WriteByte('$')
			s = s[2:]
		case strings.HasPrefix(s, "${"):
			end := strings.IndexByte(s, '}')
			if end < 0 {
				errs = append(errs, fmt.Errorf("unterminated %q: write ${NAME}", s))
				return b.String(), errs
			}
			name := s[2:end]
			s = s[end+1:]
			if !envNameRE.MatchString(name) {
				errs = append(errs, fmt.Errorf("invalid variable name %q in ${%s}", name, name))
				continue
			}
			v, ok := getenv(name)
			if !ok {
				errs = append(errs, fmt.Errorf("environment variable %s is not set", name))
				continue
			}
			b.WriteString(v)
		default:
			if !strayDollar {
				errs = append(errs, errors.New(`"$" must start ${NAME} or be doubled ("$$" for a literal "$")`))
				strayDollar = true
			}
			b.WriteByte('$')
			s = s[1:]
		}
	}
}
