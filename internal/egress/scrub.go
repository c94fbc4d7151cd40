package egress

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// The response scrub of the credential broker. Whatever a host a secret
// is bound to sends back — headers and their names, the body once its
// content coding is undone, trailers, informational (1xx) responses, the
// text of an error — has every encoding of every real value the proxy
// may have sent there replaced by the same encoding of its placeholder.
// What cannot be scrubbed is refused: a content coding the proxy cannot
// decode, a switch of protocols.

// scrubber replaces the encodings of real values with those of their
// placeholders.
type scrubber struct {
	pairs   [][2]string // real form, placeholder form
	pats    *patterns
	names   *patterns // lowercased, for header names
	sameLen bool      // every replacement is as long as what it replaces
}

// newScrubber scrubs the values of secrets in every form wireForms
// lists.
func newScrubber(secrets []*Secret) *scrubber {
	var pairs [][2]string
	for _, s := range secrets {
		pairs = append(pairs, wireForms(s.Value, s.Placeholder)...)
	}
	return makeScrubber(pairs)
}

// withBasic adds the Basic tokens a request was given, each a pair of
// decoded credentials (with the real values, with the placeholders). The
// token the proxy sent is scrubbed in every form wireForms lists, and the
// credentials in the other base64 alphabets: an echo of the token is put
// back as the agent sent it, an echo of the echo too.
func (sc *scrubber) withBasic(tokens [][2]string) *scrubber {
	if len(tokens) == 0 {
		return sc
	}
	pairs := append([][2]string(nil), sc.pairs...)
	for _, t := range tokens {
		swapped, sent := []byte(t[0]), []byte(t[1])
		pairs = append(pairs, wireForms(base64.StdEncoding.EncodeToString(swapped), base64.StdEncoding.EncodeToString(sent))...)
		for _, enc := range base64Encodings[1:] {
			pairs = append(pairs, [2]string{enc.EncodeToString(swapped), enc.EncodeToString(sent)})
		}
	}
	return makeScrubber(pairs)
}

func makeScrubber(pairs [][2]string) *scrubber {
	sc := &scrubber{sameLen: true}
	seen := map[string]bool{}
	var from, to, lfrom, lto [][]byte
	lseen := map[string]bool{}
	for _, p := range pairs {
		if p[0] == "" || seen[p[0]] {
			continue
		}
		seen[p[0]] = true
		sc.pairs = append(sc.pairs, p)
		from, to = append(from, []byte(p[0])), append(to, []byte(p[1]))
		sc.sameLen = sc.sameLen && len(p[0]) == len(p[1])
		if l := strings.ToLower(p[0]); !lseen[l] {
			lseen[l] = true
			lfrom, lto = append(lfrom, []byte(l)), append(lto, []byte(strings.ToLower(p[1])))
		}
	}
	sc.pats, sc.names = newPatterns(from, to), newPatterns(lfrom, lto)
	return sc
}

var base64Encodings = []*base64.Encoding{
	base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding,
}

// wireForms lists the encodings of a string w the proxy put on the wire
// (a real value, a Basic token it made) that the scrub looks for, each
// with the same encoding of the placeholder's p:
//   - w itself;
//   - w in base64, standard and URL-safe alphabets, padded or not;
//   - w inside a longer base64 text (a Basic token, a JSON web token, a
//     blob), at each of the three byte offsets it can have there: the
//     characters that encode w's bytes alone (base64Core);
//   - each of those URL-escaped as a query or a path, with upper or lower
//     case hex, and as a JSON string's content (with and without HTML
//     escapes).
//
// Forms equal to one listed before are dropped (makeScrubber).
func wireForms(w, p string) [][2]string {
	base := [][2]string{{w, p}}
	for _, enc := range base64Encodings {
		base = append(base, [2]string{enc.EncodeToString([]byte(w)), enc.EncodeToString([]byte(p))})
	}
	for k := range 3 {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			base = append(base, [2]string{base64Core(w, k, enc), base64Core(p, k, enc)})
		}
	}
	out := base
	for _, b := range base {
		for _, esc := range []func(string) string{url.QueryEscape, url.PathEscape, jsonString, jsonStringHTML} {
			e, f := esc(b[0]), esc(b[1])
			out = append(out, [2]string{e, f}, [2]string{lowerHex(e), lowerHex(f)})
		}
	}
	return out
}

// base64Core returns the characters of the base64 encoding of a text
// that encode bytes of v alone, where v starts at a byte offset ≡ k
// (mod 3) in that text. Every base64 text holding v at such an offset
// holds them. The up to two characters at each end that v shares with
// the bytes around it are not in it.
func base64Core(v string, k int, enc *base64.Encoding) string {
	buf := make([]byte, k+len(v))
	copy(buf[k:], v)
	s := enc.EncodeToString(buf)
	first := (8*k + 5) / 6       // the first character whose 6 bits are all v's
	last := 8 * (k + len(v)) / 6 // past the last one
	return s[first:last]
}

