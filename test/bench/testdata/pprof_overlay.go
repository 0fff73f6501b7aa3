package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

// The benchmark adds this file to the controller through a build overlay,
// to profile it while it runs; the controller itself has no pprof server.
func init() {
	if addr := os.Getenv("BENCH_PPROF_ADDR"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
