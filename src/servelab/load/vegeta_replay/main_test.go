package main

// The sender run as a program (this test binary re-executed as it) against servers
// that answer as real ones do: keep-alive and not, HEAD, chunked, 1xx, bodies, an error
// status, no answer, nothing listening, and idle connections closed under it.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if os.Getenv("REPLAY_SENDER_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type line struct {
	seq, sentUs, latencyUs, code, bytes int64
	method, target, err                 string
}

// replay writes schedule (lines without the offsets: one request every gap) and bodies,
// runs the sender with args against base, and returns its lines by seq and its summary.
func replay(t *testing.T, base string, gap time.Duration, requests [][3]string, bodies string, args ...string) (map[int64]line, map[string]any) {
	t.Helper()
	dir := t.TempDir()
	var schedule strings.Builder
	for i, r := range requests {
		fmt.Fprintf(&schedule, "%d\t%s\t%s\t%s\n", int64(i)*gap.Microseconds(), r[0], r[1], r[2])
	}
	path := filepath.Join(dir, "s.tsv")
	if err := os.WriteFile(path, []byte(schedule.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "sent.tsv")
	argv := []string{"-schedule", path, "-base", base, "-out", out, "-timeout", "2s"}
	if bodies != "" {
		bodiesPath := filepath.Join(dir, "b.json")
		if err := os.WriteFile(bodiesPath, []byte(bodies), 0o600); err != nil {
			t.Fatal(err)
		}
		argv = append(argv, "-bodies", bodiesPath)
	}
	cmd := exec.Command(os.Args[0], append(argv, args...)...)
	cmd.Env = append(os.Environ(), "REPLAY_SENDER_AS_MAIN=1")
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("sender: %v %s", err, stdout)
	}
	lastLine := strings.TrimSpace(string(stdout))
	var summary map[string]any
	if err := json.Unmarshal([]byte(lastLine[strings.LastIndex(lastLine, "\n")+1:]), &summary); err != nil {
		t.Fatalf("summary: %v in %q", err, stdout)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[int64]line{}
	for _, l := range strings.Split(strings.TrimSuffix(string(text), "\n"), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 8 {
			t.Fatalf("want 8 fields: %q", l)
		}
		n := make([]int64, 5)
		for i := range n {
			if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
				t.Fatalf("field %d of %q: %v", i, l, err)
			}
		}
		if _, dup := lines[n[0]]; dup {
			t.Fatalf("request %d recorded twice", n[0])
		}
		lines[n[0]] = line{n[0], n[1], n[2], n[3], n[4], f[5], f[6], f[7]}
	}
	if int(summary["sent"].(float64)) != len(lines) || int(summary["scheduled"].(float64)) != len(requests) {
		t.Fatalf("summary %v against %d lines, %d scheduled", summary, len(lines), len(requests))
	}
	return lines, summary
}

func TestRequestsGoOutAsScheduledAndAreRecorded(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[r.Method+" "+r.RequestURI] = fmt.Sprintf("host=%s ua=%s x=%s ct=%s body=%s",
			r.Host, r.UserAgent(), r.Header.Get("X-Run"), r.Header.Get("Content-Type"), b)
		mu.Unlock()
		switch r.URL.Path {
		case "/chunked":
			w.(http.Flusher).Flush() // no length known: chunked
			w.Write([]byte("abc"))
			w.(http.Flusher).Flush()
			w.Write([]byte("defg"))
		case "/continue":
			w.WriteHeader(http.StatusContinue)
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte("made"))
		case "/missing":
			http.Error(w, "no", http.StatusBadGateway)
		default:
			w.Write([]byte("hello"))
		}
	}))
	defer server.Close()
	requests := [][3]string{
		{"GET", "/a?q=1", "-1"}, {"HEAD", "/head", "-1"}, {"GET", "/chunked", "-1"},
		{"POST", "/cart", "0"}, {"GET", "/continue", "-1"}, {"GET", "/missing", "-1"},
		{"GET", "/odd path", "-1"}, {"DELETE", "/a/1", "-1"},
	}
	began := time.Now()
	lines, summary := replay(t, server.URL, 20*time.Millisecond, requests,
		`[{"content_type": "application/json", "body": "{\"n\": 1}"}]`, "-header", "X-Run: 7")
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("took %s", took)
	}
	if summary["answered"].(float64) != 8 || summary["failed"].(float64) != 0 {
		t.Fatalf("summary %v", summary)
	}
	want := map[int64][3]any{ // code, body bytes, error
		0: {200, 5, ""}, 1: {200, 0, ""}, 2: {200, 7, ""}, 3: {200, 5, ""},
		4: {201, 4, ""}, 5: {502, 3, "502 Bad Gateway"}, 6: {200, 5, ""}, 7: {200, 5, ""},
	}
	for seq, w := range want {
		l := lines[seq]
		if l.code != int64(w[0].(int)) || l.bytes != int64(w[1].(int)) || l.err != w[2].(string) {
			t.Errorf("request %d: %+v, want code %v, %v bytes, error %q", seq, l, w[0], w[1], w[2])
		}
		if l.method != requests[seq][0] || l.target != requests[seq][1] {
			t.Errorf("request %d recorded as %s %s", seq, l.method, l.target)
		}
		if due := seq * 20_000; l.sentUs < due || l.sentUs > due+15_000 {
			t.Errorf("request %d sent at %d us, due at %d", seq, l.sentUs, due)
		}
	}
	host := strings.TrimPrefix(server.URL, "http://")
	if got := seen["POST /cart"]; got != "host="+host+` ua=Go-http-client/1.1 x=7 ct=application/json body={"n": 1}` {
		t.Errorf("the POST arrived as %s", got)
	}
	if _, ok := seen["GET /odd%20path"]; !ok {
		t.Errorf("a space in a target is not escaped: %v", seen)
	}
}

