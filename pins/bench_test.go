package pins

import "testing"

// benchDef is a tool definition of a typical size.
const benchDef = `{"name":"search_issues","title":"Search issues","description":"Search issues and pull requests across every repository the token can see, with GitHub's query syntax.","inputSchema":{"type":"object","properties":{"q":{"type":"string","description":"query"},"sort":{"type":"string","enum":["comments","reactions","created","updated"]},"order":{"type":"string","enum":["asc","desc"]},"per_page":{"type":"integer","minimum":1,"maximum":100},"page":{"type":"integer","minimum":1}},"required":["q"]},"annotations":{"readOnlyHint":true,"openWorldHint":true}}`

// BenchmarkCanonical is the cost of pinning one tool of a typical size at
// a catalog build.
func BenchmarkCanonical(b *testing.B) {
	def := []byte(benchDef)
	b.ReportAllocs()
	for b.Loop() {
		d, err := Canonical(Tool, "gh__search_issues", "gh", "search_issues", def)
		if err != nil {
			b.Fatal(err)
		}
		_ = d.Digest()
	}
}

// BenchmarkDigest is the cost of a tool's digest alone, what a child's
// catalog build pays per distinct definition.
func BenchmarkDigest(b *testing.B) {
	def := []byte(benchDef)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Digest(Tool, "gh", "search_issues", def); err != nil {
			b.Fatal(err)
		}
	}
}
