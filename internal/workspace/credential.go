package workspace

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
)

// Credential gives the value of an Authorization header.
type Credential func(ctx context.Context) (string, error)

// Static is a credential that never changes.
func Static(auth string) Credential {
	return func(context.Context) (string, error) { return auth, nil }
}

// How the credential reaches git: in no environment and no file. A command
// that talks to the forge gets, through GIT_CONFIG_COUNT, one credential
// helper (any other reset first), a shell snippet that answers git's "get"
// with what it reads from file descriptor 3. That descriptor is the read end
// of a pipe the daemon fills with "username=…\npassword=…\n" and closes
// before git starts, so the credential is read once, by the helper, when
// the forge first answers 401; it never sits in git's environment (which
// /proc/<pid>/environ shows to every process of the same user) nor in its
// arguments. credential.useHttpPath keeps it to the clone URL's path, and
// redirects are not followed.
//
// Only an HTTP Basic credential (what GitHub's and GitLab's git clients
// send: "x-access-token:<token>", "oauth2:<token>") can be answered so:
// git (before 2.46) takes no other scheme from a helper, so a Bearer or
// token credential is refused (ErrCredentialScheme) rather than put in the
// environment.
const credentialHelper = `!f() { test "$1" = get && cat <&3; }; f`

// ErrCredentialScheme: Spec.Auth gave an Authorization value that is not
// HTTP Basic with a user name and a password.
var ErrCredentialScheme = errors.New("the credential is not HTTP Basic user:password")

// helperAnswer is what the credential helper says to git for auth, an
// Authorization header's value.
func helperAnswer(auth string) (string, error) {
	scheme, cred, _ := strings.Cut(auth, " ")
	if !strings.EqualFold(scheme, "basic") {
		return "", ErrCredentialScheme
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", ErrCredentialScheme
	}
	user, password, ok := strings.Cut(string(b), ":")
	if !ok || user == "" || password == "" || strings.ContainsAny(string(b), "\n\x00") {
		return "", ErrCredentialScheme
	}
	return "username=" + user + "\npassword=" + password + "\n", nil
}

// credentials are the secrets in an Authorization header's value: the value,
// and for Basic its decoded user:password and password, for a token scheme
// the token.
func credentials(auth string) []string {
	secrets := []string{auth}
	scheme, cred, _ := strings.Cut(auth, " ")
	secrets = append(secrets, cred)
	if strings.EqualFold(scheme, "basic") {
		if b, err := base64.StdEncoding.DecodeString(cred); err == nil {
			_, password, _ := strings.Cut(string(b), ":")
			secrets = append(secrets, string(b), password)
		}
	}
	return secrets
}
