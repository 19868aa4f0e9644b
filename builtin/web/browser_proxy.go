package web

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/armory-dev/armory/netguard"
)

// guardProxy is the HTTP proxy that tool.browser points Chromium at. Every
// request the page makes (navigations, redirects, subresources, fetch/XHR,
// WebSocket and HTTPS tunnels) reaches the network only through the proxy,
// which dials with the netguard policy: the address checked is the address
// connected to, and Chromium never resolves a name itself. Plain HTTP is
// forwarded with httputil.ReverseProxy; HTTPS and WebSocket use CONNECT
// tunnels. Refused destinations get "403 Forbidden" and are recorded.
//
// One proxy serves one tool call; it listens on 127.0.0.1 on a random port
// and is closed with the call. It is safe for concurrent use.
type guardProxy struct {
	guard *netguard.Guard
	ln    net.Listener
	srv   *http.Server
	rp    *httputil.ReverseProxy

	mu      sync.Mutex
	blocked []string // refused targets, at most maxBlockedRecords
	conns   map[net.Conn]bool
}

const maxBlockedRecords = 50

func startGuardProxy(g *netguard.Guard) (*guardProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &guardProxy{guard: g, ln: ln, conns: map[net.Conn]bool{}}
	tr := g.Transport()
	tr.ForceAttemptHTTP2 = false
	p.rp = &httputil.ReverseProxy{
		// Forward proxy: the incoming request already carries the absolute
		// target URL; Rewrite keeps it and drops forwarding headers.
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.Out.Host = pr.In.Host },
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.refuse(w, r.URL.String(), err)
		},
		ErrorLog: discardLogger,
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          discardLogger,
		ConnState: func(c net.Conn, s http.ConnState) {
			p.mu.Lock()
			defer p.mu.Unlock()
			switch s {
			case http.StateNew:
				p.conns[c] = true
			case http.StateClosed, http.StateHijacked:
				delete(p.conns, c)
			}
		},
	}
	go p.srv.Serve(ln)
	return p, nil
}

// URL is the proxy address for --proxy-server.
func (p *guardProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Blocked returns the refused targets so far.
func (p *guardProxy) Blocked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.blocked...)
}

// Close stops the proxy and every connection and tunnel it holds.
func (p *guardProxy) Close() {
	p.srv.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

func (p *guardProxy) refuse(w http.ResponseWriter, target string, err error) {
	if b, ok := netguard.IsBlocked(err); ok {
		p.mu.Lock()
		if len(p.blocked) < maxBlockedRecords {
			p.blocked = append(p.blocked, target)
		}
		p.mu.Unlock()
		w.Header().Set(blockedHeader, "1")
		http.Error(w, "Blocked by Armory's network policy: "+b.Error(), http.StatusForbidden)
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	http.Error(w, "Armory proxy: "+err.Error(), http.StatusBadGateway)
}

func (p *guardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if !r.URL.IsAbs() || (r.URL.Scheme != "http") {
		// Only absolute http URLs are proxied in the clear; https and ws
		// arrive as CONNECT.
		p.refuse(w, r.URL.String(), &netguard.BlockedError{Host: r.URL.String(), Reason: "only absolute http URLs may be proxied"})
		return
	}
	if err := p.guard.CheckURL(r.URL); err != nil {
		p.refuse(w, r.URL.String(), err)
		return
	}
	r.Header.Del("Proxy-Connection")
	r.Header.Del("Proxy-Authorization")
	p.rp.ServeHTTP(w, r)
}

// tunnel serves CONNECT host:port after the dial guard.
func (p *guardProxy) tunnel(w http.ResponseWriter, r *http.Request) {
	target := "https://" + r.Host
	up, err := p.guard.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		p.refuse(w, target, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "hijacking not supported", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	p.mu.Lock()
	p.conns[down], p.conns[up] = true, true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, down)
		delete(p.conns, up)
		p.mu.Unlock()
		down.Close()
		up.Close()
	}()
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		// Bytes the client sent after the CONNECT header are in buf.
		if n := buf.Reader.Buffered(); n > 0 {
			pending, _ := buf.Reader.Peek(n)
			up.Write(pending)
		}
		io.Copy(up, down)
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() {
		io.Copy(down, up)
		closeWrite(down)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

var discardLogger = log.New(io.Discard, "", 0)

// isProxyRefusal reports whether a Chromium navigation error text is what a
// proxy refusal looks like.
func isProxyRefusal(errText string) bool {
	return strings.Contains(errText, "ERR_TUNNEL_CONNECTION_FAILED") || strings.Contains(errText, "ERR_PROXY_CONNECTION_FAILED")
}
