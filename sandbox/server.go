package sandbox

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a long-running process in a sandbox that its caller talks to
// over stdin and stdout, such as a stdio MCP server (StartServer).
type Server struct {
	// Stdin and Stdout are the process's standard input and output. Close
	// Stdin to signal the end of input; Stop closes both.
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	// Backend is the backend that confines the process.
	Backend Backend

	p          *proc
	tmp        string // private temp dir of the helper backends ("" under bwrap)
	stderrDone chan struct{}
	stopOnce   sync.Once
	status     int
}

// StartServer starts argv under policy p the way Run would (same backends,
// confinement, environment, rlimits, pids cgroup and tree kill) and returns
// once it runs, for a process that keeps running and speaks over its stdin
// and stdout. Differences from Run: stdin is a pipe (Server.Stdin) and
// stdout is returned unread (Server.Stdout); stderr is copied to stderr (a
// nil stderr discards it) as it arrives; p.Timeout, p.MaxOutput and
// p.StdoutTee do not apply (the process runs until it exits or Stop), and
// Limits.CPU defaults to no limit. The warm pool is not used.
//
// Errors are Run's: an invalid policy (ErrPolicy), an unavailable backend
// (ErrUnavailable), a command not found, or a failed set-up. The caller
// must call Stop, also after the process exited on its own.
func StartServer(p Confinement, argv []string, stderr io.Writer) (*Server, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, policyErr("empty command")
	}
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, policyErr("argument contains NUL")
		}
	}
	if p.Limits.CPU == 0 {
		p.Limits.CPU = -1
	}
	r, err := resolve(p)
	if err != nil {
		return nil, err
	}
	det := Detect()
	backend := r.Backend
	if backend == BackendAuto {
		if backend = det.Best; backend == "" {
			return nil, det.unavailable(BackendAuto)
		}
	}
	if err := det.Check(backend); err != nil {
		return nil, err
	}
	s := &Server{Backend: backend, stderrDone: make(chan struct{})}
	var l *launch
	switch backend {
	case BackendBwrap:
		env := r.environment("/tmp")
		if _, err := lookPath(argv[0], env); err != nil {
			return nil, err
		}
		l, err = newBwrapLaunch(r, det, env, argv, nil)
	default:
		if s.tmp, err = os.MkdirTemp("", "armory-sandbox-"); err != nil {
			return nil, fmt.Errorf("sandbox: private temp dir: %w", err)
		}
		l, err = newHelperLaunch(r, det, backend, argv, s.tmp)
	}
	if err != nil {
		s.removeTmp()
		return nil, err
	}
	l.stdin = true
	if s.p, err = startLaunch(l, time.Now().Add(warmupBound)); err != nil {
		s.removeTmp()
		return nil, err
	}
	s.Stdin, s.Stdout = s.p.inW, s.p.outR
	if stderr == nil {
		stderr = io.Discard
	}
	go func() {
		defer close(s.stderrDone)
		_, _ = io.Copy(stderr, s.p.errR)
	}()
	return s, nil
}

// Done is closed when the process has exited (the sandbox's outermost
// process: once it is gone, so is everything it started).
func (s *Server) Done() <-chan struct{} { return s.p.exited }

// Pid is the pid of the sandbox's outermost process (bwrap, or the helper).
func (s *Server) Pid() int { return s.p.pid }

// Stop kills whatever is left of the process tree, reaps it, closes the
// pipes, removes the run's cgroup and temp dir, and returns the exit status
// (128+N for signal N). It waits at most for the namespace teardown bound
// and for stderr's copy to end (pipeGrace after the kill). Calling it
// again returns the same status.
func (s *Server) Stop() int {
	s.stopOnce.Do(func() {
		s.p.stop()
		select {
		case <-s.stderrDone:
		case <-time.After(pipeGrace):
		}
		s.p.outR.Close()
		s.p.errR.Close()
		s.p.inW.Close()
		<-s.stderrDone
		s.p.l.destroyCgroup()
		s.removeTmp()
		if ws, ok := s.p.l.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			if ws.Signaled() {
				s.status = 128 + int(ws.Signal())
			} else {
				s.status = ws.ExitStatus()
			}
		}
	})
	return s.status
}

func (s *Server) removeTmp() {
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
}
