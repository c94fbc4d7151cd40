package mcp

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// HTTPPath is where the server answers over HTTP.
const HTTPPath = "/mcp"

// Listening is what ServeHTTP announces once it listens: the URL to give
// the client and the bearer token every request must carry.
type Listening struct {
	URL   string
	Token string
}

// LoopbackAddr checks an --http address: its host must be a loopback
// address ("" and localhost mean 127.0.0.1), since the server hands out
// containers and, with mcp.allow_land, landing.
func LoopbackAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", usererr.New("--http %s: %v", termsafe.String(addr), err).Hint("give HOST:PORT, such as 127.0.0.1:8765 (port 0 picks a free one)")
	}
	if host == "" || host == "localhost" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", usererr.New("--http %s: the server listens on a loopback address only", termsafe.String(addr)).
			Hint("use 127.0.0.1:PORT or [::1]:PORT; anything that reaches this port can start containers here")
	}
	return net.JoinHostPort(host, port), nil
}

// ServeHTTP serves the streamable HTTP transport on a loopback address
// until ctx ends. A random bearer token guards it; announce receives the
// URL and the token once the listener is up (they are said only then).
func (s *Server) ServeHTTP(ctx context.Context, addr string, announce func(Listening)) error {
	addr, err := LoopbackAddr(addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usererr.Wrap(err, "listen on %s: %v", addr, err)
	}
	token := newToken()
	srv := &http.Server{Handler: s.httpHandler(token), ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.watch.run(ctx)
	go func() {
		<-ctx.Done()
		shut, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = srv.Shutdown(shut)
	}()
	announce(Listening{URL: "http://" + ln.Addr().String() + HTTPPath, Token: token})
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// httpHandler is the protocol at HTTPPath behind the bearer token, and
// cross-origin requests refused (a page in a browser on this machine).
func (s *Server) httpHandler(token string) http.Handler {
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, nil)
	verify := func(_ context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			return nil, fmt.Errorf("%w: not this server's token", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: "git-sandbox-user", Expiration: time.Now().Add(time.Hour)}, nil
	}
	mux := http.NewServeMux()
	mux.Handle(HTTPPath, auth.RequireBearerToken(verify, nil)(mcpHandler))
	return http.NewCrossOriginProtection().Handler(mux)
}

// newToken is 256 random bits in hex.
func newToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}
