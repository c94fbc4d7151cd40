package kube

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Each API request is reported with its method, path and time; a watch
// and an exec say so, and an exec's command is not shown.
func TestTraceNamesEachRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	var lines []string
	rt := traced{http.DefaultTransport, func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }}
	c := &http.Client{Transport: rt}
	for _, u := range []string{"/api/v1/namespaces/n/pods?watch=true&fieldSelector=x", "/api/v1/namespaces/n/pods/p/exec?command=secret-arg", "/version"} {
		resp, err := c.Get(srv.URL + u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := []string{"k8s GET /api/v1/namespaces/n/pods (watch)", "k8s GET /api/v1/namespaces/n/pods/p/exec (stream opened)", "k8s GET /version"}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) || strings.Contains(lines[i], "secret") {
			t.Errorf("line %d: %q, want it to end %q", i, lines[i], w)
		}
	}
}
