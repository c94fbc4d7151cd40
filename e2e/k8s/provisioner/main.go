// Command provisioner is the dynamic volume provisioner of the test
// cluster (e2e/k8s/cluster.sh). For every PersistentVolumeClaim of a
// StorageClass whose provisioner is its name, it makes a directory under
// its root, writable by every uid (the sandboxes' Pods run as a non-root
// user with no capabilities), and a hostPath PersistentVolume bound to the
// claim. When such a volume is released (its claim deleted), it removes the
// directory and the volume.
//
// Kubernetes' own hostPath provisioner is no use here: it makes
// directories root-only (0750) and is meant for a single-node development
// cluster started with a flag the test cluster does not set.
//
// Everything it does is idempotent: it derives the volume's and the
// directory's names from the claim's UID, so a restart (or a crash between
// the directory and the volume) picks up where it stopped, and a directory
// left without a claim or a volume is removed on the next sweep.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds | log.LUTC)
	log.SetPrefix("provisioner: ")
	if err := run(); err != nil {
		log.Printf("error: %v", err)
		os.Exit(1)
	}
}

func run() error {
	var opts Options
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the identity to act as (required)")
	flag.StringVar(&opts.Root, "root", "", "directory that holds the volumes' directories (required; absolute)")
	flag.StringVar(&opts.Name, "name", "git-sandbox.test/local", "provisioner name: serves the StorageClasses that name it")
	flag.StringVar(&opts.Node, "node", "", "pin the volumes to this node (its kubernetes.io/hostname label)")
	flag.DurationVar(&opts.Resync, "resync", time.Minute, "how often every claim and volume is looked at again, and orphaned directories swept")
	flag.Parse()
	if *kubeconfig == "" || opts.Root == "" {
		flag.Usage()
		return errors.New("-kubeconfig and -root are required")
	}
	if !filepath.IsAbs(opts.Root) {
		return fmt.Errorf("-root must be absolute: %s", opts.Root)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", *kubeconfig, err)
	}
	cfg.UserAgent = "git-sandbox-test-provisioner"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := New(client, opts)
	if err != nil {
		return err
	}
	return c.Run(ctx, 2)
}
