package config

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	"github.com/coding-agent/coding-agent/internal/task"
)

// maxSecretFile is the largest secret file read: a token or a key is a line.
const maxSecretFile = 64 << 10

// secretFile is a secret that may be given as a file instead of a value, so
// that it need not be in the environment.
type secretFile struct {
	key   string  // the value's key path, such as github.token; the file's is key + "_file"
	value *Secret // where the file's content goes
	file  string  // the file's path as configured
}

// secretFiles are the secrets of the task source and the provider in use
// that may come from a file.
func (c *Config) secretFiles() []secretFile {
	var out []secretFile
	if s := c.section(); s != nil {
		out = append(out, s.tokenFile())
	}
	if p := c.LLM.provider(); p != nil {
		if f, ok := p.keyFile("llm." + c.LLM.Provider); ok {
			out = append(out, f)
		}
	}
	return out
}

// readSecretFiles reads each secret given as a file (token_file,
// api_key_file) into its value; a relative path is relative to the working
// directory. Surrounding whitespace, the file's final newline among it, is
// dropped. Setting both the value and its file, a file that cannot be read,
// an empty one, or one of more than one line is a problem at the file's key.
func (c *Config) readSecretFiles() Problems {
	var ps Problems
	for _, s := range c.secretFiles() {
		if s.file == "" {
			continue
		}
		key := s.key + "_file"
		if *s.value != "" {
			ps = append(ps, Problem{Path: key, Msg: "set either " + s.key + " or " + key + ", not both"})
			continue
		}
		v, msg := readSecret(s.file)
		if msg != "" {
			ps = append(ps, Problem{Path: key, Msg: msg})
			continue
		}
		*s.value = Secret(v)
	}
	return ps
}

// readAppKey reads github.app.private_key_file into PrivateKey, checking
// that it holds an RSA private key in PEM (PKCS#1 or PKCS#8).
func (c *Config) readAppKey() Problems {
	a := c.GitHub.App
	if c.TaskSource != task.GitHub || a == nil || a.PrivateKeyFile == "" {
		return nil
	}
	const key = "github.app.private_key_file"
	fi, err := os.Stat(a.PrivateKeyFile)
	switch {
	case err != nil:
		return Problems{{Path: key, Msg: "cannot read the file: " + err.Error()}}
	case fi.Size() > maxSecretFile:
		return Problems{{Path: key, Msg: fmt.Sprintf("the file %s holds %d bytes; a private key is a few kilobytes", a.PrivateKeyFile, fi.Size())}}
	}
	b, err := os.ReadFile(a.PrivateKeyFile)
	if err != nil {
		return Problems{{Path: key, Msg: "cannot read the file: " + err.Error()}}
	}
	if !rsaKey(b) {
		return Problems{{Path: key, Msg: "holds no RSA private key in PEM (download the key from the app's settings page)"}}
	}
	a.PrivateKey = Secret(b)
	return nil
}

// rsaKey reports whether b begins with an RSA private key in PEM.
func rsaKey(b []byte) bool {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return false
	}
	if _, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		return true
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	_, isRSA := k.(*rsa.PrivateKey)
	return err == nil && isRSA
}

// readSecret returns the secret in the file at path, or what is wrong with
// the file. The message never quotes the file's content.
func readSecret(path string) (string, string) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return "", "cannot read the file: " + err.Error()
	case !fi.Mode().IsRegular() && fi.Mode()&os.ModeNamedPipe == 0:
		return "", "is not a file: " + path
	case fi.Size() > maxSecretFile:
		return "", fmt.Sprintf("the file %s holds %d bytes; it should hold the secret alone", path, fi.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "cannot read the file: " + err.Error()
	}
	v := strings.TrimSpace(string(b))
	switch {
	case v == "":
		return "", "the file " + path + " is empty"
	case strings.ContainsAny(v, "\r\n"):
		return "", "the file " + path + " holds more than one line; it should hold the secret alone"
	}
	return v, ""
}
