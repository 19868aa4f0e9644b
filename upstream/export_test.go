package upstream

// The state of the servers, for tests that watch a server restart, fail
// and close. The supervisor keeps it for its own decisions and error
// messages; no surface shows it yet.

// Status is the state of one upstream server.
type Status struct {
	Name     string `json:"name"`
	State    string `json:"state"` // "up", "restarting", "failed", "closed"
	Restarts int    `json:"restarts"`
	PID      int    `json:"pid,omitempty"` // of a running stdio server
	Error    string `json:"error,omitempty"`
	Stderr   string `json:"stderr,omitempty"` // the last bytes of a stdio server's stderr
}

// Status returns the state of every server, in world order.
func (s *Set) Status() []Status {
	out := make([]Status, len(s.servers))
	for i, srv := range s.servers {
		out[i] = srv.status()
	}
	return out
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.cfg.Name, State: s.state, Restarts: s.restarts, PID: s.child.pid, Error: s.lastErr}
	if s.stdio() {
		st.Stderr = s.stderr.String()
	}
	return st
}
