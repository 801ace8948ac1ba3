package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSOptions shapes the certificates of a TLS server started by NewRedis.
// The zero value is a server whose certificate names 127.0.0.1 and
// localhost, asking clients for no certificate.
type TLSOptions struct {
	// Names are the server certificate's names (IP addresses or DNS
	// names). Default 127.0.0.1 and localhost; give others to make a
	// certificate the address dialed does not match.
	Names []string
	// AuthClients is redis-server's --tls-auth-clients: "no" (the
	// default), "yes" (a client certificate signed by the CA is required)
	// or "optional".
	AuthClients string
}

// RedisTLS is the TLS set-up of a server: a CA made for it in the test,
// the server's certificate signed by it, and a client certificate the
// server accepts, all as PEM files in the server's directory.
type RedisTLS struct {
	// CAFile is the CA certificate (PEM) that signed both certificates.
	CAFile string
	// ClientCertFile and ClientKeyFile are a client certificate and its
	// key (PEM) the server accepts.
	ClientCertFile, ClientKeyFile string
	// CA holds the CA certificate.
	CA *x509.CertPool

	serverCert, serverKey string
	serverName            string
	authClients           string
	client                tls.Certificate
}

// ClientConfig returns a TLS configuration trusting the CA and presenting
// the client certificate, for test set-up that talks to the server itself.
func (t *RedisTLS) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: t.CA, Certificates: []tls.Certificate{t.client}, ServerName: t.serverName, MinVersion: tls.VersionTLS12}
}

func newRedisTLS(dir string, opts TLSOptions) (*RedisTLS, error) {
	if len(opts.Names) == 0 {
		opts.Names = []string{"127.0.0.1", "localhost"}
	}
	if opts.AuthClients == "" {
		opts.AuthClients = "no"
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testenv: tls: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "replicator testenv CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("testenv: tls: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("testenv: tls: CA: %w", err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, names []string) ([]byte, *ecdsa.PrivateKey, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		for _, n := range names {
			if ip := net.ParseIP(n); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, n)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		return der, key, err
	}
	serverDER, serverKey, err := leaf(2, "replicator testenv redis", x509.ExtKeyUsageServerAuth, opts.Names)
	if err != nil {
		return nil, fmt.Errorf("testenv: tls: server certificate: %w", err)
	}
	clientDER, clientKey, err := leaf(3, "replicator testenv client", x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return nil, fmt.Errorf("testenv: tls: client certificate: %w", err)
	}
	t := &RedisTLS{
		CAFile:         filepath.Join(dir, "ca.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile:  filepath.Join(dir, "client-key.pem"),
		CA:             x509.NewCertPool(),
		serverCert:     filepath.Join(dir, "server.pem"),
		serverKey:      filepath.Join(dir, "server-key.pem"),
		serverName:     opts.Names[0],
		authClients:    opts.AuthClients,
	}
	t.CA.AddCert(ca)
	for _, f := range []struct {
		path string
		typ  string
		der  []byte
	}{
		{t.CAFile, "CERTIFICATE", caDER},
		{t.serverCert, "CERTIFICATE", serverDER},
		{t.ClientCertFile, "CERTIFICATE", clientDER},
	} {
		if err := writePEM(f.path, f.typ, f.der); err != nil {
			return nil, err
		}
	}
	for _, k := range []struct {
		path string
		key  *ecdsa.PrivateKey
	}{{t.serverKey, serverKey}, {t.ClientKeyFile, clientKey}} {
		der, err := x509.MarshalPKCS8PrivateKey(k.key)
		if err != nil {
			return nil, fmt.Errorf("testenv: tls: %w", err)
		}
		if err := writePEM(k.path, "PRIVATE KEY", der); err != nil {
			return nil, err
		}
	}
	if t.client, err = tls.LoadX509KeyPair(t.ClientCertFile, t.ClientKeyFile); err != nil {
		return nil, fmt.Errorf("testenv: tls: %w", err)
	}
	return t, nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("testenv: tls: %w", err)
	}
	return nil
}

// StartRedisTLS starts a private redis-server listening with TLS only, as
// StartRedis does a plain one.
func StartRedisTLS(t testing.TB, opts TLSOptions) *Redis {
	t.Helper()
	r, err := NewRedis(RedisOptions{TLS: &opts})
	if err != nil {
		t.Fatalf("start redis with tls: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}
