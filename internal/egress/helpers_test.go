package egress

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeResolver answers from a table (names without their trailing dot); a
// name it does not know does not exist. It counts lookups per name, as the
// name was asked.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	lookups map[string]int
}

func newResolver(pairs ...string) *fakeResolver {
	r := &fakeResolver{answers: map[string][]netip.Addr{}, lookups: map[string]int{}}
	for i := 0; i < len(pairs); i += 2 {
		for _, a := range strings.Split(pairs[i+1], ",") {
			r.answers[pairs[i]] = append(r.answers[pairs[i]], netip.MustParseAddr(a))
		}
	}
	return r
}

// asked is how often name was asked, in either form (with or without the
// trailing dot).
func (r *fakeResolver) asked(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	name = strings.TrimSuffix(name, ".")
	return r.lookups[name] + r.lookups[name+"."]
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups[host]++
	a, ok := r.answers[strings.TrimSuffix(host, ".")]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

// testPKI is a CA of the test's own and a server certificate it signed, for
// the fake upstreams (the proxy trusts it through UpstreamRoots, as a user
// would with upstream_ca).
type testPKI struct {
	pool   *x509.CertPool
	caPEM  []byte
	server tls.Certificate
}

func newTestPKI(t testing.TB, names ...string) *testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "upstream test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &testPKI{
		pool:   pool,
		caPEM:  pemCert(caDER),
		server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
