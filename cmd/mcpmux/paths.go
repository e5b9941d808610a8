package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpmux/mcpmux/internal/fileerr"
)

// shown is how the commands name a file in what they print: relative to
// the working directory when the file is inside it (as an operator who
// gave --config mcpmux.toml would write it), else absolute. Every
// FILE:LINE message uses it, for the config, policy and pin files alike.
func shown(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	wd, err := os.Getwd()
	if err != nil {
		return abs
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return abs
	}
	return rel
}

// report writes err to w, one problem a line, its files named as shown
// names them.
func report(w io.Writer, err error) {
	switch es := err.(type) {
	case fileerr.Errors:
		for _, e := range es {
			fmt.Fprintln(w, shownErr(e))
		}
	case *fileerr.Error:
		fmt.Fprintln(w, shownErr(es))
	default:
		fmt.Fprintln(w, err)
	}
}

func shownErr(e *fileerr.Error) *fileerr.Error {
	c := *e
	c.File = shown(c.File)
	return &c
}

// warn writes "FILE:LINE: warning: message".
func warn(w io.Writer, file string, line int, msg string) {
	fmt.Fprintf(w, "%s:%d: warning: %s\n", shown(file), line, msg)
}
