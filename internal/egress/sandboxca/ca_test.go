package sandboxca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func verifyLeaf(ca *CA, host string) error {
	leaf, err := ca.Leaf(host)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	_, err = leaf.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots})
	return err
}

func TestCALeaves(t *testing.T) {
	ca, err := New([]string{"api.example.com", "models.example.net"})
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || ca.Cert.MaxPathLen != 0 || !ca.Cert.MaxPathLenZero {
		t.Fatal("not a CA limited to leaves")
	}
	if k, ok := ca.Cert.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Fatal("the CA key is not ECDSA P-256")
	}
	if d := time.Until(ca.Cert.NotAfter); d > CAValidity || d < CAValidity-time.Minute {
		t.Fatalf("CA valid for %v", d)
	}
	for _, h := range []string{"api.example.com", "eu.models.example.net", "models.example.net"} {
		if err := verifyLeaf(ca, h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	leaf, _ := ca.Leaf("api.example.com")
	if d := leaf.Leaf.NotAfter.Sub(leaf.Leaf.NotBefore); d > LeafValidity+time.Hour {
		t.Errorf("leaf valid for %v", d)
	}
	if again, _ := ca.Leaf("api.example.com"); again != leaf {
		t.Error("the leaf was not cached")
	}
	// The CA's name constraints: a leaf for any other name is worthless,
	// even signed by the CA.
	for _, h := range []string{"evil.example.com", "example.com", "www.google.com"} {
		if err := verifyLeaf(ca, h); err == nil || !strings.Contains(err.Error(), "constraint") {
			t.Errorf("%s: %v, want a name constraint failure", h, err)
		}
	}
}

func TestCALeafRenewed(t *testing.T) {
	ca, err := New([]string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca.now = func() time.Time { return now }
	first, _ := ca.Leaf("api.example.com")
	now = now.Add(LeafValidity - leafRenew/2)
	second, err := ca.Leaf("api.example.com")
	if err != nil || second == first {
		t.Fatalf("a leaf about to run out was served again: %v", err)
	}
	now = ca.Cert.NotAfter
	if _, err := ca.Leaf("api.example.com"); err == nil {
		t.Fatal("a CA that ran out signed a leaf")
	}
}

func TestCAWriteLoad(t *testing.T) {
	dir := t.TempDir()
	ca, err := New([]string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if err := ca.Write(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{certPath: 0o644, keyPath: 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want %v", path, fi.Mode(), err, mode)
		}
	}
	if strings.Contains(readFile(t, certPath), "PRIVATE") {
		t.Fatal("the certificate file holds the key")
	}
	loaded, err := LoadCA(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(ca.Cert) {
		t.Fatal("a different certificate came back")
	}
	if err := verifyLeaf(loaded, "api.example.com"); err != nil {
		t.Fatal(err)
	}
	other, _ := New([]string{"api.example.com"})
	other.Write(filepath.Join(dir, "other.pem"), filepath.Join(dir, "other-key.pem"))
	if _, err := LoadCA(certPath, filepath.Join(dir, "other-key.pem")); err == nil {
		t.Fatal("a key of another CA was accepted")
	}
}

func TestBundle(t *testing.T) {
	ca, _ := New([]string{"api.example.com"})
	b := Bundle([]byte("-----BEGIN CERTIFICATE-----\nsys\n-----END CERTIFICATE-----"), ca.CertPEM)
	if !strings.HasPrefix(string(b), "-----BEGIN CERTIFICATE-----\nsys\n-----END CERTIFICATE-----\n#") ||
		!strings.HasSuffix(string(b), string(ca.CertPEM)) {
		t.Fatalf("bundle:\n%s", b)
	}
	sys, err := SystemBundle()
	if err != nil {
		t.Skipf("no system bundle here: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(Bundle(sys, ca.CertPEM)) {
		t.Fatal("the bundle does not parse")
	}
	if err := verifyLeafPool(ca, "api.example.com", pool); err != nil {
		t.Fatal(err)
	}
}

func verifyLeafPool(ca *CA, host string, roots *x509.CertPool) error {
	leaf, err := ca.Leaf(host)
	if err != nil {
		return err
	}
	_, err = leaf.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots})
	return err
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
