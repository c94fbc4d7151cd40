// Command testupstream is the upstream server of the egress tests: it runs
// in a container on a sandbox's egress network under names such as
// api.allowed.test. On :80 it answers every HTTP request with its name; on
// :443 it writes its name to every connection and closes it (a CONNECT
// tunnel is blind, so the bytes need not be TLS). With UPSTREAM_TLS_CERT
// and UPSTREAM_TLS_KEY it also serves HTTPS on :8443, printing each
// request's credential headers to stdout (the test reads them with docker
// logs) and echoing them in the response. With UPSTREAM_RECORD=1 it prints
// every plain HTTP request it gets, body included (an exfiltration
// listener).
//
// /echo/MODE on :8443 (and :8444, HTTP/1.1 only) is a careless API: it
// sends the credential headers it received back in the way MODE names
// (echo), as error pages and debugging endpoints do.
//
// /model/SHAPE/... on :8443 is a fake model API with known usage (model).
//
// "testupstream client URL [NAME: VALUE]..." is the client the tests run
// inside a sandbox (the test image has no curl): a GET (or CLIENT_METHOD)
// through the proxy the environment names, trusting what Go's crypto/x509
// trusts there (SSL_CERT_FILE, else the system bundle). It prints the status and body.
// "testupstream show URL [NAME: VALUE]..." prints all an agent could see
// of the answer (show).
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 2 && os.Args[1] == "client" {
		os.Exit(client(os.Args[2], os.Args[3:]))
	}
	if len(os.Args) > 2 && os.Args[1] == "show" {
		os.Exit(show(os.Args[2], os.Args[3:]))
	}
	if len(os.Args) > 5 && os.Args[1] == "turns" {
		n, _ := strconv.Atoi(os.Args[4])
		os.Exit(turns(os.Args[2], os.Args[3], n, os.Args[5:]))
	}
	if len(os.Args) == 5 && os.Args[1] == "fetch" {
		n, _ := strconv.Atoi(os.Args[4])
		os.Exit(fetch(os.Args[2], os.Args[3], n))
	}
	name := os.Getenv("UPSTREAM_NAME")
	if name == "" {
		name = "upstream"
	}
	l, err := net.Listen("tcp", ":443")
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "tunnel to %s\n", name)
			c.Close()
		}
	}()
	if cert, key := os.Getenv("UPSTREAM_TLS_CERT"), os.Getenv("UPSTREAM_TLS_KEY"); cert != "" {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var got []string
			for _, h := range []string{"Authorization", "X-Api-Key"} {
				if v := r.Header.Get(h); v != "" {
					got = append(got, strings.ToLower(h)+"="+v)
				}
			}
			fmt.Printf("tls request %s %s %s\n", r.Host, r.URL.Path, strings.Join(got, " "))
			if shape, ok := strings.CutPrefix(r.URL.Path, "/model/"); ok {
				model(w, shape)
				return
			}
			if mode, ok := strings.CutPrefix(r.URL.Path, "/echo/"); ok {
				echo(w, r, mode, strings.Join(got, " "))
				return
			}
			fmt.Fprintf(w, "hello over TLS from %s (%s) %s\n", name, r.Host, strings.Join(got, " "))
		})
		go func() { log.Fatal(http.ListenAndServeTLS(":8443", cert, key, h)) }()
		// HTTP/1.1 only, for answers HTTP/2 does not have (101).
		h1 := &http.Server{Addr: ":8444", Handler: h, TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
		go func() { log.Fatal(h1.ListenAndServeTLS(cert, key)) }()
	}
	zeros := make([]byte, 256<<10)
	record := os.Getenv("UPSTREAM_RECORD") == "1"
	log.Fatal(http.ListenAndServe(":80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if record {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			fmt.Printf("recorded %s %s %s %q\n", r.Method, r.Host, r.URL.Path, body)
		}
		if n, ok := strings.CutPrefix(r.URL.Path, "/bytes/"); ok {
			size, _ := strconv.ParseInt(n, 10, 64)
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
			for size > 0 {
				k := min(size, int64(len(zeros)))
				if _, err := w.Write(zeros[:k]); err != nil {
					return
				}
				size -= k
			}
			return
		}
		fmt.Fprintf(w, "hello from %s (%s)\n", name, r.Host)
	})))
}

// fetchTimeout bounds each of fetch's requests.
const fetchTimeout = 2 * time.Minute

