// replay-sender: sends each request of a schedule at its own time, with vegeta's attacker
// (github.com/tsenart/vegeta) paced by the schedule instead of a constant rate.
//
// servelab writes the schedule (one request a line: offset in microseconds from the
// start, method, target, body number or -1, tab-separated) and reads back one line per
// request: its sequence number (the n-th request sent is due at the n-th offset), when
// it was sent (microseconds from the start), its latency from that send (microseconds),
// the status (0: no answer), bytes received, the method, the target and the error.
// The last line of stdout is a JSON summary. Latency from the intended send time is
// lag + latency; servelab computes it, so the sender only records what happened.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
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

// schedulePacer keeps the schedule: the n-th hit waits until its own offset. It waits
// itself rather than handing the wait to vegeta's time.Sleep, whose Go runtime timer
// wakes a millisecond late here at best (measured: a 50 us sleep took 1.07 ms at p50);
// the last stretch of each wait is a nanosleep(2), about 0.1 ms late.
type schedulePacer struct{ due []time.Duration }

// Waits longer than this sleep on the runtime's timer first, up to this much before due.
const coarse = 2 * time.Millisecond

func (p schedulePacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= uint64(len(p.due)) {
		return 0, true
	}
	began := time.Now().Add(-elapsed)
	wait := p.due[hits] - elapsed
	if wait > coarse {
		time.Sleep(wait - coarse)
		wait = p.due[hits] - time.Since(began)
	}
	if wait > 0 {
		ts := syscall.NsecToTimespec(int64(wait))
		_ = syscall.Nanosleep(&ts, nil)
	}
	return 0, false
}

func (p schedulePacer) Rate(elapsed time.Duration) float64 { return 0 }

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

func main() {
	// Two Ps at least, even pinned to one CPU: the pacer's nanosleep holds its P for the
	// syscall, and with one P the workers could not send until the runtime took it back
	// (measured at 5,000 req/s on one CPU: send lag p50 16 ms with one P, 0.13 ms with two).
	runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	schedulePath := flag.String("schedule", "", "the schedule file")
	bodiesPath := flag.String("bodies", "", "JSON list of {content_type, body}")
	base := flag.String("base", "", "scheme://host:port the targets go to")
	out := flag.String("out", "", "where each request's line is written")
	connections := flag.Int("connections", 1000, "connections (and workers) at most")
	timeout := flag.Duration("timeout", 10*time.Second, "per request")
	keepalive := flag.Bool("keepalive", true, "reuse connections")
	speed := flag.Float64("speed", 1.0, "the schedule's times are divided by this")
	until := flag.Duration("until", 0, "send only the requests due before this (0: all)")
	var headers headerFlags
	flag.Var(&headers, "header", "'Name: value' sent with every request (repeatable)")
	flag.Parse()
	if *schedulePath == "" || *base == "" || *out == "" || !(*speed > 0) {
		fmt.Fprintln(os.Stderr, "replay-sender: -schedule, -base and -out are required, -speed positive")
		os.Exit(2)
	}
	entries, err := readSchedule(*schedulePath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "replay-sender:", err)
		os.Exit(2)
	}
	var bodies []body
	if *bodiesPath != "" {
		data, err := os.ReadFile(*bodiesPath)
		if err == nil {
			err = json.Unmarshal(data, &bodies)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "replay-sender: bodies:", err)
			os.Exit(2)
		}
	}
	if *until > 0 {
		kept := 0
		for kept < len(entries) && time.Duration(float64(entries[kept].due) / *speed) < *until {
			kept++
		}
		entries = entries[:kept]
	}
	due := make([]time.Duration, len(entries))
	targets := make([]vegeta.Target, len(entries))
	// Header maps are shared (vegeta copies them into each request): one for the requests
	// without a body, one per body.
	common := http.Header{}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		common.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	bodyHeaders := make([]http.Header, len(bodies))
	bodyBytes := make([][]byte, len(bodies))
	for i, b := range bodies {
		bodyHeaders[i] = common.Clone()
		bodyHeaders[i].Set("Content-Type", b.ContentType)
		bodyBytes[i] = []byte(b.Body)
	}
	for i, e := range entries {
		due[i] = time.Duration(float64(e.due) / *speed)
		t := vegeta.Target{Method: e.method, URL: *base + e.target, Header: common}
		if e.body >= 0 && e.body < len(bodies) {
			t.Body = bodyBytes[e.body]
			t.Header = bodyHeaders[e.body]
		}
		targets[i] = t
	}
	var next atomic.Uint64
	targeter := func(t *vegeta.Target) error {
		i := next.Add(1) - 1
		if i >= uint64(len(targets)) {
			return vegeta.ErrNoTargets
		}
		*t = targets[i]
		return nil
	}
	attacker := vegeta.NewAttacker(
		vegeta.Workers(uint64(min(*connections, 64))),
		vegeta.MaxWorkers(uint64(*connections)),
		vegeta.Connections(*connections),
		vegeta.MaxConnections(*connections),
		vegeta.Timeout(*timeout),
		vegeta.KeepAlive(*keepalive),
		vegeta.Redirects(vegeta.NoFollow),
		vegeta.MaxBody(0),
	)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() { <-stop; attacker.Stop() }()

	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "replay-sender:", err)
		os.Exit(2)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	began := time.Now()
	var sent, answered, failed uint64
	first := time.Time{}
	for res := range attacker.Attack(targeter, schedulePacer{due}, 0, "") {
		if first.IsZero() || res.Timestamp.Before(first) {
			first = res.Timestamp
		}
		sent++
		if res.Code != 0 {
			answered++
		} else {
			failed++
		}
		errText := strings.ReplaceAll(res.Error, "\t", " ")
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", res.Seq,
			res.Timestamp.Sub(began).Microseconds(), res.Latency.Microseconds(), res.Code,
			res.BytesIn, res.Method, strings.TrimPrefix(res.URL, *base), errText)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "replay-sender:", err)
		os.Exit(1)
	}
	f.Close()
	summary, _ := json.Marshal(map[string]any{
		"scheduled": len(entries), "sent": sent, "answered": answered, "failed": failed,
		"seconds": time.Since(began).Seconds(),
	})
	fmt.Println(string(summary))
}
