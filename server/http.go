package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/armory-dev/armory"
)

// hostPolicy is the DNS-rebinding defence: the Host header must name this
// server, and an Origin header, when present, must be this server's origin
// or an allowed one.
type hostPolicy struct {
	names   []string // hostnames accepted on any port (lower case)
	exact   []string // host:port values accepted as they are
	origins []string // allowed origins besides the same origin
}

func newHostPolicy(addr string, allowHosts, allowOrigins []string) (hostPolicy, error) {
	hp := hostPolicy{names: []string{"localhost", "127.0.0.1", "::1"}}
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return hp, armory.E("server", armory.KindInvalid, fmt.Sprintf("bad listen address %q: %v", addr, err))
	}
	if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
		hp.names = append(hp.names, strings.ToLower(h))
	}
	for _, a := range allowHosts {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err == nil {
			hp.exact = append(hp.exact, a)
		} else {
			hp.names = append(hp.names, strings.Trim(a, "[]"))
		}
	}
	for _, o := range allowOrigins {
		u, err := url.Parse(strings.TrimSpace(o))
		if err != nil || u.Scheme == "" || u.Host == "" {
			return hp, armory.E("server", armory.KindInvalid, fmt.Sprintf("bad allowed origin %q (want scheme://host[:port])", o))
		}
		hp.origins = append(hp.origins, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	return hp, nil
}

// hostOK reports whether a Host header names this server.
func (hp hostPolicy) hostOK(hostHeader string) bool {
	hh := strings.ToLower(hostHeader)
	if hh == "" {
		return false
	}
	if slices.Contains(hp.exact, hh) {
		return true
	}
	name := hh
	if h, _, err := net.SplitHostPort(hh); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	return slices.Contains(hp.names, name)
}

// originOK reports whether an Origin header (non-empty) is the request's
// own origin or an allowed one. "null" is never allowed.
func (hp hostPolicy) originOK(origin, hostHeader string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if strings.EqualFold(u.Host, hostHeader) {
		return true
	}
	return slices.Contains(hp.origins, strings.ToLower(u.Scheme+"://"+u.Host))
}

// guardHTTP applies the checks every request gets: Host, Origin, a path
// in canonical form (checkPath), the body limit, and a read deadline that ends once the body has been read (so that
// a long call is not cut by ReadTimeout).
func (s *Server) guardHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts.hostOK(r.Host) {
			s.writeError(w, r, armory.E("", armory.KindPermission, "the Host header does not name this server (start it with --allow-host to accept another name)"))
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !s.hosts.originOK(o, r.Host) {
			s.writeError(w, r, armory.E("", armory.KindPermission, "cross-origin requests are not allowed from "+o))
			return
		}
		if err := checkPath(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// long marks a route whose response lasts as long as a tool call or an
// event stream: it lifts the deadline on the whole response, and the read
// deadline once the body has been read. Each write is still bounded, by
// WriteTimeout from the moment it starts (stallBound): a client that stops
// reading cannot hold a response, what it carries and the handler's
// goroutines for longer than that.
func (s *Server) long(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		rc.SetWriteDeadline(time.Time{})
		if r.Body == nil || r.Body == http.NoBody || r.Method == http.MethodGet {
			rc.SetReadDeadline(time.Time{})
		} else {
			r.Body = &liftAtEOF{ReadCloser: r.Body, rc: rc}
		}
		sw := &stallBound{ResponseWriter: w, rc: rc, timeout: s.opts.WriteTimeout, stalled: s.metrics.stalled.Inc}
		next.ServeHTTP(sw, r)
		// What net/http writes after the handler (the end of a chunked
		// body) gets the same bound.
		rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	})
}

// stallBound gives each write of a long response its own deadline. A
// write that misses it fails, and net/http then cancels the request's
// context and closes the connection once the handler returns; the first
// such failure is counted (armory_stalled_writes_total).
type stallBound struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	stalled func()

	mu      sync.Mutex
	counted bool
}

func (w *stallBound) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	n, err := w.ResponseWriter.Write(p)
	w.failed(err)
	return n, err
}

func (w *stallBound) FlushError() error {
	w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	err := w.rc.Flush()
	w.failed(err)
	return err
}

// Flush is FlushError for writers up the chain that know only
// http.Flusher.
func (w *stallBound) Flush() { w.FlushError() }

func (w *stallBound) failed(err error) {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.counted {
		w.counted = true
		w.stalled()
	}
}

func (w *stallBound) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// liftAtEOF clears the connection's read deadline when the body ends.
type liftAtEOF struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *liftAtEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// decodeJSON reads a JSON object body into v, rejecting unknown fields
// and trailing data.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return armory.E("", armory.KindInvalid, "the request body must be a JSON object")
		}
		return armory.E("", armory.KindInvalid, "bad JSON body: "+err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return err
		}
		return armory.E("", armory.KindInvalid, "bad JSON body: data after the object")
	}
	return nil
}
