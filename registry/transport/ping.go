package transport

import (
	"context"
	"net/http"
	"net/url"
	"sync"
)

// PingOnce sends a registry's ping, the GET /v2/ whose answer says how the
// registry wants to be authenticated, once, and answers every later ping
// from that answer. go-containerregistry pings before it authenticates
// each repository (NewAuth); under one PingOnce per registry and
// credentials, listing a thousand repositories pings once, and each
// repository still gets a token of its own scope.
//
// Only a 200 or 401 answer is kept: anything else fails the caller and
// the next ping is sent again. Concurrent first pings wait for one
// another, each until its own context ends. Drop the PingOnce to ping
// anew (new credentials, or the registry refused the ones in use).
type PingOnce struct {
	next http.RoundTripper
	host string
	// turn is held while the ping is on the wire.
	turn chan struct{}

	mu     sync.Mutex
	answer *pingAnswer
}

// pingAnswer is what go-containerregistry reads of a ping's answer.
type pingAnswer struct {
	status       int
	authenticate []string // WWW-Authenticate
	url          *url.URL // where it came from: its scheme tells http from https
}

// NewPingOnce sends requests through next, and pings of host (host[:port],
// as requests name it) once.
func NewPingOnce(next http.RoundTripper, host string) *PingOnce {
	return &PingOnce{next: next, host: host, turn: make(chan struct{}, 1)}
}

func (p *PingOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Path != "/v2/" || req.URL.Host != p.host {
		return p.next.RoundTrip(req)
	}
	if resp := p.replay(req); resp != nil {
		return resp, nil
	}
	select {
	case p.turn <- struct{}{}:
	case <-req.Context().Done():
		return nil, context.Cause(req.Context())
	}
	defer func() { <-p.turn }()
	if resp := p.replay(req); resp != nil {
		// Answered while this one waited.
		return resp, nil
	}
	resp, err := p.next.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized) {
		return resp, err
	}
	from := req.URL
	if resp.Request != nil {
		from = resp.Request.URL
	}
	a := &pingAnswer{status: resp.StatusCode, authenticate: resp.Header.Values("WWW-Authenticate"), url: from}
	p.mu.Lock()
	p.answer = a
	p.mu.Unlock()
	return resp, nil
}

// Pinged tells whether an answer is kept.
func (p *PingOnce) Pinged() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answer != nil
}

// replay is the kept answer as a response to req, or nil.
func (p *PingOnce) replay(req *http.Request) *http.Response {
	p.mu.Lock()
	a := p.answer
	p.mu.Unlock()
	if a == nil {
		return nil
	}
	h := http.Header{}
	for _, v := range a.authenticate {
		h.Add("WWW-Authenticate", v)
	}
	shown := req.Clone(req.Context())
	u := *a.url
	shown.URL = &u
	return &http.Response{
		Status:     http.StatusText(a.status),
		StatusCode: a.status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  h,
		Body:    http.NoBody,
		Request: shown,
	}
}
