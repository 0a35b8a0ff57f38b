package testutil

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a target and can degrade them the way a
// network does:
//
//   - Cut stops all traffic at once, the way a partition does: while cut,
//     nothing it has read is delivered and new connections wait, so the
//     peers see silence, not a closed connection. Restore delivers what was
//     held back, in order (a statement sent during the cut reaches the
//     server late, which is what a late write after a partition is).
//   - Down closes every connection and each new one at once, the way a
//     stopped server is (the peers see a closed connection, then refused
//     ones), until Restore.
//   - SetLatency delays every chunk by a one-way latency in each direction
//     (a request/response exchange takes two of them more); chunks keep
//     their order and are not serialised behind each other's delay.
//   - SetBandwidth limits each direction of each connection to a number of
//     bytes per second.
//
// The settings apply to open connections from their next chunk on. It
// listens on a loopback port and closes everything when the test ends.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener
	done   chan struct{}

	latency atomic.Int64 // one-way, nanoseconds
	rate    atomic.Int64 // bytes per second per direction; 0: unlimited

	mu    sync.Mutex
	down  bool          // Down: connections are closed, new ones at once
	open  chan struct{} // closed while traffic flows
	conns []net.Conn
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port).
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: listen: %v", err)
	}
	p := &Proxy{t: t, target: target, ln: ln, done: make(chan struct{}), open: make(chan struct{})}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut stops all traffic through the proxy until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // already cut
	}
}

// Down stops the database the way a stopped server is: every open
// connection is closed, and new ones are closed as soon as they are
// accepted, until Restore.
func (p *Proxy) Down() {
	p.mu.Lock()
	p.down = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Restore lets traffic flow again (after Cut or Down).
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// SetLatency delays every chunk by d in each direction (0: none).
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(max(d, 0))) }

// SetBandwidth limits each direction of each connection to bytesPerSecond
// (0: unlimited).
func (p *Proxy) SetBandwidth(bytesPerSecond int64) { p.rate.Store(max(bytesPerSecond, 0)) }

// gate blocks while the proxy is cut; false means the proxy is closing.
func (p *Proxy) gate() bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return true
	case <-p.done:
		return false
	}
}

// sleep waits for d unless the proxy closes first (false).
func (p *Proxy) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.done:
		return false
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		p.track(c)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if !p.gate() {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			p.track(up)
			p.wg.Add(2)
			go p.pipe(up, c)
			go p.pipe(c, up)
		}()
	}
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

// chunk is what one read returned, with when.
type chunk struct {
	b    []byte
	read time.Time
	err  error // the read's error, after b; ends the stream
}

// pipe copies src to dst: a reader takes chunks as they come, so that
// latency delays each of them by the same amount instead of adding up, and
// the writer holds each one while the proxy is cut, until its latency has
// passed, and for as long as the bandwidth needs.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	chunks := make(chan chunk, 64)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			c := chunk{b: buf[:n], read: time.Now(), err: err}
			select {
			case chunks <- c:
			case <-p.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var free time.Time // when the bandwidth allows the next byte
	for c := range chunks {
		if len(c.b) > 0 {
			if !p.gate() || !p.sleep(time.Until(c.read.Add(time.Duration(p.latency.Load())))) {
				return
			}
			if rate := p.rate.Load(); rate > 0 {
				free = later(free, time.Now())
				if !p.sleep(time.Until(free)) {
					return
				}
				free = free.Add(time.Duration(int64(len(c.b)) * int64(time.Second) / rate))
			}
			if _, err := dst.Write(c.b); err != nil {
				src.Close()
				return
			}
		}
		if c.err != nil {
			if !errors.Is(c.err, io.EOF) {
				src.Close()
			}
			return
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (p *Proxy) close() {
	close(p.done)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
