package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

const testName = "git-sandbox.test/local"

// The fake clientset has no volume controller: the tests play its part
// (binding is not needed; releasing a volume is setting its phase).

func class(name, provisioner string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner}
}

func claim(name, uid, className string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &className,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("64Mi"),
			}},
		},
	}
}

const (
	uid1 = "0a1b2c3d-0000-4000-8000-000000000001"
	uid2 = "0a1b2c3d-0000-4000-8000-000000000002"
	uid3 = "0a1b2c3d-0000-4000-8000-000000000003"
)

// start runs a controller on a fake clientset holding objs until the test
// ends.
func start(t *testing.T, root string, objs ...any) *fake.Clientset {
	t.Helper()
	client := fake.NewClientset()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *storagev1.StorageClass:
			_, err = client.StorageV1().StorageClasses().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.PersistentVolumeClaim:
			_, err = client.CoreV1().PersistentVolumeClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.PersistentVolume:
			_, err = client.CoreV1().PersistentVolumes().Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected object %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(client, Options{Root: root, Name: testName, Node: "node-1", Resync: 100 * time.Millisecond, OrphanAge: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return client
}

// eventually polls cond until it holds or 20 seconds pass (generous: the
// race detector on a busy machine).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getVolume(client *fake.Clientset, name string) (*corev1.PersistentVolume, error) {
	return client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
}

func TestProvisionsAndDeletes(t *testing.T) {
	root := t.TempDir()
	client := start(t, root, class("local", testName), claim("data", uid1, "local"))
	name := "pvc-" + uid1
	var pv *corev1.PersistentVolume
	eventually(t, "the volume", func() bool {
		var err error
		pv, err = getVolume(client, name)
		return err == nil
	})
	dir := filepath.Join(root, name)
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o777 || !info.IsDir() {
		t.Errorf("volume directory mode = %v, want a directory with 0777 (any uid writes)", info.Mode())
	}
	if got := pv.Annotations[annProvisionedBy]; got != testName {
		t.Errorf("provisioned-by = %q, want %q", got, testName)
	}
	if hp := pv.Spec.HostPath; hp == nil || hp.Path != dir || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
		t.Errorf("hostPath = %+v, want %s of type Directory", hp, dir)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != "ns" || ref.Name != "data" || ref.UID != uid1 {
		t.Errorf("claimRef = %+v, want ns/data uid %s", ref, uid1)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != "64Mi" {
		t.Errorf("capacity = %s, want 64Mi", got.String())
	}
	if len(pv.Spec.AccessModes) != 1 || pv.Spec.AccessModes[0] != corev1.ReadWriteOnce {
		t.Errorf("access modes = %v, want [ReadWriteOnce]", pv.Spec.AccessModes)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != "local" {
		t.Errorf("reclaim policy %s, class %q; want Delete, local", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName)
	}
	if na := pv.Spec.NodeAffinity; na == nil || na.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "node-1" {
		t.Errorf("node affinity = %+v, want node-1", na)
	}
	// The event is recorded after the volume is created: wait for it.
	var events *corev1.EventList
	eventually(t, "the ProvisioningSucceeded event", func() bool {
		var err error
		events, err = client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		return err == nil && len(events.Items) > 0
	})
	if len(events.Items) != 1 || events.Items[0].Reason != "ProvisioningSucceeded" {
		t.Errorf("events = %+v; want one ProvisioningSucceeded", events.Items)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The claim is deleted; the volume controller marks the volume
	// Released.
	ctx := context.Background()
	if err := client.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeReleased
	if _, err := client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the volume to be deleted", func() bool {
		_, err := getVolume(client, name)
		return apierrors.IsNotFound(err)
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("volume directory after delete: %v, want it gone", err)
	}
}

func TestLeavesOthersAlone(t *testing.T) {
	root := t.TempDir()
	// A volume of another provisioner, released, with a path in the root.
	foreign := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + uid3, Annotations: map[string]string{annProvisionedBy: "someone/else"}},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(root, "pvc-"+uid3)},
			},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased},
	}
	if err := os.Mkdir(filepath.Join(root, "pvc-"+uid3), 0o755); err != nil {
		t.Fatal(err)
	}
	// Something in the root that is not a volume's directory.
	if err := os.Mkdir(filepath.Join(root, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	client := start(t, root,
		class("local", testName), class("other", "someone/else"),
		claim("theirs", uid1, "other"), foreign)
	// The sweep runs every 100ms: give it a few rounds.
	time.Sleep(500 * time.Millisecond)
	if _, err := getVolume(client, "pvc-"+uid1); !apierrors.IsNotFound(err) {
		t.Errorf("a claim of another class got a volume (%v)", err)
	}
	if _, err := getVolume(client, "pvc-"+uid3); err != nil {
		t.Errorf("another provisioner's released volume: %v, want it kept", err)
	}
	for _, d := range []string{"pvc-" + uid3, "lost+found"} {
		if _, err := os.Stat(filepath.Join(root, d)); err != nil {
			t.Errorf("%s: %v, want it kept", d, err)
		}
	}
}

func TestRefusesBlockVolumes(t *testing.T) {
	root := t.TempDir()
	block := claim("raw", uid1, "local")
	mode := corev1.PersistentVolumeBlock
	block.Spec.VolumeMode = &mode
	client := start(t, root, class("local", testName), block)
	eventually(t, "a warning event", func() bool {
		events, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		return err == nil && len(events.Items) == 1 && events.Items[0].Reason == "ProvisioningFailed" &&
			strings.Contains(events.Items[0].Message, "block")
	})
	time.Sleep(300 * time.Millisecond) // resyncs do not repeat it
	events, _ := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	if len(events.Items) != 1 {
		t.Errorf("%d events, want the warning once", len(events.Items))
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("root holds %d entries, want none", len(entries))
	}
}

// A restart after a crash: the directory of one claim was made but not its
// volume, the volume of another exists already, and a third directory has
// no claim or volume at all.
func TestPicksUpAfterARestart(t *testing.T) {
	root := t.TempDir()
	for _, uid := range []string{uid1, uid3} {
		if err := os.Mkdir(filepath.Join(root, "pvc-"+uid), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "pvc-"+uid2), 0o777); err != nil {
		t.Fatal(err)
	}
	c := &Controller{opts: Options{Root: root, Name: testName}}
	existing := c.volumeFor(claim("two", uid2, "local"), class("local", testName), filepath.Join(root, "pvc-"+uid2))
	client := start(t, root, class("local", testName), claim("one", uid1, "local"), claim("two", uid2, "local"), existing)
	eventually(t, "the volume of the first claim", func() bool {
		_, err := getVolume(client, "pvc-"+uid1)
		return err == nil
	})
	info, err := os.Stat(filepath.Join(root, "pvc-"+uid1))
	if err != nil || info.Mode().Perm() != 0o777 {
		t.Errorf("the first claim's directory: %v, %v; want mode 0777", info, err)
	}
	eventually(t, "the orphaned directory to be swept", func() bool {
		_, err := os.Stat(filepath.Join(root, "pvc-"+uid3))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(filepath.Join(root, "pvc-"+uid2)); err != nil {
		t.Errorf("the second claim's directory: %v, want it kept", err)
	}
}

func TestDirOfRefusesForeignPaths(t *testing.T) {
	c := &Controller{opts: Options{Root: "/root/volumes", Name: testName}}
	tests := []struct {
		name, path string
		ok         bool
	}{
		{"pvc-" + uid1, "/root/volumes/pvc-" + uid1, true},
		{"pvc-" + uid1, "/etc", false},
		{"pvc-" + uid1, "/root/volumes/pvc-" + uid2, false},
		{"../etc", "/root/volumes/../etc", false},
		{"data", "/root/volumes/data", false},
	}
	for _, tt := range tests {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: tt.name}}
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: tt.path}
		_, err := c.dirOf(pv)
		if (err == nil) != tt.ok {
			t.Errorf("dirOf(%s at %s) error = %v, want ok=%v", tt.name, tt.path, err, tt.ok)
		}
	}
}
