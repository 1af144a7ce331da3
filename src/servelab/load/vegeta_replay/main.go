// replay-sender: sends each request of a schedule at its own time, over HTTP/1.1
// connections of its own (keep-alive, one request in flight on each).
//
// servelab writes the schedule (one request a line: offset in microseconds from the
// start, method, target, body number or -1, tab-separated) and reads back one line per
// request: its number in the schedule (the n-th line, due at the n-th offset), when it
// was sent (microseconds from the start), its latency from that send (microseconds),
// the status (0: no answer), bytes of body received, the method, the target and the
// error. The last line of stdout is a JSON summary. Latency from the intended send time
// is lag + latency; servelab computes it, so the sender only records what happened.
//
// It began as vegeta's attacker (github.com/tsenart/vegeta v12.13.0) paced by the
// schedule. Profiled at 10,000 req/s from one CPU, that spent ~66 us of CPU a request;
// of pprof's samples about 30 % went to net/http's client (a request's three
// goroutines, its context, its header maps) and about 20 % to handing every request
// from the pacer to a worker and every result back over unbuffered channels (the Go
// scheduler, futexes, channel operations). What is left here is the part no sender
// avoids (the write and read system calls, ~15 us on loopback) and little else (~34 us
// a request at 20,000 req/s, docs/validation/replay.md):
//   - one pacer, on a thread of its own, waits for each request's time and writes it
//     itself on an idle connection: no hand-off between the schedule and the send;
//   - each connection's goroutine reads its answer (net/http's response reader) and
//     writes the request's line to a shared buffer, flushed to the file a megabyte at a
//     time.
package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

type entry struct {
	due    time.Duration
	method string
	target string
	body   int
}

type body struct {
	ContentType string `json:"content_type"`
	Body        string `json:"body"`
}

// Waits longer than this sleep on the runtime's timer first, up to this much before
// due; the runtime's timer wakes a millisecond late when the process is idle (measured:
// a 50 us sleep took 1.07 ms at p50). The rest is a nanosleep(2) with the thread's timer
// slack at 1 ns (the default 50 us slack made it ~0.1 ms late).
const coarse = 2 * time.Millisecond

// A request longer than this is written by a goroutine of its own, so that a stack slow
// to read it does not hold the pacer.
const bigRequest = 16 << 10

type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

func readSchedule(path string) ([]entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []entry
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; scanner.Scan(); n++ {
		parts := strings.Split(scanner.Text(), "\t")
		if len(parts) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 tab-separated fields", path, n)
		}
		us, err1 := strconv.ParseInt(parts[0], 10, 64)
		b, err2 := strconv.Atoi(parts[3])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: bad offset or body number", path, n)
		}
		out = append(out, entry{time.Duration(us) * time.Microsecond, parts[1], parts[2], b})
	}
	return out, scanner.Err()
}

// sender holds what every request shares.
type sender struct {
	entries   []entry
	addr      string // host:port dialled
	host      string // the Host header
	tls       *tls.Config
	plain     []byte   // header lines of a request without a body
	withBody  [][]byte // header lines and body of each body
	timeout   time.Duration
	keepalive bool
	began     time.Time
	stopped   atomic.Bool
	inflight  sync.WaitGroup
	pool      pool
	out       output
}

// appendTarget writes the schedule's target as the request-target, percent-encoding
// the bytes a request line cannot carry (as Go's URL.RequestURI would).
func appendTarget(buf []byte, target string) []byte {
	if !strings.HasPrefix(target, "/") && target != "*" {
		buf = append(buf, '/')
	}
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c <= ' ' || c >= 0x7f {
			buf = append(buf, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&15])
		} else {
			buf = append(buf, c)
		}
	}
	return buf
}

