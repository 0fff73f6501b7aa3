// Package transport holds the HTTP layers between the registry client and
// the network, each an http.RoundTripper wrapping the next: a host guard
// (token realms and redirects to other hosts), metrics, rate limit, a
// deadline per request that covers its body, limits on response bodies,
// retry (with Retry-After), scheme pinning and User-Agent, and the
// registry's authentication (go-containerregistry's challenge and token
// exchange). The client stacks them per registry endpoint.
package transport
