package testsupport

// FidelityToken is the bearer token of identity in the fidelity labs.
func FidelityToken(identity string) string { return "fidelity-token-" + identity + "-3b9e" }
