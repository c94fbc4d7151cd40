package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// annProvisionedBy names the provisioner of a volume. Kubernetes' volume
// controller reads it too: for a name that is not one of its own plugins
// it leaves the volume to that provisioner, here when it is released.
const annProvisionedBy = "pv.kubernetes.io/provisioned-by"

// component is the source the provisioner's events name.
const component = "git-sandbox-test-provisioner"

// Options configure a Controller.
type Options struct {
	// Root holds one directory per volume, named as the volume.
	Root string
	// Name is the provisioner name StorageClasses give to be served.
	Name string
	// Node, when set, pins the volumes to that node: a directory exists on
	// one machine only.
	Node string
	// Resync is how often every claim and volume is looked at again, and
	// the root swept of directories without a claim or volume.
	Resync time.Duration
	// OrphanAge is how long a directory without a claim or volume is left
	// alone before the sweep removes it (it may be about to get its
	// volume); two minutes if zero.
	OrphanAge time.Duration
}

// Controller provisions and deletes the volumes of its StorageClasses.
type Controller struct {
	client  kubernetes.Interface
	opts    Options
	factory informers.SharedInformerFactory
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[item]
	// warned holds the claims (UID and reason) already told why they are
	// not provisioned, so a resync does not repeat the event.
	warned sync.Map
}

// item is one object to look at: a claim (namespace and name) or a volume
// (name only).
type item struct {
	volume    bool
	namespace string
	name      string
}

func (it item) String() string {
	if it.volume {
		return "volume " + it.name
	}
	return "claim " + it.namespace + "/" + it.name
}

// New makes a Controller on client; Run starts it.
func New(client kubernetes.Interface, opts Options) (*Controller, error) {
	if opts.Resync <= 0 {
		opts.Resync = time.Minute
	}
	if opts.OrphanAge <= 0 {
		opts.OrphanAge = 2 * time.Minute
	}
	c := &Controller{
		client:  client,
		opts:    opts,
		factory: informers.NewSharedInformerFactory(client, opts.Resync),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[item](),
			workqueue.TypedRateLimitingQueueConfig[item]{Name: "provisioner"}),
	}
	claims := c.factory.Core().V1().PersistentVolumeClaims()
	volumes := c.factory.Core().V1().PersistentVolumes()
	classes := c.factory.Storage().V1().StorageClasses()
	c.claims, c.volumes, c.classes = claims.Lister(), volumes.Lister(), classes.Lister()
	c.synced = []cache.InformerSynced{claims.Informer().HasSynced, volumes.Informer().HasSynced, classes.Informer().HasSynced}

	enqueueClaim := func(obj any) {
		if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
			c.queue.Add(item{namespace: pvc.Namespace, name: pvc.Name})
		}
	}
	enqueueVolume := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok {
			c.queue.Add(item{volume: true, name: pv.Name})
		}
	}
	// A class made after its claims: look at the claims again.
	enqueueClassClaims := func(obj any) {
		sc, ok := obj.(*storagev1.StorageClass)
		if !ok {
			return
		}
		all, _ := c.claims.List(labels.Everything())
		for _, pvc := range all {
			if className(pvc) == sc.Name {
				enqueueClaim(pvc)
			}
		}
	}
	if _, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueClaim,
		UpdateFunc: func(_, obj any) { enqueueClaim(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watch claims: %w", err)
	}
	if _, err := volumes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueVolume,
		UpdateFunc: func(_, obj any) { enqueueVolume(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watch volumes: %w", err)
	}
	if _, err := classes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueClassClaims,
		UpdateFunc: func(_, obj any) { enqueueClassClaims(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watch storage classes: %w", err)
	}
	return c, nil
}

// Run serves until ctx ends, with that many workers.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if err := os.MkdirAll(c.opts.Root, 0o700); err != nil {
		return fmt.Errorf("volume root: %w", err)
	}
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("the claims, volumes and storage classes did not sync (is the API server up, and may this identity list them?)")
	}
	log.Printf("ready: provisioner %s, volumes in %s", c.opts.Name, c.opts.Root)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	wg.Go(func() { wait.UntilWithContext(ctx, c.sweep, c.opts.Resync) })
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	log.Printf("stopped")
	return nil
}

