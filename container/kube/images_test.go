package kube

import (
	"errors"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// A registry's answer that it has no such image ends the wait at once;
// a registry out of reach is waited for.
func TestImageNotThereIsFinal(t *testing.T) {
	for _, tc := range []struct {
		reason, message string
		want            bool
	}{
		{"ErrImagePull", `failed to resolve reference "127.0.0.1:5000/s:1": 127.0.0.1:5000/s:1: not found`, true},
		{"ImagePullBackOff", `Back-off pulling image: manifest unknown`, true},
		{"ErrImagePull", `dial tcp 127.0.0.1:5000: connect: connection refused`, false},
		{"CrashLoopBackOff", `not found`, false},
	} {
		if got := imageNotThere(tc.reason, tc.message); got != tc.want {
			t.Errorf("imageNotThere(%s, %q) = %v", tc.reason, tc.message, got)
		}
	}
}

// A sandbox image the nodes cannot pull says which, and how to push it.
func TestImageErrorSaysHowToPush(t *testing.T) {
	e := &Engine{opts: Options{Name: "k8s", Image: "127.0.0.1:5000/sandbox:1"}}
	err := e.imageError("127.0.0.1:5000/sandbox:1", &startError{reason: "ErrImagePull", message: "not found", final: true})
	ue, ok := usererr.As(err)
	if !ok || !strings.Contains(ue.Msg, "cannot pull the image 127.0.0.1:5000/sandbox:1") || !strings.Contains(strings.Join(ue.Hints, "\n"), "git sandbox image push --engine k8s") {
		t.Errorf("imageError = %v", err)
	}
	other := errors.New("engine gone")
	if err := e.imageError("x", other); err != other {
		t.Errorf("another error is changed: %v", err)
	}
}