// jsonString is s as the content of a JSON string, as encoders that
// leave HTML characters alone write it.
func jsonString(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)
	return strings.TrimSuffix(strings.TrimSuffix(b.String(), "\n"), `"`)[1:]
}

// jsonStringHTML is s as the content of a JSON string with <, > and &
// escaped, as Go's json.Marshal writes it.
func jsonStringHTML(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// lowerHex writes the hex digits of %XX escapes in lower case.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLowerASCII(b[i+1]), toLowerASCII(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func toLowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// header scrubs every value in h, and every name, without regard to case
// (HTTP/2 writes names in lower case, Go's client in canonical case).
func (sc *scrubber) header(h map[string][]string) {
	var renames [][2]string
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = sc.pats.replace(v)
		}
		l := strings.ToLower(k)
		if r := sc.names.replace(l); r != l {
			renames = append(renames, [2]string{k, http.CanonicalHeaderKey(r)})
		}
	}
	for _, r := range renames {
		vs := h[r[0]]
		delete(h, r[0])
		h[r[1]] = append(h[r[1]], vs...)
	}
}

// refusedResponse is a response the proxy does not pass on because it
// cannot scrub it.
type refusedResponse struct{ reason string }

func (e *refusedResponse) Error() string { return "refused: " + e.reason }

// scrubResponse scrubs a response from a host secrets are bound to: its
// header now, its body as it is read (decoded first), its trailers when
// the body is closed. Informational responses are scrubbed as they come
// (tracingTransport).
func (st *reqState) scrubResponse(resp *http.Response) error {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return &refusedResponse{"the host switched protocols; an upgraded stream from a host a secret is bound to cannot be scrubbed of the real value"}
	}
	sc := st.scrub
	sc.header(resp.Header)
	sc.header(resp.Trailer) // the names it announces
	body, err := decodeBody(resp)
	if err != nil {
		return err
	}
	if !sc.sameLen {
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	resp.Body = &scrubbedBody{
		Reader: &countingReader{r: newPatternReplacer(body, sc.pats, nil), n: &st.down},
		body:   resp.Body, resp: resp, sc: sc,
	}
	st.call.Watch(resp) // the meter reads the body as scrubbed
	return nil
}

// scrubbedBody is a response's scrubbed body; its Close scrubs the
// trailers, which the transport has read by then.
type scrubbedBody struct {
	io.Reader
	body io.Closer
	resp *http.Response
	sc   *scrubber
}

func (b *scrubbedBody) Close() error {
	err := b.body.Close()
	b.sc.header(b.resp.Trailer)
	return err
}

// decodeBody undoes the content codings of resp's body (gzip, deflate)
// so that it can be scrubbed, and passes it on decoded. A coding the
// proxy cannot decode, or a part (206) of an encoded body, is refused.
func decodeBody(resp *http.Response) (io.Reader, error) {
	var codings []string
	for _, v := range resp.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	if len(codings) == 0 || !hasBody(resp) {
		return resp.Body, nil
	}
	if resp.StatusCode == http.StatusPartialContent {
		return nil, &refusedResponse{"a part (206) of an encoded body from a host a secret is bound to cannot be decoded to be scrubbed of the real value"}
	}
	var r io.Reader = resp.Body
	for i := len(codings) - 1; i >= 0; i-- {
		switch codings[i] {
		case "gzip", "x-gzip":
			r = &lazyDecoder{src: r, open: openGzip}
		case "deflate":
			r = &lazyDecoder{src: r, open: openDeflate}
		default:
			return nil, &refusedResponse{fmt.Sprintf("the host sent a body in the content encoding %q, which the proxy cannot decode to scrub it of the real value", clip(codings[i]))}
		}
	}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return r, nil
}

// hasBody reports whether resp can have a body at all.
func hasBody(resp *http.Response) bool {
	return resp.Body != nil && resp.Body != http.NoBody && resp.ContentLength != 0 &&
		resp.Request.Method != http.MethodHead &&
		resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified
}

// lazyDecoder opens its decoder on the first read, so that a stream's
// header is passed on before its first bytes arrive.
type lazyDecoder struct {
	src  io.Reader
	open func(io.Reader) (io.Reader, error)
	r    io.Reader
}

func (d *lazyDecoder) Read(p []byte) (int, error) {
	if d.r == nil {
		r, err := d.open(d.src)
		if err != nil {
			return 0, fmt.Errorf("decode the response body: %w", err)
		}
		d.r = r
	}
	return d.r.Read(p)
}

func openGzip(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }

// openDeflate reads "deflate" as HTTP means it (zlib), or as the raw
// deflate some servers send.
func openDeflate(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	h, err := br.Peek(2)
	if err != nil {
		return nil, err
	}
	if h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}