// next handles one item from the queue; false when the queue is shut down.
func (c *Controller) next(ctx context.Context) bool {
	it, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(it)
	var err error
	if it.volume {
		err = c.syncVolume(ctx, it.name)
	} else {
		err = c.syncClaim(ctx, it.namespace, it.name)
	}
	if err == nil {
		c.queue.Forget(it)
		return true
	}
	log.Printf("%s: %v (retrying)", it, err)
	c.queue.AddRateLimited(it)
	return true
}

// syncClaim provisions a volume for a claim of one of this provisioner's
// classes that has none yet.
func (c *Controller) syncClaim(ctx context.Context, namespace, name string) error {
	claim, err := c.claims.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if claim.DeletionTimestamp != nil || claim.Spec.VolumeName != "" {
		return nil
	}
	class, err := c.classes.Get(className(claim))
	if apierrors.IsNotFound(err) || (err == nil && class.Provisioner != c.opts.Name) {
		return nil
	}
	if err != nil {
		return err
	}
	if why := unsupported(claim); why != "" {
		c.warnOnce(ctx, claim, why)
		return nil
	}
	pvName := volumeName(claim.UID)
	if pv, err := c.volumes.Get(pvName); err == nil {
		return checkBound(pv, claim)
	}
	dir := filepath.Join(c.opts.Root, pvName)
	if err := makeDir(dir); err != nil {
		return err
	}
	pv := c.volumeFor(claim, class, dir)
	_, err = c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, err := c.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get volume %s: %w", pvName, err)
		}
		return checkBound(existing, claim)
	}
	if err != nil {
		return fmt.Errorf("create volume %s: %w", pvName, err)
	}
	log.Printf("provisioned %s (%s) for claim %s/%s", pvName, dir, claim.Namespace, claim.Name)
	c.event(ctx, claim, corev1.EventTypeNormal, "ProvisioningSucceeded",
		fmt.Sprintf("provisioned volume %s (a directory of the test cluster's node)", pvName))
	return nil
}

// checkBound says whether an existing volume of the claim's name is the
// claim's: it is, unless it points at another claim.
func checkBound(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	if ref := pv.Spec.ClaimRef; ref != nil && ref.UID != claim.UID {
		return fmt.Errorf("volume %s exists for another claim (%s/%s, uid %s)", pv.Name, ref.Namespace, ref.Name, ref.UID)
	}
	return nil
}

// syncVolume deletes a volume this provisioner made, and its directory,
// once it is released and its reclaim policy says Delete.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pv.Annotations[annProvisionedBy] != c.opts.Name ||
		pv.Status.Phase != corev1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return nil
	}
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim, err := c.claims.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
		if err == nil && claim.UID == ref.UID {
			// The volume controller's view lags: the claim is still there.
			return nil
		}
	}
	dir, err := c.dirOf(pv)
	if err != nil {
		log.Printf("volume %s: %v; leaving it alone", name, err)
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	uid := pv.UID
	err = c.client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", name, err)
	}
	claim := "none"
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = ref.Namespace + "/" + ref.Name
	}
	log.Printf("deleted %s and %s (released by claim %s)", name, dir, claim)
	return nil
}

// dirOf is the directory of a volume this provisioner made; an error if
// the volume does not point where the provisioner would have put it (it is
// never trusted to name what to remove).
func (c *Controller) dirOf(pv *corev1.PersistentVolume) (string, error) {
	if !volumeNameRE.MatchString(pv.Name) {
		return "", fmt.Errorf("not a name this provisioner gives")
	}
	dir := filepath.Join(c.opts.Root, pv.Name)
	if hp := pv.Spec.HostPath; hp == nil || hp.Path != dir {
		return "", fmt.Errorf("its path is not %s", dir)
	}
	return dir, nil
}

// sweep removes directories under the root that have neither a volume nor
// a claim waiting for one: left by a volume deleted while the provisioner
// was down, or by a claim deleted before its volume was made.
func (c *Controller) sweep(context.Context) {
	entries, err := os.ReadDir(c.opts.Root)
	if err != nil {
		log.Printf("sweep: %v", err)
		return
	}
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		log.Printf("sweep: %v", err)
		return
	}
	wanted := map[string]bool{}
	for _, claim := range claims {
		wanted[volumeName(claim.UID)] = true
	}
	for _, e := range entries {
		name := e.Name()
		if !volumeNameRE.MatchString(name) || wanted[name] {
			continue
		}
		if _, err := c.volumes.Get(name); !apierrors.IsNotFound(err) {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < c.opts.OrphanAge {
			continue
		}
		dir := filepath.Join(c.opts.Root, name)
		if err := os.RemoveAll(dir); err != nil {
			log.Printf("sweep: remove %s: %v", dir, err)
			continue
		}
		log.Printf("sweep: removed %s (no volume or claim of that name)", dir)
	}
}

