package policy

import (
	"os"
	"testing"
)

// writeFile writes a file in place (truncating it first, as most programs
// do), failing the test on error.
func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tool returns the Item a policy is asked about for a tool.
func tool(name string, readOnly bool) Item {
	return Item{Kind: Tool, Name: name, ReadOnly: readOnly}
}
