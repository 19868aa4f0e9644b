package testenv

import (
	"net"
	"sync"
	"testing"
)

// HelloServer listens on 127.0.0.1 and writes "hello\n" to every
// connection, then closes it: the peer of tests that prove a sandbox
// blocks or grants the network. It stops when the test ends; the listener's
// address is returned.
func HelloServer(t testing.TB) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			c.Close()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().(*net.TCPAddr)
}