// rawServer answers each request with a fixed response on connections it handles with
// handle (nil: keep-alive answers until the client closes).
func rawServer(t *testing.T, handle func(c net.Conn, br *bufio.Reader)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c, bufio.NewReader(c))
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func readRequest(br *bufio.Reader) bool {
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, req.Body)
	return true
}

func TestConnectionsClosedByTheServerAreNotCountedAgainstTheRequests(t *testing.T) {
	// One answer per connection, then the connection is closed without a word (as a
	// server whose keep-alive timed out): the next request on it must go out anew.
	base := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		if readRequest(br) {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		}
	})
	requests := make([][3]string, 30)
	for i := range requests {
		requests[i] = [3]string{"GET", "/" + strconv.Itoa(i), "-1"}
	}
	lines, summary := replay(t, base, 5*time.Millisecond, requests, "")
	if summary["answered"].(float64) != 30 {
		t.Fatalf("summary %v, lines %v", summary, lines)
	}
	// and one that says so
	closing := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		if readRequest(br) {
			c.Write([]byte("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"))
		}
	})
	if _, summary = replay(t, closing, time.Millisecond, requests, ""); summary["answered"].(float64) != 30 {
		t.Fatalf("summary %v", summary)
	}
	if _, summary = replay(t, base, time.Millisecond, requests, "", "-keepalive=false"); summary["answered"].(float64) != 30 {
		t.Fatalf("without keep-alive: summary %v", summary)
	}
}

func TestNoAnswerAndNothingListeningAreFailures(t *testing.T) {
	silent := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readRequest(br)
		time.Sleep(4 * time.Second)
	})
	lines, summary := replay(t, silent, time.Millisecond, [][3]string{{"GET", "/", "-1"}}, "")
	if summary["failed"].(float64) != 1 || !strings.Contains(lines[0].err, "timeout") || lines[0].code != 0 {
		t.Fatalf("a request never answered: %+v", lines[0])
	}
	if l := lines[0].latencyUs; l < 1_900_000 || l > 3_000_000 {
		t.Errorf("timed out after %d us, want 2 s", l)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String()
	ln.Close()
	lines, _ = replay(t, closed, time.Millisecond, [][3]string{{"GET", "/", "-1"}, {"GET", "/", "-1"}}, "")
	for _, l := range lines {
		if l.code != 0 || !strings.Contains(l.err, "refused") {
			t.Errorf("nothing listening: %+v", l)
		}
	}
}

func TestTheRateIsKeptWithFewConnections(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	defer server.Close()
	requests := make([][3]string, 2000)
	for i := range requests {
		requests[i] = [3]string{"GET", "/", "-1"}
	}
	lines, summary := replay(t, server.URL, 500*time.Microsecond, requests, "", "-connections", "4")
	if summary["answered"].(float64) != 2000 {
		t.Fatalf("summary %v", summary)
	}
	late := 0
	for seq, l := range lines {
		if l.sentUs-seq*500 > 5_000 {
			late++
		}
	}
	if late > 20 {
		t.Errorf("%d of 2000 requests sent more than 5 ms late", late)
	}
}
