package upstream

import "context"

type identityKey struct{}

// WithIdentity returns a context that carries the caller's authenticated
// identity. Identity never comes from the request body.
func WithIdentity(ctx context.Context, identity string) context.Context {
	return context.WithValue(ctx, identityKey{}, identity)
}

// IdentityFrom returns the identity WithIdentity stored, or "".
func IdentityFrom(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(string)
	return id
}

type claimsKey struct{}

// WithCaller returns a context that carries the caller's authenticated
// identity and the claims of the JWT that named it (nil for any other
// credential), which policy rules may consult. The claims are never
// modified.
func WithCaller(ctx context.Context, identity string, claims map[string]any) context.Context {
	ctx = WithIdentity(ctx, identity)
	if claims != nil {
		ctx = context.WithValue(ctx, claimsKey{}, claims)
	}
	return ctx
}

// ClaimsFrom returns the claims WithCaller stored, or nil.
func ClaimsFrom(ctx context.Context) map[string]any {
	c, _ := ctx.Value(claimsKey{}).(map[string]any)
	return c
}
