package main

import (
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"sort"
	"strings"
	"time"
)

// echo answers with the credentials the request carried (got), sent back
// the way mode names:
//
//	gzip, deflate  the body in that content coding, whatever was accepted
//	br             the body in the clear, labelled with a coding the
//	               proxy cannot read
//	trailer        in a trailer announced up front, and one that was not
//	103            in the headers of a 103 Early Hints answer
//	b64            base64 of the credentials at each byte offset
//	101            a 101 Switching Protocols naming them in
//	               Sec-WebSocket-Protocol, then in the upgraded stream
//	               (HTTP/1.1 only)
//	anything else  the body in the clear
func echo(w http.ResponseWriter, r *http.Request, mode, got string) {
	switch mode {
	case "gzip", "deflate", "br":
		w.Header().Set("Content-Encoding", mode)
		var zw io.WriteCloser
		switch mode {
		case "gzip":
			zw = gzip.NewWriter(w)
		case "deflate":
			zw = zlib.NewWriter(w)
		default:
			zw = nopCloser{w}
		}
		fmt.Fprintf(zw, "echo %s\n", got)
		zw.Close()
	case "trailer":
		w.Header().Set("Trailer", "X-Echo")
		io.WriteString(w, "see the trailers\n")
		w.Header().Set("X-Echo", got)
		w.Header().Set(http.TrailerPrefix+"X-Late-Echo", got)
	case "103":
		w.Header().Set("Link", "</hint?c="+url.QueryEscape(got)+">; rel=preload")
		w.Header().Set("X-Echo", got)
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Del("X-Echo")
		io.WriteString(w, "after the hints\n")
	case "b64":
		for n := range 3 {
			fmt.Fprintf(w, "%s\n", base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", n)+got)))
		}
	case "101":
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer c.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Protocol: %s\r\n\r\nstream: %s\n", got, got)
		brw.Flush()
	default:
		fmt.Fprintf(w, "echo %s\n", got)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// show GETs url with the headers given and prints all an agent could
// see of the answer: every informational response, the status, every
// header, the body (decoded when it is gzip or deflate, as a client
// would), the trailers. A 101 answer's stream is read until it ends.
func show(target string, headers []string) int {
	out := func(format string, a ...any) { fmt.Printf(format, a...) }
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		out("informational %d\n%s", code, headerText(http.Header(h)))
		return nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, target, nil)
	if err != nil {
		out("error: %v\n", err)
		return 1
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	// The agent sees the codings as they come; an upgrade needs HTTP/1.1.
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, DisableCompression: true}
	if req.Header.Get("Upgrade") != "" {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	c := &http.Client{Transport: tr}
	resp, err := c.Do(req)
	if err != nil {
		out("error: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	out("status %d\n%s", resp.StatusCode, headerText(resp.Header))
	var body io.Reader = resp.Body
	switch resp.Header.Get("Content-Encoding") {
	case "gzip":
		if zr, err := gzip.NewReader(body); err == nil {
			body = zr
		}
	case "deflate":
		if zr, err := zlib.NewReader(body); err == nil {
			body = zr
		}
	}
	b, err := io.ReadAll(body)
	out("body\n%s\n", b)
	if err != nil {
		out("body error: %v\n", err)
	}
	out("trailers\n%s", headerText(resp.Trailer))
	return 0
}

func headerText(h http.Header) string {
	var lines []string
	for k, vs := range h {
		for _, v := range vs {
			lines = append(lines, k+": "+v+"\n")
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}
