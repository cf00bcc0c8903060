package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is a redis-server StartServer started on a loopback port, with
// no persistence.
type Server struct {
	Port   int
	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
}

// StartServer starts redis-server on port, its files in dir, with the
// extra arguments after the others, and returns once it logs that it
// accepts connections; or an error with its log, if it exits first or
// is not ready within 30 s (it is killed then). The server dies with the
// test process on Linux.
func StartServer(port int, dir string, extra ...string) (*Server, error) {
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}, extra...)
	s := &Server{Port: port, cmd: exec.Command("redis-server", args...), exited: make(chan struct{})}
	dieWithParent(s.cmd)
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	var log bytes.Buffer
	var logMu sync.Mutex
	go func() {
		defer close(s.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if strings.Contains(sc.Text(), "Ready to accept connections") {
				close(ready)
				_, _ = io.Copy(io.Discard, out)
				break
			}
		}
		_ = s.cmd.Wait()
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.exited:
		logMu.Lock()
		defer logMu.Unlock()
		return nil, fmt.Errorf("redis-server on port %d exited before it was ready:\n%s", port, log.String())
	case <-time.After(30 * time.Second):
		s.Kill()
		logMu.Lock()
		defer logMu.Unlock()
		return nil, fmt.Errorf("redis-server on port %d not ready within 30s:\n%s", port, log.String())
	}
}

// Addr is the server's address.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Exited is closed once the server has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Kill kills the server (SIGKILL: a crash) and waits for it to exit.
func (s *Server) Kill() {
	s.once.Do(func() { _ = s.cmd.Process.Kill() })
	<-s.exited
}
