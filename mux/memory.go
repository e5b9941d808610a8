package mux

import (
	"runtime/debug"

	"github.com/mcpmux/mcpmux/internal/childproc"
)

// returnMemory hands the heap's free pages back to the kernel, and the
// pages of code and read-only data that starting and reading catalogs
// touched. Reading a child's catalog leaves garbage several times the
// catalog's size (the child's pages, the decoded lists, the schemas
// compiled to vet them), and at the collector's own pace its pages would
// stay resident until the next collection, which an idle mcpmux has only
// every two minutes. It blocks the caller for one collection, so it is
// called once a catalog is published, never before, and once for all the
// children's first starts.
func returnMemory() {
	debug.FreeOSMemory()
	childproc.DropFilePages()
}
