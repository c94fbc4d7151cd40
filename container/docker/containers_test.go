package docker

import (
	"errors"
	"testing"
)

func TestStaleEndpoint(t *testing.T) {
	for msg, want := range map[string]string{
		"Error response from daemon: endpoint with name git-sandbox-x-helper already exists in network none": "none",
		"Error response from daemon: endpoint with name a already exists in network git-sandbox-net":         "git-sandbox-net",
		"Error response from daemon: no such container":                                                      "",
		"Error response from daemon: network x already exists in network y":                                  "",
	} {
		got, ok := staleEndpoint(errors.New(msg))
		if got != want || ok != (want != "") {
			t.Errorf("%q: %q, %v; want %q", msg, got, ok, want)
		}
	}
	if _, ok := staleEndpoint(nil); ok {
		t.Error("no error is a stale endpoint")
	}
}
