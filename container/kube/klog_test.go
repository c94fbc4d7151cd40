package kube

import (
	"errors"
	"testing"

	"k8s.io/klog/v2"
)

// TestClientGoLogsAreDiscarded: client-go reports some errors only to
// klog (runtime.HandleError, a stream's copy failing). The process must
// go on, and print nothing of them.
func TestClientGoLogsAreDiscarded(t *testing.T) {
	klog.ErrorS(errors.New("stream reset"), "error copying stdin")
	klog.Error("unhandled error")
	klog.Warning("warning from the API server")
	klog.Info("info")
	klog.Flush()
}
