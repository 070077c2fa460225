package config_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
)

func appKeyFile(t *testing.T, body []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(p, body, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func appConfig(app string) string {
	return "task_source: github\ngithub:\n  owner: acme\n" + app + "llm:\n  provider: ollama\n  ollama: {model: q}\n"
}

func TestGitHubApp(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8 := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	for name, key := range map[string][]byte{"pkcs1": pkcs1, "pkcs8": pkcs8} {
		c, _ := mustParse(t, appConfig("  app:\n    app_id: 12345\n    private_key_file: "+appKeyFile(t, key)+"\n    installation_id: 678\n"), nil)
		a := c.GitHub.App
		if a == nil || a.AppID != 12345 || a.InstallationID != 678 || a.PrivateKey.Reveal() != string(key) {
			t.Fatalf("%s: app section %+v", name, a)
		}
		if !slices.Contains(c.Secrets(), string(key)) {
			t.Errorf("%s: the private key is not among the secrets", name)
		}
	}
	for _, tc := range []struct {
		name, app string
		want      config.Problem
	}{
		{"token too", "  token: t\n  app:\n    app_id: 1\n    private_key_file: " + appKeyFile(t, pkcs1) + "\n",
			config.Problem{Path: "github.app", Msg: "sign in with github.app or github.token, not both"}},
		{"no app id", "  app:\n    private_key_file: " + appKeyFile(t, pkcs1) + "\n",
			config.Problem{Path: "github.app.app_id", Msg: "required: the app's id (a positive number, on the app's settings page)"}},
		{"no key", "  app:\n    app_id: 3\n",
			config.Problem{Path: "github.app.private_key_file", Msg: "required: the app's private key (.pem)"}},
		{"not a key", "  app:\n    app_id: 3\n    private_key_file: " + appKeyFile(t, []byte("hello\n")) + "\n",
			config.Problem{Path: "github.app.private_key_file", Msg: "holds no RSA private key in PEM (download the key from the app's settings page)"}},
		{"negative installation", "  app:\n    app_id: 3\n    installation_id: -1\n    private_key_file: " + appKeyFile(t, pkcs1) + "\n",
			config.Problem{Path: "github.app.installation_id", Msg: "must be at least 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, appConfig(tc.app), nil)
			found := false
			for _, p := range got {
				found = found || p.Path == tc.want.Path && strings.Contains(p.Msg, tc.want.Msg)
			}
			if !found {
				t.Errorf("problems %v, want %s: %s", got, tc.want.Path, tc.want.Msg)
			}
		})
	}
}
