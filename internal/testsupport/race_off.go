//go:build !race

package testsupport

const raceBuild = false