// request writes entry e as HTTP/1.1 into buf.
func (s *sender) request(buf []byte, e *entry) []byte {
	buf = append(buf[:0], e.method...)
	buf = append(buf, ' ')
	buf = appendTarget(buf, e.target)
	buf = append(buf, " HTTP/1.1\r\nHost: "...)
	buf = append(buf, s.host...)
	buf = append(buf, "\r\n"...)
	if e.body >= 0 && e.body < len(s.withBody) {
		return append(buf, s.withBody[e.body]...)
	}
	buf = append(buf, s.plain...)
	switch e.method {
	case "POST", "PUT", "PATCH": // as Go's client: a request that expects a body says it has none
		buf = append(buf, "Content-Length: 0\r\n"...)
	}
	return append(buf, "\r\n"...)
}

// pool: the idle connections (the last one freed is used first) and how many are open.
type pool struct {
	mu      sync.Mutex
	idle    []*conn
	open    int
	max     int
	waiting bool
	wake    chan struct{}
}

// get takes an idle connection, or says to open one (nil), or waits for one to come
// free when max are open. false: the run was stopped meanwhile.
func (p *pool) get(stop <-chan struct{}) (*conn, bool) {
	for {
		p.mu.Lock()
		if n := len(p.idle); n > 0 {
			c := p.idle[n-1]
			p.idle = p.idle[:n-1]
			c.isIdle = false
			p.mu.Unlock()
			return c, true
		}
		if p.open < p.max {
			p.open++
			p.mu.Unlock()
			return nil, true
		}
		p.waiting = true
		p.mu.Unlock()
		select {
		case <-p.wake:
		case <-stop:
			return nil, false
		}
	}
}

