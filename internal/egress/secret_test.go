package egress

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestNewPlaceholder(t *testing.T) {
	for _, tc := range []struct {
		value, prefix string
		length        int
	}{
		{"sk-ant-api03-" + strings.Repeat("k", 95), "sk-ant-api03-gsbx", 108},
		{"sk-proj-" + strings.Repeat("k", 150), "sk-proj-gsbx", 158},
		{"ghp_" + strings.Repeat("k", 36), "ghp_gsbx", 4 + 4 + 36 - 4},
		{"github_pat_" + strings.Repeat("k", 82), "github_pat_gsbx", 93},
		{"hunter2-hunter2", "gsbx", 4 + minPlaceholderRandom}, // no vendor prefix: nothing of it is kept
		{strings.Repeat("v", 1000), "gsbx", 4 + 256},
	} {
		p, err := NewPlaceholder(tc.value)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p, tc.prefix) {
			t.Errorf("%.20s…: placeholder %q lacks prefix %q", tc.value, p, tc.prefix)
		}
		want := max(tc.length, len(tc.prefix)+minPlaceholderRandom)
		if len(p) != want {
			t.Errorf("%.20s…: placeholder has %d characters, want %d", tc.value, len(p), want)
		}
		rest := strings.TrimPrefix(p, tc.prefix)
		if strings.Trim(rest, placeholderChars) != "" {
			t.Errorf("placeholder %q has characters outside [A-Za-z0-9]", p)
		}
		if strings.Contains(p, "hunter") {
			t.Errorf("placeholder %q carries part of the value", p)
		}
		q, _ := NewPlaceholder(tc.value)
		if p == q {
			t.Error("two placeholders are equal")
		}
	}
}

func TestNewSecretRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []string
		value string
		why   string
	}{
		{"", []string{"api.example.com"}, "value-of-k", "no name"},
		{"K", []string{"api.example.com"}, "", "empty"},
		{"K", []string{"api.example.com"}, "1234567", "shorter than 8"},
		{"K", nil, "value-of-k", "no hosts"},
		{"K", []string{"192.0.2.1"}, "value-of-k", "is an address"},
		{"K", []string{"https://x"}, "value-of-k", "scheme"},
		{"K", []string{"api.example.com"}, "value\nof-k", "line break"},
	} {
		_, err := NewSecret(tc.name, tc.hosts, tc.value)
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%+v: %v, want %q", tc, err, tc.why)
		}
	}
}

func mustSecret(t *testing.T, name, host, value string) *Secret {
	t.Helper()
	s, err := NewSecret(name, []string{host}, value)
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestSecretBoundTo(t *testing.T) {
	s, err := NewSecret("K", []string{"api.example.com", "*.models.example.net", "git.example.org:8443"}, "value-of-k")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target string
		bound  bool
	}{
		{"api.example.com:443", true},
		{"api.example.com:80", false},
		{"x.api.example.com:443", false},
		{"eu.models.example.net:443", true},
		{"git.example.org:8443", true},
		{"git.example.org:443", false},
		{"192.0.2.1:443", false},
	} {
		if got := s.boundTo(target(t, tc.target, Connect)); got != tc.bound {
			t.Errorf("%s: bound=%v", tc.target, got)
		}
	}
}

func TestFindLeakAndSubstitute(t *testing.T) {
	a := mustSecret(t, "A", "a.example.com", "real-a-0123456789")
	b := mustSecret(t, "B", "b.example.com", "real-b-0123456789")
	req := func(u string, hdr ...string) *http.Request {
		r, _ := http.NewRequest("GET", u, nil)
		for i := 0; i < len(hdr); i += 2 {
			r.Header.Add(hdr[i], hdr[i+1])
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		r     *http.Request
		where string
	}{
		{"header", req("http://x/", "X-Api-Key", a.Placeholder), "header x-api-key"},
		{"bearer", req("http://x/", "Authorization", "Bearer "+a.Placeholder), "header authorization"},
		{"basic", req("http://x/", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+a.Placeholder))), "header authorization"},
		{"query", req("http://x/?k=" + a.Placeholder), "URL"},
		{"escaped query", req("http://x/?k=" + url.QueryEscape("%") + strings.ReplaceAll(a.Placeholder, "g", "%67")), "URL"},
		{"path", req("http://x/" + a.Placeholder + "/v1"), "URL"},
	} {
		l := findLeak(tc.r, []*Secret{b, a})
		if l == nil || l.secret != "A" || l.where != tc.where {
			t.Errorf("%s: %+v", tc.name, l)
		}
	}
	if l := findLeak(req("http://x/", "X-Other", "nothing"), []*Secret{a, b}); l != nil {
		t.Errorf("clean request: %+v", l)
	}

	h := http.Header{}
	h.Set("X-Api-Key", a.Placeholder)
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("x:"+a.Placeholder)))
	h.Add("X-Two", "1 "+a.Placeholder+" 2 "+a.Placeholder)
	used, tokens := substitute(h, []*Secret{a})
	if len(used) != 1 || used[0] != "A" {
		t.Fatalf("used %v", used)
	}
	if len(tokens) != 1 || tokens[0] != [2]string{"x:" + a.Value, "x:" + a.Placeholder} {
		t.Fatalf("Basic tokens %q", tokens)
	}
	if h.Get("X-Api-Key") != a.Value || h.Get("X-Two") != "1 "+a.Value+" 2 "+a.Value {
		t.Fatalf("headers %v", h)
	}
	if dec, _ := basicCredentials(h.Get("Authorization")); dec != "x:"+a.Value {
		t.Fatalf("basic %q", dec)
	}
	newScrubber([]*Secret{a}).withBasic(tokens).header(h)
	if h.Get("X-Api-Key") != a.Placeholder || h.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("x:"+a.Placeholder)) {
		t.Fatalf("scrub %v", h)
	}
}

