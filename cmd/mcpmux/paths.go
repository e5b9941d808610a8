package main

import (
	"os"
	"path/filepath"
	"strings"
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