func (p *pool) signal() {
	if p.waiting {
		p.waiting = false
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

func (p *pool) put(c *conn) {
	p.mu.Lock()
	c.isIdle = true
	p.idle = append(p.idle, c)
	p.signal()
	p.mu.Unlock()
}

// drop counts a connection closed that was not idle.
func (p *pool) drop() {
	p.mu.Lock()
	p.open--
	p.signal()
	p.mu.Unlock()
}

// retire takes an idle connection out of the pool (the server closed it); false if the
// pacer took it first (its request is now in flight on it).
func (p *pool) retire(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !c.isIdle {
		return false
	}
	for i, x := range p.idle {
		if x == c {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
	c.isIdle = false
	p.open--
	p.signal()
	return true
}

// output: the line per request, gathered in memory and written a megabyte at a time.
type output struct {
	mu                     sync.Mutex
	buf                    []byte
	f                      *os.File
	err                    error
	sent, answered, failed uint64
}

func (o *output) record(seq, sentNs, latencyNs int64, code int, n int64, e *entry, errText string) {
	o.mu.Lock()
	b := o.buf
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, sentNs/1000, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, latencyNs/1000, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, n, 10)
	b = append(b, '\t')
	b = append(b, e.method...)
	b = append(b, '\t')
	b = append(b, e.target...)
	b = append(b, '\t')
	for i := 0; i < len(errText); i++ {
		if c := errText[i]; c == '\t' || c == '\n' || c == '\r' {
			b = append(b, ' ')
		} else {
			b = append(b, c)
		}
	}
	b = append(b, '\n')
	o.sent++
	if code != 0 {
		o.answered++
	} else {
		o.failed++
	}
	if len(b) >= 1<<20 {
		o.flushLocked(b)
		b = b[:0]
	}
	o.buf = b
	o.mu.Unlock()
}

func (o *output) flushLocked(b []byte) {
	if o.err == nil {
		_, o.err = o.f.Write(b)
	}
}

// conn: one connection and the goroutine that reads its answers. The pacer writes on
// it while it is not idle; seq and sent say which request is in flight (-1: none).
type conn struct {
	s      *sender
	nc     net.Conn
	br     *bufio.Reader
	req    http.Request // the method, for ReadResponse (a HEAD's answer has no body)
	buf    []byte       // requests written from this goroutine
	seq    atomic.Int64
	sent   atomic.Int64 // ns from began
	werr   atomic.Pointer[error]
	wrote  atomic.Bool // the writer of the request in flight is done with it
	used   int         // requests answered on this connection
	isIdle bool        // in pool.idle (pool.mu)
}

var aLongTimeAgo = time.Unix(1, 0)

func (c *conn) dial(deadline time.Time) error {
	d := net.Dialer{Deadline: deadline, KeepAlive: 30 * time.Second}
	nc, err := d.Dial("tcp", c.s.addr)
	if err != nil {
		return err
	}
	if c.s.tls != nil {
		tc := tls.Client(nc, c.s.tls)
		_ = tc.SetDeadline(deadline)
		if err := tc.Handshake(); err != nil {
			nc.Close()
			return err
		}
		nc = tc
	}
	c.nc = nc
	if c.br == nil {
		c.br = bufio.NewReaderSize(nc, 4096)
	} else {
		c.br.Reset(nc)
	}
	c.used = 0
	return nil
}

// write sends request seq on c from this goroutine.
func (c *conn) write(seq int64) error {
	_ = c.nc.SetDeadline(c.s.began.Add(time.Duration(c.sent.Load()) + c.s.timeout))
	c.buf = c.s.request(c.buf, &c.s.entries[seq])
	_, err := c.nc.Write(c.buf)
	c.wrote.Store(true)
	return err
}

// written waits until the request in flight is written (or its write failed): the
// pacer, or a goroutine of its own for a long one, may still be writing it.
func (c *conn) written() {
	for !c.wrote.Load() {
		time.Sleep(50 * time.Microsecond)
	}
}

// start opens the connection for its first request (the pacer's seq) and serves it.
func (c *conn) start() {
	seq := c.seq.Load()
	err := c.dial(c.s.began.Add(time.Duration(c.sent.Load()) + c.s.timeout))
	if err == nil {
		if err = c.write(seq); err != nil {
			c.nc.Close()
		}
	}
	if err != nil {
		c.finish(seq, 0, 0, err.Error())
		c.s.pool.drop()
		return
	}
	c.serve()
}

func idempotent(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// serve reads the answers on c until it closes.
func (c *conn) serve() {
	for {
		_, err := c.br.Peek(1)
		seq := c.seq.Load()
		if seq < 0 {
			// Nothing in flight: the server closed an idle connection (or wrote unasked).
			if c.s.pool.retire(c) {
				c.nc.Close()
				return
			}
			for seq = c.seq.Load(); seq < 0; seq = c.seq.Load() {
				runtime.Gosched() // the pacer has taken it and is about to say for what
			}
		}
		if err != nil {
			c.written()
			if werr := c.werr.Load(); werr != nil {
				err = *werr
			}
			e := &c.s.entries[seq]
			// Nothing came back on a connection used before: the server closed it as the
			// request went out. Sent again on a new one, as Go's client does.
			if c.used > 0 && idempotent(e.method) && !isTimeout(err) {
				c.nc.Close()
				c.werr.Store(nil)
				err = c.dial(c.s.began.Add(time.Duration(c.sent.Load()) + c.s.timeout))
				if err == nil {
					if err = c.write(seq); err == nil {
						continue
					}
					c.nc.Close()
				}
			}
			c.nc.Close()
			c.finish(seq, 0, 0, err.Error())
			c.s.pool.drop()
			return
		}
		code, n, closing, err := c.readResponse(c.s.entries[seq].method)
		errText := ""
		if err != nil {
			errText = err.Error()
		} else if code < 200 || code >= 400 {
			errText = strconv.Itoa(code) + " " + http.StatusText(code)
		}
		c.used++
		c.written()
		if err != nil || closing || !c.s.keepalive || c.werr.Load() != nil {
			c.nc.Close()
			c.finish(seq, code, n, errText)
			c.s.pool.drop()
			return
		}
		_ = c.nc.SetDeadline(time.Time{})
		c.seq.Store(-1)
		c.wrote.Store(false)
		c.finish(seq, code, n, errText)
		c.s.pool.put(c)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readResponse reads one answer (past any 1xx): its status (0 if it did not come whole),
// its body's bytes, and whether the server closes the connection after it.
func (c *conn) readResponse(method string) (int, int64, bool, error) {
	c.req.Method = method
	for {
		resp, err := http.ReadResponse(c.br, &c.req)
		if err != nil {
			return 0, 0, true, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, n, true, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != 101 {
			continue
		}
		return resp.StatusCode, n, resp.Close, nil
	}
}

func (c *conn) finish(seq int64, code int, n int64, errText string) {
	sent := c.sent.Load()
	latency := int64(time.Since(c.s.began)) - sent
	c.s.out.record(seq, sent, latency, code, n, &c.s.entries[seq], errText)
	c.s.inflight.Done()
}

// pace sends each request at its time, on this goroutine's own thread: it waits, takes
// an idle connection (or opens one, or waits for one when -connections are open), and
// writes the request on it.
func (s *sender) pace(stop <-chan struct{}) {
	runtime.LockOSThread()
	// The wait's last stretch is a nanosleep: with a timer slack of 1 ns (prctl
	// PR_SET_TIMERSLACK) it wakes within ~10 us, where the default 50 us slack adds that.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, 29, 1, 0)
	var buf []byte
	for i := range s.entries {
		e := &s.entries[i]
		if !s.waitUntil(e.due) {
			return
		}
		c, ok := s.pool.get(stop)
		if !ok {
			return
		}
		sent := int64(time.Since(s.began))
		s.inflight.Add(1)
		if c == nil {
			c = &conn{s: s}
			c.seq.Store(int64(i))
			c.sent.Store(sent)
			go c.start()
			continue
		}
		c.sent.Store(sent)
		c.seq.Store(int64(i))
		_ = c.nc.SetDeadline(s.began.Add(time.Duration(sent) + s.timeout))
		buf = s.request(buf, e)
		if len(buf) > bigRequest {
			go c.writeAside(append([]byte(nil), buf...))
			continue
		}
		if _, err := c.nc.Write(buf); err != nil {
			c.failWrite(err)
		}
		c.wrote.Store(true)
	}
}

func (c *conn) writeAside(b []byte) {
	if _, err := c.nc.Write(b); err != nil {
		c.failWrite(err)
	}
	c.wrote.Store(true)
}

// failWrite wakes the reader of a connection whose request could not be written.
func (c *conn) failWrite(err error) {
	c.werr.Store(&err)
	_ = c.nc.SetReadDeadline(aLongTimeAgo)
}

// waitUntil returns at due (from began), or false once the run is stopped. The last
// stretch is a raw nanosleep: the pacer keeps its Go processor (there are two at least),
// so that it does not wait for one when it wakes.
func (s *sender) waitUntil(due time.Duration) bool {
	for {
		if s.stopped.Load() {
			return false
		}
		wait := due - time.Since(s.began)
		if wait <= 0 {
			return true
		}
		if wait > coarse {
			time.Sleep(min(wait-coarse, 100*time.Millisecond))
			continue
		}
		ts := syscall.NsecToTimespec(int64(wait))
		_, _, _ = syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
	}
}

func main() {
	// Two Ps at least, even pinned to one CPU: the pacer keeps one for itself while it
	// sleeps, the connections' goroutines run on the other.
	runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	schedulePath := flag.String("schedule", "", "the schedule file")
	bodiesPath := flag.String("bodies", "", "JSON list of {content_type, body}")
	base := flag.String("base", "", "scheme://host:port the targets go to")
	outPath := flag.String("out", "", "where each request's line is written")
	connections := flag.Int("connections", 1000, "connections open at most")
	timeout := flag.Duration("timeout", 10*time.Second, "per request")
	keepalive := flag.Bool("keepalive", true, "reuse connections")
	speed := flag.Float64("speed", 1.0, "the schedule's times are divided by this")
	until := flag.Duration("until", 0, "send only the requests due before this (0: all)")
	cpuprofile := flag.String("cpuprofile", "", "") // for the sender's own profiling: not listed
	var headers headerFlags
	flag.Var(&headers, "header", "'Name: value' sent with every request (repeatable)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage of %s:\n", os.Args[0])
		flag.VisitAll(func(f *flag.Flag) {
			if f.Usage != "" {
				fmt.Fprintf(flag.CommandLine.Output(), "  -%s\n    \t%s\n", f.Name, f.Usage)
			}
		})
	}
	flag.Parse()
	fail := func(code int, a ...any) {
		fmt.Fprintln(os.Stderr, append([]any{"replay-sender:"}, a...)...)
		os.Exit(code)
	}
	if *schedulePath == "" || *base == "" || *outPath == "" || !(*speed > 0) || *connections < 1 {
		fail(2, "-schedule, -base and -out are required, -speed and -connections positive")
	}
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fail(2, "-base: want http://host:port or https://host:port, got", *base)
	}
	s := &sender{host: u.Host, timeout: *timeout, keepalive: *keepalive}
	s.addr = u.Host
	if u.Port() == "" {
		s.addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	if u.Scheme == "https" {
		s.tls = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	}
	entries, err := readSchedule(*schedulePath)
	if err != nil {
		fail(2, err)
	}
	var bodies []body
	if *bodiesPath != "" {
		data, err := os.ReadFile(*bodiesPath)
		if err == nil {
			err = json.Unmarshal(data, &bodies)
		}
		if err != nil {
			fail(2, "bodies:", err)
		}
	}
	if *until > 0 {
		kept := 0
		for kept < len(entries) && time.Duration(float64(entries[kept].due) / *speed) < *until {
			kept++
		}
		entries = entries[:kept]
	}
	for i := range entries {
		entries[i].due = time.Duration(float64(entries[i].due) / *speed)
	}
	s.entries = entries
	// The header lines every request carries: as Go's client wrote them (it asked for
	// gzip by itself), with -header's in their place or after them.
	lines := [][2]string{{"User-Agent", "Go-http-client/1.1"}, {"Accept-Encoding", "gzip"}}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		name, value = http.CanonicalHeaderKey(strings.TrimSpace(name)), strings.TrimSpace(value)
		if name == "Host" {
			s.host = value
			continue
		}
		if name == "User-Agent" || name == "Accept-Encoding" {
			for i := range lines[:2] {
				if lines[i][0] == name {
					lines[i][1] = value
				}
			}
			continue
		}
		lines = append(lines, [2]string{name, value})
	}
	if !*keepalive {
		lines = append(lines, [2]string{"Connection", "close"})
	}
	block := func(contentType string) string {
		var b strings.Builder
		for _, l := range lines {
			if contentType == "" || l[0] != "Content-Type" {
				b.WriteString(l[0] + ": " + l[1] + "\r\n")
			}
		}
		if contentType != "" {
			b.WriteString("Content-Type: " + contentType + "\r\n")
		}
		return b.String()
	}
	common := block("")
	s.plain = []byte(common)
	for _, b := range bodies {
		head := block(b.ContentType)
		s.withBody = append(s.withBody, []byte(head+"Content-Length: "+strconv.Itoa(len(b.Body))+"\r\n\r\n"+b.Body))
	}
	s.pool = pool{max: *connections, wake: make(chan struct{}, 1)}

	f, err := os.Create(*outPath)
	if err != nil {
		fail(2, err)
	}
	s.out = output{f: f, buf: make([]byte, 0, 1<<20+4096)}
	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(pf)
		}
		if err != nil {
			fail(2, "cpuprofile:", err)
		}
	}
	stop := make(chan struct{})
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() { <-signals; s.stopped.Store(true); close(stop) }()

	s.began = time.Now()
	done := make(chan struct{})
	go func() { s.pace(stop); close(done) }()
	<-done
	s.inflight.Wait()
	seconds := time.Since(s.began).Seconds()
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	s.out.mu.Lock()
	s.out.flushLocked(s.out.buf)
	if err := f.Close(); s.out.err == nil {
		s.out.err = err
	}
	if s.out.err != nil {
		fail(1, s.out.err)
	}
	summary, _ := json.Marshal(map[string]any{
		"scheduled": len(entries), "sent": s.out.sent, "answered": s.out.answered,
		"failed": s.out.failed, "seconds": seconds,
	})
	fmt.Println(string(summary))
}
