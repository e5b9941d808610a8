package toolsearch

import (
	"slices"
	"testing"
)

func TestTerms(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"getFileInfo", []string{"get", "file", "info"}},
		{"list_directory", []string{"list", "directori"}},
		{"HTTPServer", []string{"http", "server"}},
		{"Creates a new issue in the repository", []string{"creat", "new", "issu", "repositori"}},
		{"created creating creates create", []string{"creat", "creat", "creat", "creat"}},
		{"running files queries", []string{"run", "file", "queri"}},
		{"k8s-pods", []string{"k8s", "pod"}},
		{"search READMEs and URLs", []string{"search", "readm", "url"}},
		{"URLServer", []string{"url", "server"}},
		{"IDs, PRs", []string{"id", "prs"}},
		{"what's in someone else's folder", []string{"someon", "folder"}},
		{"directories directory", []string{"directori", "directori"}},
		{"aggregation aggregate", []string{"aggreg", "aggreg"}},
		{"how many rows, every one", []string{"row", "one"}},
		{"mkdir -p x 2", []string{"mkdir", "2"}},
	} {
		if got := Terms(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Terms(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSearch(t *testing.T) {
	fs := New([]Doc{
		{Name: "fs__read_file", Orig: "read_file", Server: "fs", Description: "Read the complete contents of a file from the file system."},
		{Name: "fs__list_directory", Orig: "list_directory", Server: "fs", Description: "Get a detailed listing of all files and directories in a specified path."},
		{Name: "fs__move_file", Orig: "move_file", Server: "fs", Description: "Move or rename files and directories.",
			Params: []Param{{Name: "source"}, {Name: "destination"}}},
	})
	gh := New([]Doc{
		{Name: "github__create_issue", Orig: "create_issue", Server: "github", Description: "Create a new issue in a GitHub repository."},
		{Name: "github__get_file_contents", Orig: "get_file_contents", Server: "github", Description: "Get the contents of a file or directory from a GitHub repository."},
	})
	all := func(int, int) bool { return true }
	name := func(h Hit) string {
		return [][]string{{"fs__read_file", "fs__list_directory", "fs__move_file"}, {"github__create_issue", "github__get_file_contents"}}[h.Index][h.Doc]
	}
	for _, c := range []struct {
		q     string
		first string
	}{
		{"open a ticket about the bug", "github__create_issue"},
		{"rename a folder", "fs__move_file"},
		{"list the folder", "fs__list_directory"},
		{"read_file", "fs__read_file"},
		{"github__get", "github__get_file_contents"},
	} {
		hits := Search(c.q, 3, []*Index{fs, gh}, all)
		if len(hits) == 0 || name(hits[0]) != c.first {
			var got []string
			for _, h := range hits {
				got = append(got, name(h))
			}
			t.Errorf("Search(%q) = %v, want %s first", c.q, got, c.first)
		}
	}
	if hits := Search("read a file", 5, []*Index{fs, gh}, func(i, d int) bool { return i != 0 }); len(hits) == 0 || hits[0].Index != 1 {
		t.Errorf("keep refused the first index, yet Search found %v", hits)
	}
	if hits := Search("zebra", 5, []*Index{fs, gh}, all); len(hits) != 0 {
		t.Errorf("a word no tool has found %v", hits)
	}
}

func TestQueryWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		// A web address is "url" and its host's name; its path is left out.
		{"get https://example.com/blog/post as markdown", []string{"get", "url", "exampl", "markdown"}},
		{"build it, the design is at figma.com/file/abc", []string{"build", "design", "url", "figma"}},
		// Another scheme names what it connects to.
		{"connect to mongodb://localhost:27017", []string{"connect", "mongodb", "localhost"}},
		// A file name adds "file"; "Next.js" is no file.
		{"read config.yaml", []string{"read", "file", "config", "yaml"}},
		{"docs for Next.js", []string{"doc", "next", "js"}},
		// Two words written apart meet one written as one.
		{"backed up", []string{"back"}},
	} {
		var joined []string
		if got := queryWords(c.in, &joined); !slices.Equal(got, c.want) {
			t.Errorf("queryWords(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var joined []string
	queryWords("when was it backed up", &joined)
	if !slices.Contains(joined, "backup") {
		t.Errorf("queryWords(backed up) joined %q, want backup among them", joined)
	}
	joined = nil
	queryWords("mouse over the menu", &joined)
	if !slices.Contains(joined, "mouseov") {
		t.Errorf("queryWords(mouse over) joined %q, want mouseov among them", joined)
	}
}