func TestStreamReplacer(t *testing.T) {
	from := []string{"SECRET-ONE", "SECRET-TWO"}
	to := []string{"ph1", "placeholder-2"}
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"nothing here", "nothing here"},
		{"SECRET-ONE", "ph1"},
		{"a SECRET-ONE b SECRET-TWO c SECRET-ONE", "a ph1 b placeholder-2 c ph1"},
		{"SECRET-ON", "SECRET-ON"},
		{"SECRET-SECRET-ONE", "SECRET-ph1"},
		{"xxSECRET-TWOSECRET-ONE", "xxplaceholder-2ph1"},
	} {
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"whole":    func(r io.Reader) io.Reader { return r },
			"one byte": iotest.OneByteReader,
			"half":     iotest.HalfReader,
			"data+EOF": iotest.DataErrReader,
		} {
			// Small reads take the buffered path, large ones the direct one.
			for _, size := range []int{7, 512, 64 << 10} {
				got, err := readAllWith(newStreamReplacer(wrap(strings.NewReader(tc.in)), from, to, nil), size)
				if err != nil || string(got) != tc.want {
					t.Errorf("%s, reads of %d: %q: %q %v, want %q", name, size, tc.in, got, err, tc.want)
				}
			}
		}
	}

	// Refusing: the bytes before the pattern pass, the pattern never does.
	big := strings.Repeat("x", 100_000) + "SECRET-TWO" + "tail"
	stop := errors.New("found")
	for _, size := range []int{512, 40_000, 64 << 10} {
		for _, wrap := range []func(io.Reader) io.Reader{iotest.HalfReader, iotest.OneByteReader, func(r io.Reader) io.Reader { return r }} {
			out, err := readAllWith(newStreamReplacer(wrap(strings.NewReader(big)), from, nil, func(i int) error {
				if i != 1 {
					t.Errorf("matched pattern %d", i)
				}
				return stop
			}), size)
			if !errors.Is(err, stop) {
				t.Fatalf("reads of %d: err %v", size, err)
			}
			if bytes.Contains(out, []byte("SECRET")) || len(out) > 100_000 {
				t.Fatalf("reads of %d: passed on %d bytes, including part of the pattern", size, len(out))
			}
		}
	}
}

// readAllWith reads r to the end with reads of size bytes.
func readAllWith(r io.Reader, size int) ([]byte, error) {
	var out []byte
	buf := make([]byte, size)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// A stream of events is passed on as it comes: only what could begin a
// pattern is held back.
func TestStreamReplacerDoesNotHoldEvents(t *testing.T) {
	pr, pw := io.Pipe()
	r := newStreamReplacer(pr, []string{"SECRET"}, []string{"x"}, nil)
	got := make(chan string)
	go func() {
		buf := make([]byte, 100)
		n, _ := r.Read(buf)
		got <- string(buf[:n])
	}()
	go pw.Write([]byte("data: one\n\n"))
	select {
	case s := <-got:
		if s != "data: one\n\n" {
			t.Fatalf("got %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event was held back")
	}
	go pw.Write([]byte("data: SEC"))
	go func() {
		buf := make([]byte, 100)
		n, _ := r.Read(buf)
		got <- string(buf[:n])
	}()
	if s := <-got; s != "data: " {
		t.Fatalf("got %q, want the part that cannot begin a pattern", s)
	}
	pw.Close()
}