// volumeFor is the volume provisioned for claim: its directory, the size
// and access modes it asked for, pre-bound to it.
func (c *Controller) volumeFor(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, dir string) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	// Directory, not DirectoryOrCreate: a directory gone missing fails the
	// Pod, where the kubelet would make a root-owned 0755 one in its place.
	hostPathType := corev1.HostPathDirectory
	filesystem := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        volumeName(claim.UID),
			Annotations: map[string]string{annProvisionedBy: c.opts.Name},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes: claim.Spec.AccessModes,
			ClaimRef: &corev1.ObjectReference{
				Kind:       "PersistentVolumeClaim",
				APIVersion: "v1",
				Namespace:  claim.Namespace,
				Name:       claim.Name,
				UID:        claim.UID,
			},
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			VolumeMode:                    &filesystem,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostPathType},
			},
		},
	}
	if c.opts.Node != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{c.opts.Node},
			}}}},
		}}
	}
	return pv
}

// makeDir makes a volume's directory, writable by every uid: the Pods run
// as any non-root user, with no capability to override permissions. An
// existing directory (a restart after a crash) is fixed up the same way.
func makeDir(dir string) error {
	if err := os.Mkdir(dir, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("make volume directory: %w", err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("make volume directory: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("make volume directory: %s exists and is not a directory", dir)
	}
	// Mkdir's mode is cut by the umask.
	if err := os.Chmod(dir, 0o777); err != nil {
		return fmt.Errorf("make volume directory: %w", err)
	}
	return nil
}

// unsupported says why a claim cannot be served, or "".
func unsupported(claim *corev1.PersistentVolumeClaim) string {
	switch {
	case claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock:
		return "block volumes are not supported: only volumeMode Filesystem"
	case claim.Spec.Selector != nil:
		return "claims with a selector are not supported"
	case claim.Spec.DataSource != nil || claim.Spec.DataSourceRef != nil:
		return "claims with a data source are not supported"
	}
	if _, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		return "the claim requests no storage"
	}
	return ""
}

// warnOnce tells a claim, once, why it gets no volume.
func (c *Controller) warnOnce(ctx context.Context, claim *corev1.PersistentVolumeClaim, why string) {
	if _, seen := c.warned.LoadOrStore(string(claim.UID)+"\x00"+why, true); seen {
		return
	}
	log.Printf("claim %s/%s: %s", claim.Namespace, claim.Name, why)
	c.event(ctx, claim, corev1.EventTypeWarning, "ProvisioningFailed", why)
}

// event records an event on a claim, as kubectl describe shows it. A
// failure is logged only: the event is for the reader.
func (c *Controller) event(ctx context.Context, claim *corev1.PersistentVolumeClaim, typ, reason, message string) {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: claim.Name + ".", Namespace: claim.Namespace},
		InvolvedObject: corev1.ObjectReference{
			Kind: "PersistentVolumeClaim", APIVersion: "v1",
			Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion,
		},
		Type: typ, Reason: reason, Message: message,
		Source:         corev1.EventSource{Component: component},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if _, err := c.client.CoreV1().Events(claim.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		log.Printf("claim %s/%s: record event %s: %v", claim.Namespace, claim.Name, reason, err)
	}
}

// volumeName is the name of the volume (and its directory) for a claim,
// as Kubernetes' own provisioners name them.
func volumeName(claimUID types.UID) string { return "pvc-" + string(claimUID) }

// volumeNameRE matches the names volumeName gives: a claim's UID is a UUID.
var volumeNameRE = regexp.MustCompile(`^pvc-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func className(claim *corev1.PersistentVolumeClaim) string {
	if claim.Spec.StorageClassName == nil {
		return ""
	}
	return *claim.Spec.StorageClassName
}
