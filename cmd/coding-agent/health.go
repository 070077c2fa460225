package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
)

// healthTimeout bounds the probe: a listener that has not answered by then
// is not healthy.
const healthTimeout = 5 * time.Second

// health is the health command, the image's HEALTHCHECK: GET /healthz of
// the listener server.listen names, on this machine (an unspecified host,
// 0.0.0.0, :: or none, is asked on loopback). 0 when it answers 200, 1
// otherwise, saying what it got.
func health(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) int {
	url, err := healthURL(cfg.Server.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "coding-agent health: %v\n", err)
		return exitFailure
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "coding-agent health: %v\n", err)
		return exitFailure
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "coding-agent health: %v\n", err)
		return exitFailure
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "coding-agent health: GET %s answered %d: %s\n", url, resp.StatusCode, strings.TrimSpace(string(body)))
		return exitFailure
	}
	fmt.Fprintf(stdout, "ok: GET %s answered 200\n", url)
	return exitOK
}

// healthURL is the /healthz URL of the listener at listen.
func healthURL(listen string) (string, error) {
	if listen == "" {
		return "", fmt.Errorf("server.listen is not set: no listener serves /healthz (set it, e.g. 127.0.0.1:8080, or 0.0.0.0:8080 in a container)")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("server.listen %q: %v", listen, err)
	}
	if port == "0" {
		return "", fmt.Errorf("server.listen %q listens on port 0, any free port: the probe cannot know which; give it a port", listen)
	}
	switch ip := net.ParseIP(host); {
	case host == "" || (ip != nil && ip.IsUnspecified() && ip.To4() != nil):
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}
