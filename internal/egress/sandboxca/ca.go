// Package sandboxca is a sandbox's own certificate authority: made when
// the sandbox starts, name-constrained to the hosts its secrets are bound
// to, trusted inside the agent's container, its key kept by the egress
// proxy, which signs short-lived leaves with it.
package sandboxca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
)

// CA validity. A sandbox's CA is made when the sandbox is started; the
// leaves it signs are short-lived and made again before they run out.
const (
	CAValidity   = 90 * 24 * time.Hour
	LeafValidity = 24 * time.Hour
	// leafRenew is how long before it runs out a cached leaf is replaced.
	leafRenew = time.Hour
	// maxLeaves bounds the leaf cache (a wildcard binding admits any
	// number of names).
	maxLeaves = 1024
)

// CA is a sandbox's certificate authority. Its certificate is trusted by
// the agent's container; its key stays with the proxy. It is
// name-constrained to the domains of the hosts secrets are bound to, so it
// can vouch for nothing else even in the wrong hands.
type CA struct {
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// CertPEM is Cert, PEM-encoded: what the agent's container trusts.
	CertPEM []byte

	key    *ecdsa.PrivateKey
	now    func() time.Time
	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// New makes a CA for a sandbox whose secrets are bound to the given
// domains (names, or the domain of a wildcard; never an address).
func New(domains []string) (*CA, error) {
	if len(domains) == 0 {
		return nil, errors.New("new CA: no hosts")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("new CA: %w", err)
	}
	id := make([]byte, 6)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("new CA: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{Organization: []string{"git sandbox"}, CommonName: "git sandbox egress CA " + hex.EncodeToString(id)},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(CAValidity),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         domains,
		ExcludedIPRanges: []*net.IPNet{
			{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)},
			{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
		},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("new CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("new CA: %w", err)
	}
	return &CA{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:     key,
		now:     time.Now,
		leaves:  map[string]*tls.Certificate{},
	}, nil
}

func serial() *big.Int {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}

// Write stores the certificate (mode 0644, for mounting into the agent's
// container) and the key (mode 0600, for the proxy's only). Each file is
// replaced by a rename: a container that already has the old file mounted
// keeps seeing the old one.
func (ca *CA) Write(certPath, keyPath string) error {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return fmt.Errorf("write CA: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := atomicfile.Write(keyPath, keyPEM, 0o600); err != nil {
		return fmt.Errorf("write CA key: %w", err)
	}
	if err := atomicfile.Write(certPath, ca.CertPEM, 0o644); err != nil {
		return fmt.Errorf("write CA certificate: %w", err)
	}
	return nil
}

// LoadCA reads a CA written by Write.
func LoadCA(certPath, keyPath string) (*CA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("load CA: the key is not ECDSA")
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("load CA: the certificate is not a CA")
	}
	return &CA{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		key:     key,
		now:     time.Now,
		leaves:  map[string]*tls.Certificate{},
	}, nil
}

// Leaf returns a certificate for host signed by the CA, made on first use
// and cached until shortly before it runs out.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	now := ca.now()
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && now.Add(leafRenew).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	if !now.Add(leafRenew).Before(ca.Cert.NotAfter) {
		return nil, errors.New("the sandbox's CA has run out; start the sandbox again to make a new one")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leaf for %s: %w", host, err)
	}
	notAfter := now.Add(LeafValidity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	notBefore := now.Add(-time.Hour)
	if notBefore.Before(ca.Cert.NotBefore) {
		notBefore = ca.Cert.NotBefore
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("leaf for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("leaf for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}
	if len(ca.leaves) >= maxLeaves {
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	return c, nil
}

// systemBundles are where Linux distributions keep the trusted roots, in
// the order Go's own crypto/x509 looks.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// SystemBundlePath is where the agent's container (a Debian image) reads
// its trusted roots; the combined bundle is mounted there.
const SystemBundlePath = "/etc/ssl/certs/ca-certificates.crt"

// SystemBundle reads this machine's bundle of trusted roots (SSL_CERT_FILE
// if set).
func SystemBundle() ([]byte, error) {
	paths := systemBundles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		paths = []string{f}
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read trusted roots: %w", err)
		}
	}
	return nil, fmt.Errorf("read trusted roots: none of %s exists", strings.Join(paths, ", "))
}

// Bundle is the system roots followed by the sandbox's CA: what the agent's
// container trusts through SSL_CERT_FILE, NODE_EXTRA_CA_CERTS (which adds
// to Node's own roots), REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO and the system
// bundle path.
func Bundle(system, caPEM []byte) []byte {
	var b bytes.Buffer
	b.Write(system)
	if len(system) > 0 && !bytes.HasSuffix(system, []byte("\n")) {
		b.WriteByte('\n')
	}
	b.WriteString("# git sandbox: this sandbox's egress CA\n")
	b.Write(caPEM)
	return b.Bytes()
}

// CAEnv is the environment that makes common tools in the agent's
// container trust bundlePath, the container path of Bundle's output.
func CAEnv(bundlePath string) []string {
	return []string{
		"SSL_CERT_FILE=" + bundlePath,
		"NODE_EXTRA_CA_CERTS=" + bundlePath,
		"REQUESTS_CA_BUNDLE=" + bundlePath,
		"CURL_CA_BUNDLE=" + bundlePath,
		"GIT_SSL_CAINFO=" + bundlePath,
	}
}
