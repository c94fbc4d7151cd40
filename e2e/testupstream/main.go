// Command testupstream is the upstream server of the egress tests: it runs
// in a container on a sandbox's egress network under names such as
// api.allowed.test. On :80 it answers every HTTP request with its name; on
// :443 it writes its name to every connection and closes it (a CONNECT
// tunnel is blind, so the bytes need not be TLS). With UPSTREAM_TLS_CERT
// and UPSTREAM_TLS_KEY it also serves HTTPS on :8443, printing each
// request's credential headers to stdout (the test reads them with docker
// logs) and echoing them in the response.
//
// "testupstream client URL [NAME: VALUE]..." is the client the tests run
// inside a sandbox (the test image has no curl): a GET through the proxy
// the environment names, trusting what Go's crypto/x509 trusts there
// (SSL_CERT_FILE, else the system bundle). It prints the status and body.
package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 2 && os.Args[1] == "client" {
		os.Exit(client(os.Args[2], os.Args[3:]))
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
		go func() {
			log.Fatal(http.ListenAndServeTLS(":8443", cert, key, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var got []string
				for _, h := range []string{"Authorization", "X-Api-Key"} {
					if v := r.Header.Get(h); v != "" {
						got = append(got, strings.ToLower(h)+"="+v)
					}
				}
				fmt.Printf("tls request %s %s %s\n", r.Host, r.URL.Path, strings.Join(got, " "))
				fmt.Fprintf(w, "hello over TLS from %s (%s) %s\n", name, r.Host, strings.Join(got, " "))
			})))
		}()
	}
	log.Fatal(http.ListenAndServe(":80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s (%s)\n", name, r.Host)
	})))
}

func client(url string, headers []string) int {
	req, err := http.NewRequest(http.MethodGet, url, nil)
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
