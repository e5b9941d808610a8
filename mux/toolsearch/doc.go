// Package toolsearch ranks a catalog's tools for a query.
package toolsearch