// fetch GETs url count times, one after the other, and prints the bytes
// read, the total time, the median time of a request and the CPU time it
// used. mode "direct"
// ignores any proxy; "proxy" uses the environment's proxy for plain HTTP
// (kept-alive connections); "connect" opens a new CONNECT tunnel through
// the environment's proxy for every request; "fresh" a new direct
// connection for every request (what "connect" is compared with).
func fetch(mode, url string, count int) int {
	t := transport(mode, "")
	// A request that hangs fails the run instead of holding the
	// benchmark for ever (one 100 MB download takes well under a second).
	c := &http.Client{Transport: t, Timeout: fetchTimeout}
	buf := make([]byte, 64<<10)
	var total int64
	var times []time.Duration
	start := time.Now()
	for range count {
		s := time.Now()
		n, err := get(c, url, buf)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		total += n
		times = append(times, time.Since(s))
	}
	elapsed := time.Since(start)
	slices.Sort(times)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("bytes %d seconds %.6f median_ms %.4f cpu_ms %.1f\n", total, elapsed.Seconds(), float64(times[len(times)/2].Microseconds())/1000, float64(cpu.Microseconds())/1000)
	return 0
}

// transport is fetch's for mode; proxy is the proxy's address, or "" for
// the one the environment names.
func transport(mode, proxy string) *http.Transport {
	t := &http.Transport{MaxIdleConnsPerHost: 1}
	if proxy == "" {
		proxy = strings.TrimPrefix(os.Getenv("http_proxy"), "http://")
	}
	switch mode {
	case "proxy":
		t.Proxy = http.ProxyURL(&neturl.URL{Scheme: "http", Host: proxy})
	case "connect":
		t.DisableKeepAlives = true
		t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", proxy)
			if err != nil {
				return nil, err
			}
			c.SetDeadline(time.Now().Add(fetchTimeout))
			defer c.SetDeadline(time.Time{})
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				c.Close()
				return nil, err
			}
			if resp.StatusCode != http.StatusOK {
				c.Close()
				return nil, fmt.Errorf("CONNECT: %s", resp.Status)
			}
			return c, nil
		}
	case "fresh":
		t.DisableKeepAlives = true
	}
	return t
}

// turns GETs url count times through each of proxies ("env" for the one
// the environment names, else an address) in turn, in mode (as fetch's:
// proxy or connect), so that a slow moment falls on each alike. It prints
// a line for each proxy: "median I MS DIFF MS", its median request and the
// median of its requests' differences from the first proxy's of the same
// turn, a figure that the machine's drift between two runs does not blur.
func turns(mode, url string, count int, proxies []string) int {
	clients := make([]*http.Client, len(proxies))
	for i, p := range proxies {
		if p == "env" {
			p = ""
		}
		clients[i] = &http.Client{Transport: transport(mode, p), Timeout: fetchTimeout}
	}
	buf := make([]byte, 64<<10)
	times := make([][]float64, len(proxies))
	// Each turn takes the proxies in an order of its own (the same every
	// run): a request does not always follow the same other proxy's,
	// whose after-work (a process that ends, say) it would pay for.
	rnd := rand.New(rand.NewPCG(1, 2))
	order := make([]int, len(proxies))
	for i := range order {
		order[i] = i
	}
	for range count {
		rnd.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, i := range order {
			s := time.Now()
			if _, err := get(clients[i], url, buf); err != nil {
				fmt.Println("error:", err)
				return 1
			}
			times[i] = append(times[i], float64(time.Since(s).Microseconds())/1000)
		}
	}
	for i := range proxies {
		d := make([]float64, count)
		for k := range d {
			d[k] = times[i][k] - times[0][k]
		}
		fmt.Printf("median %d %.4f diff %.4f\n", i, medianOf(times[i]), medianOf(d))
	}
	return 0
}

// get GETs url with c and reads the whole answer, which must be a 200;
// it returns the bytes read.
func get(c *http.Client, url string, buf []byte) (int64, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := drain(resp.Body, buf)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = errors.New(resp.Status)
	}
	return n, err
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// drain reads r to its end in reads of len(buf), as a download tool does
// (io.Copy into io.Discard reads 8 KiB at a time).
func drain(r io.Reader, buf []byte) (int64, error) {
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func client(url string, headers []string) int {
	method := os.Getenv("CLIENT_METHOD") // GET unless set
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("status %d\n%s", resp.StatusCode, body)
	return 0
}
