package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/netutil"

	"github.com/image-updater/argocd-image-updater/internal/servertls"
)

// errServerFailed stops the controller with an error: see runController.
var errServerFailed = errors.New("server failed")

// serverLimits bound what one client of the health, metrics and webhook
// servers can hold: an idle keep-alive connection, slow headers, a slow
// request, its headers' size, and how many connections are served at once
// (more wait in the kernel's backlog).
type serverLimits struct {
	idle, header, read time.Duration
	headerBytes        int
	connections        int
}

var defaultServerLimits = serverLimits{idle: 90 * time.Second, header: 10 * time.Second, read: time.Minute, headerBytes: 64 << 10, connections: 256}

func serve(ctx context.Context, name, host string, port int, handler http.Handler, tlsConfig *tls.Config, logger *slog.Logger, errs chan<- error) {
	serveWithin(ctx, defaultServerLimits, name, host, port, handler, tlsConfig, logger, errs)
}

func serveWithin(ctx context.Context, lim serverLimits, name, host string, port int, handler http.Handler, tlsConfig *tls.Config, logger *slog.Logger, errs chan<- error) {
	srv := &http.Server{Handler: handler, TLSConfig: tlsConfig, ReadHeaderTimeout: lim.header,
		ReadTimeout: lim.read, IdleTimeout: lim.idle, MaxHeaderBytes: lim.headerBytes}
	if tlsConfig != nil {
		// HTTP/2 only where the configuration offers it (--enable-http2).
		srv.Protocols = servertls.Protocols(tlsConfig)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		errs <- fmt.Errorf("%s server on port %d: %w", name, port, err)
		return
	}
	l = netutil.LimitListener(l, lim.connections)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("serving", "server", name, "port", port, "tls", tlsConfig != nil)
	if tlsConfig != nil {
		// The certificate comes from TLSConfig.GetCertificate.
		err = srv.ServeTLS(l, "", "")
	} else {
		err = srv.Serve(l)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs <- fmt.Errorf("%s server on port %d: %w", name, port, err)
	}
}
