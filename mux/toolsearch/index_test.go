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
		{"list_directory", []string{"list", "directory"}},
		{"HTTPServer", []string{"http", "server"}},
		{"Creates a new issue in the repository", []string{"creat", "new", "issu", "repository"}},
		{"created creating creates create", []string{"creat", "creat", "creat", "creat"}},
		{"running files queries", []string{"run", "file", "query"}},
		{"k8s-pods", []string{"k8s", "pod"}},
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
